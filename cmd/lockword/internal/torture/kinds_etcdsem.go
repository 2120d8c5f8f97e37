package torture

// The etcd semaphore kinds: -workers goroutines, each with its own
// etcdlock.Semaphore (its own lease) on one semaphore of semTorturePermits
// permits, on an embedded etcd server (or -etcd). Each acquires k of them
// (1 to semTortureMaxWeight) and, holding them, checks on entry and exit
// the permits in use twice: an in-process counter updated under the
// permits, and per-permit owner slots in etcd, claimed and freed with the
// Semaphore's guarded writes (a slot whose owner's acquisition has ended
// counts as free). One acquisition in etcdSemDeathEvery dies holding: the
// worker revokes its own lease, as a crash would end it, checks that its
// late guarded write is refused, and goes on with a new Semaphore. The
// permits of the dead must come back exactly once: the ErrOwnerDead
// reports' permits add up to the permits held by the dead, no more.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/etcdlock"
	"github.com/lockword/lockword/internal/etcdembed"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// etcdSemDeathEvery: one acquisition in this many dies holding.
	etcdSemDeathEvery = 8
	// etcdSemTTL is the workers' lease TTL: deaths are revocations, so
	// the TTL only has to outlast a loaded host's keep-alive delays.
	etcdSemTTL = 10 * time.Second
)

func init() {
	register(
		kind{name: "etcd-semaphore", both: true, usage: etcdSemUsage,
			desc: fmt.Sprintf("etcdlock.Semaphore of %d permits on an embedded etcd (or -etcd): owner slots in etcd, holders that die", semTorturePermits),
			run:  func(cfg *config) (report, error) { return tortureEtcdSem(cfg, "etcd-semaphore", semTorturePermits) }},
		kind{name: "etcd-semaphore-broken", both: true, usage: etcdSemUsage,
			desc: fmt.Sprintf("etcd-semaphore on a semaphore of %d permits checked as one of %d: must FAIL", semTorturePermits+1, semTorturePermits),
			run: func(cfg *config) (report, error) {
				return tortureEtcdSem(cfg, "etcd-semaphore-broken", semTorturePermits+1)
			}},
	)
	kindHelp = append(kindHelp, fmt.Sprintf(`etcd semaphore kinds (etcd-semaphore, etcd-semaphore-broken):
  -workers goroutines, each with its own etcdlock.Semaphore (lease TTL
  %v), share a semaphore of %d permits; each acquires 1 to %d permits
  (-iters times, default %d) and, holding them, claims that many of %d
  owner slots in etcd with guarded writes and adds them to an in-process
  counter, checking on entry and exit that neither exceeds %d. One
  acquisition in %d dies holding (its worker revokes its own lease): its
  late guarded write must be refused, and the permits it held must be
  reported back by ErrOwnerDead exactly once. etcd-semaphore-broken runs
  the same checks on a semaphore of %d permits and must FAIL.
  -procs N runs the workers in N processes (lease TTL -ttl) and -kill
  SIGKILLs one at random moments (-kills, default %d; half the time one
  that holds permits): the permits its hold records show, read while it
  is stopped just before the kill, must be reported back by ErrOwnerDead
  exactly once (a last acquirer of every permit collects the reports no
  worker got), and the owner slots must never show an over-grant.
`, etcdSemTTL, semTorturePermits, semTortureMaxWeight, etcdDefaultIters, semTorturePermits, semTorturePermits,
		etcdSemDeathEvery, semTorturePermits+1, etcdDefaultKills))
}

// etcdSemUsage refuses what the semaphore kinds cannot do.
func etcdSemUsage(cfg *config) error {
	if cfg.etcd.pause || cfg.etcd.chaos {
		return errors.New("-pause and -chaos are not supported by the etcd semaphore kinds (-procs N -kill is)")
	}
	return nil
}

// etcdSemReport is the outcome of one etcd semaphore run.
type etcdSemReport struct {
	semReport
	endpoints                        string
	deaths, lostPermits, recovered   int64
	reports, lateRefused, errorsSeen int64
	firstError                       string
	procs, kills                     int // -procs: processes; -kill: kills
	hangs                            int
	// Across processes: reports (dead holders, permits) given to an
	// acquirer that was killed before it could record them.
	lostWithRecoverer, lostPermitsWithRecoverer int64
}

