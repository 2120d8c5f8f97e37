package torture

// An etcd kind's worker: goroutines in the supervisor, or a worker process
// (etcdWorkerMain) with -procs. Each addition is one transaction guarded by
// the lock's fence; a worker that finds its predecessor dead recovers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Event lists under the data prefix, written by the workers as they
// happen (a killed worker cannot report at its end).
const (
	evRecovery  = "recovery"  // etcdRecovery JSON, key: the recoverer's token
	evViolation = "violation" // a description
	evRejected  = "rejected"  // a late write that the guard refused
	evLeaseLost = "leaselost" // the PID of a live worker whose lease expired
)

// etcdRecovery is one ErrOwnerDead acquisition.
type etcdRecovery struct {
	DeadPID    int   `json:"dead_pid"`
	By         int   `json:"by_pid"`
	DetectedNs int64 `json:"detected_unix_ns"`
	RepairedNs int64 `json:"repaired_unix_ns"` // 0 if the recoverer lost the lock before repairing
}

// etcdWorkerSpec tells a worker what to do; it travels as JSON in
// etcdWorkerEnv to a worker process.
type etcdWorkerSpec struct {
	Endpoints []string      `json:"endpoints"`
	Data      string        `json:"data"`
	IDs       []int         `json:"ids"`
	Iters     int64         `json:"iters"` // committed additions per worker; 0: until stop
	Value     int64         `json:"value"`
	Work      int           `json:"work"`
	Fenced    bool          `json:"fenced"`
	Window    time.Duration `json:"window"` // sleep mid-update (pause runs)
	Jitter    time.Duration `json:"jitter"` // random sleep mid-update, up to (kill runs)
	TTL       time.Duration `json:"ttl"`
	// Chaos: cancel most acquisitions at random points (see lockChaos).
	Chaos bool `json:"chaos"`
	// BreakRepair (tests only, from breakRepairEnv) skips the repair.
	BreakRepair bool `json:"break_repair"`
}

// etcdWorkerStats is what a worker process reports on exit.
type etcdWorkerStats struct {
	Acquisitions uint64 `json:"acquisitions"`
	SlowPath     uint64 `json:"slow_path"`
	LeasesLost   int    `json:"leases_lost"`
	Cancelled    uint64 `json:"cancelled"` // -chaos: acquisitions cancelled by their deadline
}

func (s *etcdWorkerStats) add(o etcdWorkerStats) {
	s.Cancelled += o.Cancelled
	s.Acquisitions += o.Acquisitions
	s.SlowPath += o.SlowPath
	s.LeasesLost += o.LeasesLost
}

func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// etcdWorkerStart begins an etcd worker process (etcdWorkerMain,
// etcdKitWorkerMain): it ignores the signals the supervisor's terminal
// sends (the supervisor stops it through etcd), decodes specJSON into
// spec, and connects to the endpoints it names (*eps, within spec). A nil
// client comes with the exit status.
func etcdWorkerStart(specJSON string, spec any, eps *[]string) (*clientv3.Client, int) {
	signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	if err := json.Unmarshal([]byte(specJSON), spec); err != nil {
		fmt.Fprintln(os.Stderr, "lockword torture etcd worker:", err)
		return nil, exitUsage
	}
	cli, err := newEtcdClient(*eps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockword torture etcd worker:", err)
		return nil, exitFail
	}
	return cli, exitOK
}

// etcdWorkerMain is a worker process.
func etcdWorkerMain(specJSON string) int {
	var spec etcdWorkerSpec
	cli, status := etcdWorkerStart(specJSON, &spec, &spec.Endpoints)
	if cli == nil {
		return status
	}
	defer cli.Close()
	st, err := runEtcdWorkers(cli, &spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lockword torture etcd worker %d: %v\n", os.Getpid(), err)
		return exitFail
	}
	json.NewEncoder(os.Stdout).Encode(st)
	return exitOK
}

// runEtcdWorkers runs spec's workers as goroutines until they finish.
func runEtcdWorkers(cli *clientv3.Client, spec *etcdWorkerSpec) (etcdWorkerStats, error) {
	var (
		mu    sync.Mutex
		total etcdWorkerStats
		first error
		wg    sync.WaitGroup
	)
	for _, id := range spec.IDs {
		wg.Go(func() {
			w := &etcdWorker{cli: cli, spec: spec, keys: etcdKeys{spec.Data}, id: id,
				rng: rand.New(rand.NewPCG(rand.Uint64(), uint64(id)))}
			st, err := w.run()
			mu.Lock()
			defer mu.Unlock()
			total.add(st)
			if err != nil && first == nil {
				first = fmt.Errorf("worker %d: %w", id, err)
			}
		})
	}
	wg.Wait()
	return total, first
}

