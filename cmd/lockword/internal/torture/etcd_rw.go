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
// must FAIL.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock"
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
	w := &etcdRWRun{cfg: cfg, cli: cli, keys: keys, iters: iters, broken: broken}
	start := time.Now()
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
	return &etcdReport{base: base, extra: extra, cfg: cfg}, nil
}

// etcdRWRun is one etcd-rw run's shared state: the activity word and the
// counts.
type etcdRWRun struct {
	cfg    *config
	cli    *clientv3.Client
	keys   etcdKeys
	iters  int64
	broken bool
	mu     sync.Mutex

	activity         atomic.Int64 // +1 per reader inside, +10000 per writer
	reads            atomic.Int64
	readViolations   atomic.Int64
	writerViolations atomic.Int64
	deaths           atomic.Int64
}

const rwWriterMark = 10000

func (w *etcdRWRun) worker(id int) error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	rw, err := etcdlock.NewRWMutex(ctx, w.cli, w.keys.lock(), &etcdlock.Options{TTL: w.cfg.etcd.ttl})
	cancel()
	if err != nil {
		return err
	}
	defer rw.Close()
	for range w.iters {
		if rand.IntN(2) == 0 {
			if err := w.read(rw); err != nil {
				return err
			}
		}
		if err := w.write(rw, id); err != nil {
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
		if err := rw.RLockContext(ctx); err != nil {
			return fmt.Errorf("RLockContext: %w", err)
		}
		defer rw.RUnlock()
	}
	bad := w.activity.Add(1) >= rwWriterMark
	defer w.activity.Add(-1)
	g1, err := w.cli.Get(ctx, w.keys.counter())
	if err != nil {
		return err
	}
	time.Sleep(rand.N(etcdRWWindow))
	g2, err := w.cli.Get(ctx, w.keys.counter())
	if err != nil {
		return err
	}
	if w.activity.Load() >= rwWriterMark || counterOf(g1) != counterOf(g2) {
		bad = true
	}
	if bad {
		w.readViolations.Add(1)
	}
	w.reads.Add(1)
	return nil
}

func counterOf(g *clientv3.GetResponse) string {
	if len(g.Kvs) == 0 {
		return "0"
	}
	return string(g.Kvs[0].Value)
}

// write adds value to the counter and 1 to the worker's total under the
// write lock, in one transaction guarded by the hold.
func (w *etcdRWRun) write(rw *etcdlock.RWMutex, id int) error {
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	err := rw.LockContext(ctx)
	if errors.Is(err, lockword.ErrOwnerDead) {
		// Nobody dies in these runs unless a lease expired on a starved
		// host: the data is whole (every update is one transaction).
		w.deaths.Add(1)
		err = rw.MarkConsistent()
	}
	if err != nil {
		return fmt.Errorf("LockContext: %w", err)
	}
	defer rw.Unlock()
	if w.activity.Add(rwWriterMark) != rwWriterMark {
		w.writerViolations.Add(1)
	}
	defer w.activity.Add(-rwWriterMark)
	committed := w.keys.committed(id)
	r, err := w.cli.Txn(ctx).Then(clientv3.OpGet(w.keys.counter()), clientv3.OpGet(committed)).Commit()
	if err != nil {
		return err
	}
	c, n := kvInt(r.Responses[0]), kvInt(r.Responses[1])
	time.Sleep(rand.N(etcdRWWindow))
	_, err = rw.Txn(ctx,
		clientv3.OpPut(w.keys.counter(), strconv.FormatInt(c+w.cfg.value, 10)),
		clientv3.OpPut(committed, strconv.FormatInt(n+1, 10)))
	return err
}
