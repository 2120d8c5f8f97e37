package torture

// The etcd-rw kinds: etcdlock.RWMutex between in-process workers, each
// with its own RWMutex (its own lease). Each iteration a worker reads,
// at random, under the read lock: the counter twice, a few milliseconds
// apart, which must not change; then writes under the write lock: reads
// the counter and its committed total, waits, and writes counter+value
// and total+1 in one transaction guarded by its hold (RWMutex.Txn). An
// activity word in the process counts +1 per reader and +10000 per
// writer inside: a reader that sees 10000 or more, or a writer that sees
// anything but its own 10000, is a violation. The counter must equal
// value × Σ committed. etcd-rw-broken reads without the read lock and
// must FAIL. A reader also writes what it read ("last read seen", a key
// per hold) guarded by its read hold (RWMutex.Txn): across processes a
// reader paused past its lease must have that write refused;
// etcd-rw-unfenced writes it unguarded, and its late write lands: FAIL.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdRWWindow is the most a reader waits between its two reads and a
// writer between its read and its write: where a broken lock shows.
const etcdRWWindow = 3 * time.Millisecond

func tortureEtcdRW(cfg *config, name string, broken bool) (report, error) {
	env, err := startEtcdEnv(cfg)
	if err != nil {
		return nil, err
	}
	defer env.close()
	cli, keys := env.cli, env.keys
	extra := etcdExtra{Endpoints: env.endpoints, TTLSeconds: cfg.etcd.ttl.Seconds(), Violations: []string{}}
	iters := cfg.iters
	if !cfg.etcd.itersSet {
		iters = etcdDefaultIters
	}
	w := &etcdRWRun{cfg: cfg, cli: cli, keys: keys, iters: iters, broken: broken, unfenced: name == "etcd-rw-unfenced", window: etcdRWWindow}
	start := time.Now()
	var procs *etcdRWProcs
	if cfg.procs > 0 {
		if procs, err = w.runProcs(env); err != nil {
			return nil, err
		}
	} else {
		var wg sync.WaitGroup
		for id := 1; id <= cfg.workers; id++ {
			wg.Go(func() {
				if err := w.worker(id); err != nil {
					w.mu.Lock()
					extra.Errors = append(extra.Errors, fmt.Sprintf("worker %d: %v", id, err))
					w.mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)

	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(keys.counter()), clientv3.OpGet(keys.list("committed"), clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, fmt.Errorf("reading the outcome from etcd: %w", err)
	}
	per := make([]int64, cfg.workers)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		id, _ := strconv.Atoi(strings.TrimPrefix(string(kv.Key), keys.list("committed")))
		if id >= 1 && id <= cfg.workers {
			per[id-1], _ = strconv.ParseInt(string(kv.Value), 10, 64)
		}
	}
	base := newReport(cfg, name, hammerRun{perWorker: per, elapsed: elapsed})
	base.iters = iters
	base.expected = int64(cfg.workers) * iters * cfg.value
	base.actual = kvInt(resp.Responses[0])
	base.ownerViolations = w.writerViolations.Load()
	reads := w.reads.Load()
	base.reads, base.readViolations = &reads, w.readViolations.Load()
	base.noStats = "the RWMutex kinds keep none"
	extra.Recoveries = int(w.deaths.Load())
	extra.Acquisitions = uint64(base.total() + reads)
	rep := &etcdReport{base: base, extra: extra, cfg: cfg}
	if procs != nil {
		procs.report(rep)
	}
	return rep, nil
}

// etcdRWRun is one etcd-rw run's shared state: the activity word and the
// counts.
type etcdRWRun struct {
	cfg    *config
	cli    *clientv3.Client
	keys   etcdKeys
	iters  int64
	broken bool
	// unfenced: a reader writes what it read without its hold's guard
	// (etcd-rw-unfenced).
	unfenced bool
	mu       sync.Mutex
	// stop, in a worker process (-procs), is set by the stop key; nil
	// in-process. Across processes the counts below are also written to
	// etcd as they happen (note), since a killed process reports nothing.
	stop *atomic.Bool

	activity atomic.Int64 // +1 per reader inside, +10000 per writer
	// deposed counts this process's writers whose guarded write was
	// refused (paused past the lease): they leave the activity word at
	// once, and a writer that found one inside excuses the overlap.
	deposed          atomic.Int64
	reads            atomic.Int64
	readViolations   atomic.Int64
	writerViolations atomic.Int64
	deaths           atomic.Int64
	rejected         atomic.Int64
	lostReads        atomic.Int64
	readRejected     atomic.Int64  // readers' writes refused: the hold had ended
	lateReadWrites   atomic.Int64  // readers' writes that landed after their hold ended
	readsGaveUp      atomic.Int64  // reads that gave up waiting for a repair (rlock)
	window           time.Duration // a writer's wait between its read and its write
	closing          sync.Map      // *etcdlock.RWMutex closed on purpose (closeRW)
}

// errLostHold ends a worker's RWMutex after a refused late write.
var errLostHold = errors.New("the write hold was lost")

const rwWriterMark = 10000

func (w *etcdRWRun) newRW() (*etcdlock.RWMutex, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	rw, err := etcdlock.NewRWMutex(ctx, w.cli, w.keys.lock(), &etcdlock.Options{TTL: w.cfg.etcd.ttl})
	if err == nil && w.stop != nil {
		go w.recordLeaseLoss(rw)
	}
	return rw, err
}

// recordLeaseLoss records, in a worker process, that rw's lease ended
// while the process lived: stopped by a -pause, or its keep-alives
// starved on a loaded host. A writer holding then is dead to the lock,
// and the next writer is rightly told so; the supervisor counts these
// beside the writers it killed or paused. Lost also closes on Close:
// closeRW marks those first.
func (w *etcdRWRun) recordLeaseLoss(rw *etcdlock.RWMutex) {
	<-rw.Lost()
	if _, closed := w.closing.LoadAndDelete(rw); closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	if w.leaseGone(ctx, rw) {
		w.cli.Put(ctx, fmt.Sprintf("%s%d-%d", w.keys.list("leaselost"), os.Getpid(), rw.Identity().Lease), "1")
	}
}

// closeRW closes rw, marked first as closed on purpose (recordLeaseLoss).
func (w *etcdRWRun) closeRW(rw *etcdlock.RWMutex) {
	w.closing.Store(rw, true)
	rw.Close()
}

func (w *etcdRWRun) worker(id int) error {
	rw, err := w.newRW()
	if err != nil {
		return err
	}
	defer func() { w.closeRW(rw) }()
	for i := int64(0); (w.iters == 0 || i < w.iters) && (w.stop == nil || !w.stop.Load()); i++ {
		var err error
		if rand.IntN(2) == 0 {
			err = w.read(rw)
		}
		if err == nil {
			err = w.write(rw, id)
		}
		// Across processes a paused process loses its leases: its
		// workers go on with new RWMutexes.
		if w.stop != nil && (errors.Is(err, errLostHold) || errors.Is(err, etcdlock.ErrLeaseLost)) {
			w.closeRW(rw)
			rw, err = w.newRW()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// read reads the counter twice under the read lock (without it, broken).
func (w *etcdRWRun) read(rw *etcdlock.RWMutex) error {
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	if !w.broken {
		if err := w.rlock(ctx, rw); err != nil {
			if errors.Is(err, errReadGaveUp) {
				return nil // on to its write, which repairs
			}
			return fmt.Errorf("RLockContext: %w", err)
		}
		defer rw.RUnlock()
	}
	bad := w.activity.Add(1) >= rwWriterMark
	inside := true
	defer func() {
		if inside {
			w.activity.Add(-1)
		}
	}()
	// The counter and the owner slot, twice: the slot shows a writer
	// inside in any process.
	// The first read also marks the hold as reading (a key per hold):
	// the supervisor of a -pause run knows from it which stopped readers
	// hold and have their write still to make.
	var seen [2]string
	token := rw.RToken()
	for i := range seen {
		ops := []clientv3.Op{clientv3.OpGet(w.keys.counter()), clientv3.OpGet(w.keys.owner())}
		if i == 1 {
			time.Sleep(rand.N(etcdRWWindow))
		} else if token != 0 {
			ops = append(ops, clientv3.OpPut(w.keys.list("reading")+strconv.FormatInt(token, 10), ""))
		}
		g, err := w.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return err
		}
		seen[i] = counterOf(g.Responses[0].GetResponseRange())
		if len(g.Responses[1].GetResponseRange().Kvs) > 0 {
			bad = true
		}
	}
	if w.activity.Load() >= rwWriterMark || seen[0] != seen[1] {
		bad = true
	}
	if bad && w.stop != nil && w.leaseGone(ctx, rw) {
		// Paused past its lease (-pause stops a whole process): the read
		// hold ended under it, as a paused writer's hold does, and no
		// lock can prevent that; a reader's reads are not fenced.
		w.note("lostread", &w.lostReads)
		bad = false
	}
	if bad {
		w.note("readviolation", &w.readViolations)
	}
	w.reads.Add(1)
	// Its reads are done: the activity word no longer counts it, so that
	// a reader paused before its write, whose hold ends under the pause,
	// is not seen by the next writer of its process once resumed.
	inside = false
	w.activity.Add(-1)
	if w.broken {
		return nil // no hold to write under
	}
	return w.writeRead(rw, token, seen[1])
}

// writeRead writes what a reader read under its read hold of the given
// token (its read key's create revision) to a key of that hold, in one
// transaction that also lists the read keys: it must land only while
// the hold's key exists. Guarded by the hold (RWMutex.Txn), a late write
// (a reader paused past its lease) is refused, counted, and the worker
// goes on with a new RWMutex; unguarded (etcd-rw-unfenced), it lands:
// a violation. In -pause runs the reader waits up to the pause window
// first, where a pause lands.
func (w *etcdRWRun) writeRead(rw *etcdlock.RWMutex, token int64, seen string) error {
	time.Sleep(rand.N(w.window))
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpPut(w.keys.list("lastread")+strconv.FormatInt(token, 10), seen),
		clientv3.OpGet(w.keys.lock()+"/readers/", clientv3.WithPrefix(), clientv3.WithKeysOnly())}
	var r *clientv3.TxnResponse
	var err error
	if w.unfenced {
		r, err = w.cli.Txn(ctx).Then(ops...).Commit()
	} else {
		r, err = rw.Txn(ctx, ops...)
	}
	if errors.Is(err, etcdlock.ErrNotHolder) && w.stop != nil {
		w.note("readrejected", &w.readRejected)
		return errLostHold
	}
	if err != nil {
		return fmt.Errorf("a reader's write of what it read: %w", err)
	}
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		if kv.CreateRevision == token {
			return nil
		}
	}
	w.note("latereadwrite", &w.lateReadWrites)
	return nil
}

// errReadGaveUp: a reader across processes gave up waiting (see rlock).
var errReadGaveUp = errors.New("gave up waiting for a writer's repair")

// rlock takes rw's read lock within ctx. Across processes (-kill,
// -pause) it waits at most 3 TTLs, then counts the read as given up and
// returns errReadGaveUp: readers wait for a writer to repair a dead
// writer's data, and when every worker not stopped is such a reader, no
// writer comes until one of them gives up its read and writes.
func (w *etcdRWRun) rlock(ctx context.Context, rw *etcdlock.RWMutex) error {
	if w.stop == nil {
		return rw.RLockContext(ctx)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*w.cfg.etcd.ttl)
	defer cancel()
	err := rw.RLockContext(rctx)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		w.note("readgaveup", &w.readsGaveUp)
		return errReadGaveUp
	}
	return err
}

// leaseGone reports whether rw's lease has expired.
func (w *etcdRWRun) leaseGone(ctx context.Context, rw *etcdlock.RWMutex) bool {
	r, err := w.cli.TimeToLive(ctx, clientv3.LeaseID(rw.Identity().Lease))
	return err == nil && r.TTL <= 0
}

// note counts an event in c and, in a worker process, in etcd too.
func (w *etcdRWRun) note(what string, c *atomic.Int64) {
	c.Add(1)
	if w.stop == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	w.cli.Put(ctx, fmt.Sprintf("%s%d-%08x", w.keys.list(what), time.Now().UnixNano(), rand.Uint32()), "1")
}

func counterOf(g interface{ GetKvs() []*mvccpb.KeyValue }) string {
	if kvs := g.GetKvs(); len(kvs) > 0 {
		return string(kvs[0].Value)
	}
	return "0"
}

// write adds value to the counter and 1 to the worker's total under the
// write lock, in one transaction guarded by the hold. The owner slot,
// set on entry and cleared on exit under the hold, must be empty on entry
// (unless a writer died inside: then ErrOwnerDead) and still the
// writer's own on exit.
func (w *etcdRWRun) write(rw *etcdlock.RWMutex, id int) error {
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	err := rw.LockContext(ctx)
	dead := errors.Is(err, lockword.ErrOwnerDead)
	if dead {
		// The data is whole (every update is one transaction); the
		// report is recorded under the hold, so that it is in etcd if
		// and only if this writer got it while still holding.
		w.deaths.Add(1)
		if err := rw.Put(ctx, fmt.Sprintf("%s%d", w.keys.list("ownerdead"), rw.Token()), "1"); err != nil {
			return fmt.Errorf("recording an owner death: %w", err)
		}
		err = rw.MarkConsistent()
	}
	if err != nil {
		return fmt.Errorf("LockContext: %w", err)
	}
	defer rw.Unlock()
	deposed0 := w.deposed.Load()
	overlap := w.activity.Add(rwWriterMark) != rwWriterMark
	if overlap && w.stop == nil {
		w.note("writeviolation", &w.writerViolations)
	}
	inside := true
	leave := func() {
		if inside {
			inside = false
			w.activity.Add(-rwWriterMark)
		}
	}
	defer leave()
	committed, me := w.keys.committed(id), strconv.Itoa(id)
	r, err := rw.Txn(ctx, clientv3.OpGet(w.keys.counter()), clientv3.OpGet(committed), clientv3.OpGet(w.keys.owner()),
		clientv3.OpPut(w.keys.owner(), me))
	if err != nil {
		return w.refused(err, leave)
	}
	if len(r.Responses[2].GetResponseRange().Kvs) > 0 && !dead {
		w.note("writeviolation", &w.writerViolations) // another writer inside
	}
	c, n := kvInt(r.Responses[0]), kvInt(r.Responses[1])
	time.Sleep(rand.N(w.window))
	r, err = rw.Txn(ctx, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(w.keys.owner()), "=", me)},
		[]clientv3.Op{clientv3.OpPut(w.keys.counter(), strconv.FormatInt(c+w.cfg.value, 10)),
			clientv3.OpPut(committed, strconv.FormatInt(n+1, 10)), clientv3.OpDelete(w.keys.owner())}, nil))
	if err != nil {
		return w.refused(err, leave)
	}
	if !r.Responses[0].GetResponseTxn().Succeeded {
		w.note("writeviolation", &w.writerViolations) // the slot was taken while we held
	}
	if overlap && w.stop != nil && !w.overlapWasDeposed(deposed0) {
		w.note("writeviolation", &w.writerViolations) // another writer of this process inside
	}
	return nil
}