// An etcdWorker is one worker: one Mutex at a time (a new one when its
// lease is lost).
type etcdWorker struct {
	cli   *clientv3.Client
	spec  *etcdWorkerSpec
	keys  etcdKeys
	id    int
	rng   *rand.Rand
	m     *etcdlock.Mutex
	stats etcdWorkerStats
	sink  uint64
	seq   int
}

// retry runs f with a per-request timeout until it succeeds, returns one
// of the errors that are answers (ErrNotHolder, ErrLeaseLost, an owner
// death), or has failed for etcdHangBound.
func (w *etcdWorker) retry(what string, timeout time.Duration, f func(ctx context.Context) error) error {
	bound := etcdHangBound()
	deadline := time.Now().Add(bound)
	pause := 10 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := f(ctx)
		cancel()
		if err == nil || errors.Is(err, etcdlock.ErrNotHolder) || errors.Is(err, etcdlock.ErrLeaseLost) ||
			errors.Is(err, lockword.ErrOwnerDead) || errors.Is(err, lockword.ErrNotRecoverable) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still failing after %v: %w", what, bound.Round(time.Second), err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// event records an event under the data prefix (unguarded: it is a
// report, not protected data).
func (w *etcdWorker) event(list, val string) {
	w.seq++
	key := fmt.Sprintf("%s%d-%d-%d", w.keys.list(list), os.Getpid(), w.id, w.seq)
	w.retry("recording an event", etcdOpTimeout, func(ctx context.Context) error {
		_, err := w.cli.Put(ctx, key, val)
		return err
	})
}

func (w *etcdWorker) newMutex() error {
	if w.m != nil {
		s := w.m.Stats()
		w.stats.Acquisitions += s.Acquisitions
		w.stats.SlowPath += s.SlowPath
		w.m.Close()
		w.m = nil
	}
	return w.retry("creating a Mutex", etcdOpTimeout, func(ctx context.Context) error {
		m, err := etcdlock.NewMutex(ctx, w.cli, w.keys.lock(), &etcdlock.Options{TTL: w.spec.TTL})
		if err == nil {
			m.EnableStats()
			m.SetStuckThreshold(etcdHangBound() / 2)
			w.m = m
		}
		return err
	})
}

// txn commits ops, guarded by the lock for the fenced kinds.
func (w *etcdWorker) txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if w.spec.Fenced {
		return w.m.Txn(ctx, ops...)
	}
	return w.cli.Txn(ctx).Then(ops...).Commit()
}

func (w *etcdWorker) run() (st etcdWorkerStats, err error) {
	if err := w.newMutex(); err != nil {
		return w.stats, err
	}
	defer func() {
		if w.m != nil {
			s := w.m.Stats()
			w.stats.Acquisitions += s.Acquisitions
			w.stats.SlowPath += s.SlowPath
			w.m.Close()
		}
		st = w.stats
	}()
	if err := w.retry("announcing", etcdOpTimeout, func(ctx context.Context) error {
		_, err := w.cli.Put(ctx, w.keys.ready(w.id), strconv.Itoa(os.Getpid()))
		return err
	}); err != nil {
		return w.stats, err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		r, err := w.cli.Get(ctx, w.keys.start())
		cancel()
		if err == nil && len(r.Kvs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return w.stats, errors.New("not released within a minute")
		}
	}
	for {
		done, err := w.addition()
		if err != nil || done {
			return w.stats, err
		}
	}
}

// addition makes one locked update; done reports that the run is over
// (the stop key, or -iters reached).
// lost carries on with a new Mutex after this one's hold or lease is gone.
// A lease that expired (Lost closes, which the keep-alive learns within
// about a TTL) is recorded: the next holder's recovery from this live
// process is then the lease doing its job (a loaded host starved our
// keep-alives), not a live holder robbed.
func (w *etcdWorker) lost() (bool, error) {
	w.stats.LeasesLost++
	select {
	case <-w.m.Lost():
		w.event(evLeaseLost, strconv.Itoa(os.Getpid()))
	case <-time.After(2 * w.spec.TTL):
	}
	return false, w.newMutex()
}