// etcdSemRun is the state the workers share.
type etcdSemRun struct {
	cli                  *clientv3.Client
	data, lock, slots    string
	permits              int // the semaphore's (the broken twin's is one more)
	ttl                  time.Duration
	stop                 *atomic.Bool // across processes: set by the stop key; nil in-process
	killedPIDs           map[int]bool // across processes: the PIDs the supervisor killed
	inUse, maxInUse, bad atomic.Int64
	r                    *etcdSemReport
	mu                   sync.Mutex
}

func tortureEtcdSem(cfg *config, name string, permits int) (report, error) {
	if cfg.procs > 0 {
		return tortureEtcdSemProcs(cfg, name, permits)
	}
	eps := cfg.etcd.endpoints
	r := &etcdSemReport{semReport: semReport{lock: name, workers: cfg.workers}}
	if len(eps) == 0 {
		c, err := etcdembed.Start(1)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		eps = c.Endpoints()
		r.endpoints = "embedded, 1 member on " + strings.Join(eps, ",")
	} else {
		r.endpoints = strings.Join(eps, ",")
	}
	cli, err := newEtcdClient(eps)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	data := fmt.Sprintf("%s%d-%08x", EtcdDataRoot, os.Getpid(), rand.Uint32())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		defer cancel()
		cli.Delete(ctx, data+"/", clientv3.WithPrefix())
	}()
	iters := cfg.iters
	if !cfg.etcd.itersSet {
		iters = etcdDefaultIters
	}
	run := newEtcdSemRun(cli, data, permits, etcdSemTTL, r)
	r.want = int64(cfg.workers) * iters
	start := time.Now()
	var wg sync.WaitGroup
	for w := 1; w <= cfg.workers; w++ {
		wg.Go(func() { run.worker(w, iters) })
	}
	wg.Wait()
	// A last acquirer of every permit collects the reports of deaths that
	// no worker acquired after.
	if err := run.collect(); err != nil {
		run.fail(err)
	}
	r.elapsed = time.Since(start)
	r.violations, r.maxInUse = run.bad.Load(), run.maxInUse.Load()
	r.freeAfter = semTorturePermits
	return r, nil
}

func newEtcdSemRun(cli *clientv3.Client, data string, permits int, ttl time.Duration, r *etcdSemReport) *etcdSemRun {
	return &etcdSemRun{cli: cli, data: data, lock: data + "/sem", slots: data + "/slot/", permits: permits, ttl: ttl, r: r}
}

func (run *etcdSemRun) fail(err error) {
	run.mu.Lock()
	defer run.mu.Unlock()
	run.r.errorsSeen++
	if run.r.firstError == "" {
		run.r.firstError = err.Error()
	}
}

func (run *etcdSemRun) newSem() (*etcdlock.Semaphore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	return etcdlock.NewSemaphore(ctx, run.cli, run.lock, run.permits, &etcdlock.Options{TTL: run.ttl})
}

// acquire acquires k permits, counting a death reported to it.
func (run *etcdSemRun) acquire(s *etcdlock.Semaphore, k int) error {
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	err := s.Acquire(ctx, k)
	var od *etcdlock.SemOwnerDeadError
	if errors.As(err, &od) && run.stop != nil {
		// A worker process may be killed before its end: the report
		// goes to etcd at once, named by the acquisition's token.
		run.record(s.Token(), len(od.Dead), od.Permits)
		return nil
	}
	if errors.As(err, &od) {
		run.mu.Lock()
		run.r.reports += int64(len(od.Dead))
		run.r.recovered += int64(od.Permits)
		run.mu.Unlock()
		return nil
	}
	return err
}