// refused is late for a writer's guarded write: a writer whose hold
// ended (deposed: paused past its lease) leaves the activity word first
// and is counted in deposed, so that a writer of this process that
// entered meanwhile can tell it from a second holder.
func (w *etcdRWRun) refused(err error, leave func()) error {
	if errors.Is(err, etcdlock.ErrNotHolder) && w.stop != nil {
		leave()
		w.deposed.Add(1)
	}
	return w.late(err)
}

// overlapWasDeposed reports, for a writer of a worker process that found
// another writer of its process inside on entry, whether that one was
// deposed: a -pause run resumes a writer that lost its lease while
// stopped, and it stays inside until its guarded write is refused. It
// waits for the others to leave (at most hangTimeout), then looks whether
// a refusal came after our entry (deposed0: the count before it).
func (w *etcdRWRun) overlapWasDeposed(deposed0 int64) bool {
	for deadline := time.Now().Add(hangTimeout); w.activity.Load() >= 2*rwWriterMark && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return w.deposed.Load() > deposed0
}

// late counts a guarded write refused because the hold ended (a writer
// paused past its lease, in -pause runs) and returns nil for it: the
// worker goes on with a new RWMutex.
func (w *etcdRWRun) late(err error) error {
	if !errors.Is(err, etcdlock.ErrNotHolder) || w.stop == nil {
		return err
	}
	w.note("rejected", &w.rejected)
	return errLostHold
}