// check sorts the error of a step made holding the lock: nil, go on; the
// hold is gone (a late write the fence rejected: recorded, and a new
// Mutex made); or a failure that ends the worker.
func (w *etcdWorker) check(step string, err error) (goOn, done bool, _ error) {
	switch {
	case err == nil:
		return true, false, nil
	case errors.Is(err, etcdlock.ErrNotHolder):
		w.event(evRejected, step)
		done, err := w.lost()
		return false, done, err
	}
	return false, true, err
}

func (w *etcdWorker) addition() (done bool, err error) {
	lost := w.lost
	if w.spec.Chaos {
		err = w.lockChaos()
	} else {
		err = w.retry("Lock", etcdHangBound(), func(ctx context.Context) error { return w.m.LockContext(ctx) })
	}
	var od *etcdlock.OwnerDeadError
	switch {
	case errors.As(err, &od):
		if err := w.recover(od); err != nil {
			if errors.Is(err, etcdlock.ErrNotHolder) {
				return lost()
			}
			return true, err
		}
	case errors.Is(err, etcdlock.ErrLeaseLost):
		return lost()
	case err != nil:
		return true, err
	}
	k := w.keys
	id := strconv.Itoa(w.id)
	// 1. Enter: set the owner slot if free, read it, the counter, our
	// committed total and the stop key.
	var resp *clientv3.TxnResponse
	err = w.retry("reading", etcdOpTimeout, func(ctx context.Context) (err error) {
		resp, err = w.txn(ctx,
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Version(k.owner()), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(k.owner(), id)}, nil),
			clientv3.OpGet(k.owner()), clientv3.OpGet(k.counter()), clientv3.OpGet(k.committed(w.id)), clientv3.OpGet(k.stop()))
		return err
	})
	if goOn, done, err := w.check("read", err); !goOn {
		return done, err
	}
	if o := resp.Responses[1].GetResponseRange().Kvs; len(o) == 0 || string(o[0].Value) != id {
		w.event(evViolation, fmt.Sprintf("worker %d entered with worker %s inside", w.id, o[0].Value))
	}
	v, c := kvInt(resp.Responses[2]), kvInt(resp.Responses[3])
	stop := len(resp.Responses[4].GetResponseRange().Kvs) > 0 || w.spec.Iters > 0 && c >= w.spec.Iters
	if !stop {
		// 2. The critical section's work: where a kill or a pause lands.
		w.sink = busyWork(w.sink, w.rng.IntN(w.spec.Work+1))
		if d := w.spec.Window + time.Duration(w.rng.Int64N(int64(w.spec.Jitter)+1)); d > 0 {
			time.Sleep(d)
		}
		// 3. Write back: counter and committed total together.
		err = w.retry("writing", etcdOpTimeout, func(ctx context.Context) error {
			_, err := w.txn(ctx, clientv3.OpPut(k.counter(), strconv.FormatInt(v+w.spec.Value, 10)),
				clientv3.OpPut(k.committed(w.id), strconv.FormatInt(c+1, 10)))
			return err
		})
		if goOn, done, err := w.check("write", err); !goOn {
			return done, err
		}
	}
	// 4. Leave: clear the owner slot if it is still ours.
	err = w.retry("leaving", etcdOpTimeout, func(ctx context.Context) (err error) {
		resp, err = w.txn(ctx, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(k.owner()), "=", id)},
			[]clientv3.Op{clientv3.OpDelete(k.owner())}, []clientv3.Op{clientv3.OpGet(k.owner())}))
		return err
	})
	if goOn, done, err := w.check("leave", err); !goOn {
		return done, err
	}
	if t := resp.Responses[0].GetResponseTxn(); !t.Succeeded {
		if o := t.Responses[0].GetResponseRange().Kvs; len(o) > 0 {
			w.event(evViolation, fmt.Sprintf("worker %d left with worker %s inside", w.id, o[0].Value))
		}
	}
	// 5. Unlock.
	err = w.retry("Unlock", etcdOpTimeout, func(ctx context.Context) error { return w.m.UnlockContext(ctx) })
	if errors.Is(err, etcdlock.ErrNotHolder) {
		return lost()
	}
	return stop, err
}