func (run *etcdSemRun) worker(w int, iters int64) {
	s, err := run.newSem()
	if err != nil {
		run.fail(err)
		return
	}
	defer func() { s.Close() }()
	rnd := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	for i := int64(0); run.stop == nil && i < iters || run.stop != nil && !run.stop.Load(); i++ {
		k := 1 + rnd.IntN(semTortureMaxWeight)
		if err := run.acquire(s, k); err != nil {
			run.fail(fmt.Errorf("worker %d: Acquire(%d): %w", w, k, err))
			return
		}
		now := run.inUse.Add(int64(k))
		if now > semTorturePermits {
			run.overGrant()
		}
		for m := run.maxInUse.Load(); now > m && !run.maxInUse.CompareAndSwap(m, now); m = run.maxInUse.Load() {
		}
		slots, err := run.claimSlots(s, k)
		if err != nil {
			run.fail(fmt.Errorf("worker %d: claiming owner slots: %w", w, err))
			return
		}
		run.inUse.Add(-int64(k))
		atomic.AddInt64(&run.r.permitsIn, int64(k))
		atomic.AddInt64(&run.r.acquisitions, 1)
		if run.stop == nil && rnd.IntN(etcdSemDeathEvery) == 0 { // across processes, deaths are kills
			if s, err = run.die(s, slots, k); err != nil {
				run.fail(fmt.Errorf("worker %d: %w", w, err))
				return
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		err = run.freeSlots(ctx, s, slots)
		if err == nil {
			err = s.Release(ctx)
		}
		cancel()
		if err != nil {
			run.fail(fmt.Errorf("worker %d: exit: %w", w, err))
			return
		}
		atomic.AddInt64(&run.r.permitsOut, int64(k))
	}
}

// die ends s's lease while it holds k permits in slots, as a crash would,
// checks that its late guarded write is refused, and returns a new
// Semaphore for the worker to go on with.
func (run *etcdSemRun) die(s *etcdlock.Semaphore, slots []string, k int) (*etcdlock.Semaphore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	if _, err := run.cli.Revoke(ctx, clientv3.LeaseID(s.Identity().Lease)); err != nil {
		return nil, fmt.Errorf("revoking a holder's lease: %w", err)
	}
	run.mu.Lock()
	run.r.deaths++
	run.r.lostPermits += int64(k)
	run.mu.Unlock()
	switch err := run.freeSlots(ctx, s, slots); {
	case errors.Is(err, etcdlock.ErrNotHolder):
		atomic.AddInt64(&run.r.lateRefused, 1)
	case err == nil:
		run.bad.Add(1) // a dead holder wrote
	default:
		return nil, err
	}
	s.Close()
	return run.newSem()
}

// claimSlots claims k owner slots for s's acquisition: slots that are
// free, or whose owner's acquisition has ended (its queue key is gone). A
// holder that finds fewer than k such slots, while the permits in use
// cannot exceed the count, was over-granted.
func (run *etcdSemRun) claimSlots(s *etcdlock.Semaphore, k int) ([]string, error) {
	tok := strconv.FormatInt(s.Token(), 10)
	for try := 0; ; try++ {
		if try == 1000 {
			return nil, errors.New("1000 tries lost to other holders, or the hold ended")
		}
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		resp, err := run.cli.Txn(ctx).Then(
			clientv3.OpGet(run.slots, clientv3.WithPrefix()),
			clientv3.OpGet(run.lock+"/queue/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		).Commit()
		cancel()
		if err != nil {
			return nil, err
		}
		live := map[string]bool{}
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			live[strconv.FormatInt(kv.CreateRevision, 10)] = true
		}
		taken := map[string]*mvccpb.KeyValue{}
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			taken[string(kv.Key)] = kv
		}
		cmps := []clientv3.Cmp{s.Guard()}
		var ops []clientv3.Op
		var mine []string
		for i := 0; i < semTorturePermits && len(mine) < k; i++ {
			key := fmt.Sprintf("%s%d", run.slots, i)
			kv := taken[key]
			if kv != nil && live[string(kv.Value)] {
				continue
			}
			var mod int64
			if kv != nil {
				mod = kv.ModRevision
			}
			mine = append(mine, key)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", mod))
			ops = append(ops, clientv3.OpPut(key, tok))
		}
		if len(mine) < k {
			run.overGrant() // more permits granted than slots
			return nil, nil
		}
		ctx, cancel = context.WithTimeout(context.Background(), etcdOpTimeout)
		r, err := run.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		cancel()
		if err != nil {
			return nil, err
		}
		if r.Succeeded {
			return mine, nil
		}
	}
}

// freeSlots frees s's slots with a guarded write, checking they are still
// its own: ErrNotHolder if s no longer holds.
func (run *etcdSemRun) freeSlots(ctx context.Context, s *etcdlock.Semaphore, slots []string) error {
	tok := strconv.FormatInt(s.Token(), 10)
	var ops []clientv3.Op
	var cmps []clientv3.Cmp
	for _, key := range slots {
		cmps = append(cmps, clientv3.Compare(clientv3.Value(key), "=", tok))
		ops = append(ops, clientv3.OpDelete(key))
	}
	resp, err := s.Txn(ctx, clientv3.OpTxn(cmps, ops, nil))
	if err != nil {
		return err
	}
	if !resp.Responses[0].GetResponseTxn().Succeeded {
		run.overGrant() // another holder took a slot of ours: over-granted
	}
	return nil
}

// collect acquires every permit with a fresh Semaphore, so that deaths no
// worker was told of are reported, and releases them.
func (run *etcdSemRun) collect() error {
	s, err := run.newSem()
	if err != nil {
		return err
	}
	defer s.Close()
	if err := run.acquire(s, run.permits); err != nil {
		return fmt.Errorf("the last Acquire(%d): %w", run.permits, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	return s.Release(ctx)
}

func (r *etcdSemReport) failures() []string {
	var why []string
	if r.violations > 0 {
		why = append(why, fmt.Sprintf("%d over-grants (more than %d permits in use, or an owner slot taken twice)", r.violations, semTorturePermits))
	}
	if r.procs > 0 {
		return append(why, r.procsFailures()...)
	}
	if r.acquisitions != r.want {
		why = append(why, fmt.Sprintf("%d acquisitions, want %d", r.acquisitions, r.want))
	}
	if r.permitsIn != r.permitsOut+r.lostPermits {
		why = append(why, fmt.Sprintf("%d permits acquired, %d released and %d died holding", r.permitsIn, r.permitsOut, r.lostPermits))
	}
	if r.recovered != r.lostPermits || r.reports != r.deaths {
		why = append(why, fmt.Sprintf("%d permits of %d deaths reported recovered by ErrOwnerDead, want %d of %d", r.recovered, r.reports, r.lostPermits, r.deaths))
	}
	if r.lateRefused != r.deaths {
		why = append(why, fmt.Sprintf("%d late writes of dead holders refused, want %d", r.lateRefused, r.deaths))
	}
	if r.errorsSeen > 0 {
		why = append(why, fmt.Sprintf("%d worker errors, the first: %s", r.errorsSeen, r.firstError))
	}
	return why
}

func (r *etcdSemReport) passed() bool { return len(r.failures()) == 0 }

func (r *etcdSemReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: %s\n", r.lock)
	fmt.Fprintf(w, "Endpoints: %s\n", r.endpoints)
	fmt.Fprintf(w, "Workers: %d\n", r.workers)
	fmt.Fprintf(w, "Permits: %d (weights 1-%d)\n", semTorturePermits, semTortureMaxWeight)
	if r.procs > 0 {
		fmt.Fprintf(w, "Processes: %d; SIGKILLed: %d, of them %d holding permits (%d permits)\n", r.procs, r.kills, r.deaths, r.lostPermits)
		fmt.Fprintf(w, "Dead holders reported: %d, permits recovered: %d; told to recoverers killed before recording: %d, %d (want %d, %d in all: exactly once)\n",
			r.reports, r.recovered, r.lostWithRecoverer, r.lostPermitsWithRecoverer, r.deaths, r.lostPermits)
	} else {
		fmt.Fprintf(w, "Acquisitions: %d (want %d)\n", r.acquisitions, r.want)
		fmt.Fprintf(w, "Permits acquired/released/died holding: %d/%d/%d\n", r.permitsIn, r.permitsOut, r.lostPermits)
		fmt.Fprintf(w, "Deaths: %d; reported: %d, permits recovered: %d; late writes refused: %d\n", r.deaths, r.reports, r.recovered, r.lateRefused)
		fmt.Fprintf(w, "Most permits in use at once: %d\n", r.maxInUse)
	}
	fmt.Fprintf(w, "Over-grants: %d\n", r.violations)
	fmt.Fprintf(w, "Duration: %v\n", r.elapsed.Round(time.Millisecond))
	writeResult(w, r.failures())
}

func (r *etcdSemReport) writeJSON(w io.Writer) error {
	return writeJSONLine(w, struct {
		semJSONHead
		Deaths     int64 `json:"deaths"`
		Lost       int64 `json:"permits_died_holding"`
		Recovered  int64 `json:"permits_recovered"`
		OverGrants int64 `json:"over_grants"`
		semJSONTail
	}{semJSONHead{r.lock, r.workers, semTorturePermits, r.acquisitions, r.want}, r.deaths, r.lostPermits, r.recovered,
		r.violations, semTail(r.elapsed, r.failures())})
}