// lockChaos locks with a random deadline per attempt until one succeeds:
// one in four attempts may take etcdHangBound, the others are cancelled
// after 0-5 ms (the first transaction in flight) or 0-600 ms (queued,
// waiting), counted. A cancelled waiter loses its place in the queue, so
// after half the bound without a hold it stops cancelling (the run tests
// cancellations, not starvation). Other errors are retried as by retry
// (a member stopped); it gives up after twice the bound without a hold.
func (w *etcdWorker) lockChaos() error {
	start := time.Now()
	bound := etcdHangBound()
	deadline := start.Add(2 * bound)
	for {
		d := bound
		if time.Since(start) < bound/2 {
			switch w.rng.IntN(4) {
			case 1:
				d = time.Duration(w.rng.Int64N(int64(600 * time.Millisecond)))
			case 2, 3:
				d = time.Duration(w.rng.Int64N(int64(5 * time.Millisecond)))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err := w.m.LockContext(ctx)
		cancel()
		switch {
		case err == nil || errors.Is(err, etcdlock.ErrLeaseLost) ||
			errors.Is(err, lockword.ErrOwnerDead) || errors.Is(err, lockword.ErrNotRecoverable):
			return err
		case errors.Is(err, context.DeadlineExceeded):
			w.stats.Cancelled++
		default:
			time.Sleep(10 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Lock: no acquisition within %v: %w", (2 * bound).Round(time.Second), err)
		}
	}
}

// recover is the repair after an owner death: with every write of an
// update in one transaction there is nothing to undo, so it checks that
// the counter agrees with the committed totals, clears the owner slot the
// dead holder may have left set, records the recovery and marks the lock
// consistent.
func (w *etcdWorker) recover(od *etcdlock.OwnerDeadError) error {
	ev := etcdRecovery{DeadPID: od.Dead.PID, By: os.Getpid(), DetectedNs: time.Now().UnixNano()}
	k := w.keys
	key := fmt.Sprintf("%s%020d", k.list(evRecovery), w.m.Token())
	record := func() error {
		b, _ := json.Marshal(ev)
		return w.retry("recording a recovery", etcdOpTimeout, func(ctx context.Context) error {
			_, err := w.cli.Put(ctx, key, string(b))
			return err
		})
	}
	// Recorded first, unguarded: if this worker's own lease expires
	// before it repairs (a starved host), the next acquirer recovers from
	// it, and this death stays counted once.
	if !w.spec.BreakRepair {
		if err := record(); err != nil {
			return err
		}
	}
	var resp *clientv3.TxnResponse
	err := w.retry("reading for repair", etcdOpTimeout, func(ctx context.Context) (err error) {
		resp, err = w.cli.Txn(ctx).Then(clientv3.OpGet(k.counter()), clientv3.OpGet(k.list("committed"), clientv3.WithPrefix())).Commit()
		return err
	})
	if err != nil {
		return err
	}
	var sum int64
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		n, _ := strconv.ParseInt(string(kv.Value), 10, 64)
		sum += n
	}
	if kvInt(resp.Responses[0]) != sum*w.spec.Value {
		w.event(evViolation, fmt.Sprintf("after the death of PID %d the counter is %d, the committed additions %d × %d", od.Dead.PID, kvInt(resp.Responses[0]), sum, w.spec.Value))
	}
	if w.spec.BreakRepair {
		// Tests only: a worker that ignores the death. The checks must
		// see the owner slot left set and the unrecorded recovery.
		return w.retry("MarkConsistent", etcdOpTimeout, func(ctx context.Context) error { return w.m.MarkConsistentContext(ctx) })
	}
	// The repair proper: the dead holder may have left its id in the
	// owner slot. Guarded: a holder that lost the lock meanwhile changes
	// nothing.
	if err := w.retry("repairing", etcdOpTimeout, func(ctx context.Context) error {
		_, err := w.m.Txn(ctx, clientv3.OpDelete(k.owner()))
		return err
	}); err != nil {
		return err
	}
	if err := w.retry("MarkConsistent", etcdOpTimeout, func(ctx context.Context) error { return w.m.MarkConsistentContext(ctx) }); err != nil {
		return err
	}
	ev.RepairedNs = time.Now().UnixNano()
	return record()
}

// kvInt is the integer value of a one-key range response, 0 if absent.
func kvInt(r *etcdResponseOp) int64 {
	kvs := r.GetResponseRange().Kvs
	if len(kvs) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	return n
}
