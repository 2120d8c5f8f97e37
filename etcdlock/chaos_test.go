package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock/etcdtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The invariant under test (see Mutex, "Calls that fail"): a call that
// returned an error holds nothing, and what it wrote is gone once its
// Mutex is idle again (its background clean-up done, at most about two
// TTLs later); a write of it that lands late is refused.

// slowDelay is the extra latency of the slow endpoint: far above a
// loopback round trip, so that a request sent to it lands after the
// caller's short deadline and after a clean-up sent to the fast one.
const slowDelay = 200 * time.Millisecond

// lateSettle is how long a check waits, after the Mutex is idle, for
// requests still on the slow link to land: the link's delay plus margin
// for a loaded host. A late write landing after it is missed by this
// check (not excused): the storm repeats the check thousands of times.
const lateSettle = slowDelay + 200*time.Millisecond

// slowClient returns a client with two endpoints on the test server: the
// server itself and a proxy to it that delays every byte by slowDelay.
func slowClient(t testing.TB) *clientv3.Client {
	px := etcdtest.NewProxy(t, endpoints[0])
	px.SetDelay(slowDelay)
	cli := newClient(t, []string{endpoints[0], px.Addr()})
	// The balancer uses the slow endpoint once its connection is up
	// (handshakes through the delay): wait until a request takes it.
	for deadline := time.Now().Add(lockTimeout); ; {
		t0 := time.Now()
		if _, err := cli.Get(context.Background(), "/lockword-test/ping"); err != nil {
			t.Fatal(err)
		}
		if time.Since(t0) >= slowDelay {
			return cli
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow endpoint never served a request")
		}
	}
}

// leftBehind returns what m, idle and not holding, still has in etcd: its
// queue key, or a hold record naming it (a phantom holder).
func leftBehind(cli *clientv3.Client, m *Mutex) error {
	m.waitIdle()
	time.Sleep(lateSettle)
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	r, err := cli.Txn(ctx).Then(clientv3.OpGet(m.queueKey), clientv3.OpGet(m.ownerKey)).Commit()
	if err != nil {
		return err
	}
	if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		return fmt.Errorf("stale queue key %s (create revision %d) of a Mutex that does not hold", kvs[0].Key, kvs[0].CreateRevision)
	}
	if kvs := r.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		if rec, err := parseRecord(kvs[0].Value); err == nil && rec.Key == m.queueKey {
			return fmt.Errorf("phantom holder: the hold record %s names a Mutex that does not hold", kvs[0].Value)
		}
	}
	return nil
}

// TestMutexCancelledLateWrite: a LockContext whose deadline ends while
// its transaction is on the slow link returns an error; the transaction
// lands afterwards and must not take the lock or queue.
func TestMutexCancelledLateWrite(t *testing.T) {
	t.Parallel()
	cli := slowClient(t)
	m := newMutex(t, cli, prefix(t))
	cancelled := 0
	for i := range 20 {
		// The balancer alternates the endpoints request by request: a
		// read on odd rounds shifts which one the lock's first
		// transaction takes (else Lock and Unlock could keep to one each).
		if i%2 == 1 {
			if _, err := cli.Get(context.Background(), "/lockword-test/ping"); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), slowDelay/4)
		err := m.LockContext(ctx)
		cancel()
		if err == nil {
			m.Unlock()
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		cancelled++
		if err := leftBehind(cli, m); err != nil {
			t.Fatalf("after cancelled acquisition %d: %v", cancelled, err)
		}
	}
	if cancelled == 0 {
		t.Fatal("no acquisition was cancelled: the slow endpoint was never used")
	}
}

// TestMutexCancellationStorm: workers with a client each (one endpoint
// 200 ms slower) lock with deadlines at random points, 2,000 cancellations
// in all; each hold increments a counter in etcd (read, then guarded
// write). Mutexes are closed and replaced every 40 attempts, so that a
// phantom hold would surface as an owner death. Checks: an exact counter,
// no owner-death report (nobody dies), no stale key or phantom holder
// after a sample of cancellations and at the end.
func TestMutexCancellationStorm(t *testing.T) {
	t.Parallel()
	workers, cancellations := 6, int64(2000)
	if testing.Short() {
		cancellations = 300
	}
	p := prefix(t)
	counter := p + "-counter"
	check := newClient(t, endpoints)
	var cancelled, held, falseDead atomic.Int64
	var slot atomic.Int32
	errs := make(chan error, workers)
	// The first failure dumps the keys and the goroutines as they are
	// when it happens, before the other workers move on.
	var dumpOnce sync.Once
	fail := func(err error) {
		dumpOnce.Do(func() { dumpState(t, check, p) })
		errs <- err
	}
	var wg sync.WaitGroup
	for id := int32(1); id <= int32(workers); id++ {
		cli := slowClient(t)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
			m, err := NewMutex(context.Background(), cli, p, &Options{TTL: liveTTL})
			if err != nil {
				fail(err)
				return
			}
			defer func() { closeMutex(m) }()
			for attempt := 1; cancelled.Load() < cancellations; attempt++ {
				if attempt%40 == 0 {
					if err := closeMutex(m); err != nil {
						fail(err)
						return
					}
					if m, err = NewMutex(context.Background(), cli, p, &Options{TTL: liveTTL}); err != nil {
						fail(fmt.Errorf("NewMutex: %w", err))
						return
					}
				}
				// Mostly short deadlines (the first transaction in
				// flight), some long enough to queue and wait, some
				// that do not end: holds for the counter.
				// (A hold through the slow link takes about a second, so
				// these are few, to keep the run near a minute.)
				d := time.Duration(rng.Int64N(int64(5 * time.Millisecond)))
				switch r := rng.IntN(30); {
				case r < 8:
					d = time.Duration(rng.Int64N(int64(3 * slowDelay)))
				case r == 8:
					d = lockTimeout
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				err := m.LockContext(ctx)
				cancel()
				switch {
				case err == nil:
				case errors.Is(err, lockword.ErrOwnerDead):
					falseDead.Add(1)
					m.MarkConsistent()
				case errors.Is(err, context.DeadlineExceeded) || serverTimedOut(err):
					// Cancelled, or failed because the server could not
					// commit in time (a loaded host, the slow link): a
					// failed call all the same, which must leave nothing.
					if n := cancelled.Add(1); n%25 == 0 {
						if err := leftBehind(check, m); err != nil {
							fail(fmt.Errorf("after %d cancellations: %w", n, err))
							return
						}
					}
					continue
				default:
					fail(fmt.Errorf("LockContext: %w", err))
					return
				}
				if !slot.CompareAndSwap(0, id) {
					fail(fmt.Errorf("worker %d holds with worker %d", id, slot.Load()))
				}
				if err := increment(m, cli, counter); err != nil {
					fail(err)
					return
				}
				held.Add(1)
				slot.Store(0)
				m.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if falseDead.Load() != 0 {
		t.Errorf("%d owner-death reports, and no holder died", falseDead.Load())
	}
	time.Sleep(lateSettle)
	info, err := Inspect(context.Background(), check, p)
	if err != nil || info.State != StateFree || len(info.Waiters) != 0 {
		t.Errorf("after the storm, every Mutex closed: %+v, %v; want free, no waiters", info, err)
	}
	if err := lockCtx(t, newMutex(t, check, p)); err != nil {
		t.Errorf("a new Mutex after the storm: %v", err)
	}
	r, err := check.Get(context.Background(), counter)
	if err != nil {
		t.Fatal(err)
	}
	got := int64(0)
	if len(r.Kvs) == 1 {
		got, _ = strconv.ParseInt(string(r.Kvs[0].Value), 10, 64)
	}
	t.Logf("%d cancelled, %d held, counter %d; %d Closes timed out (so far in this binary) and were followed by a revocation", cancelled.Load(), held.Load(), got, closesTimedOut.Load())
	if got != held.Load() {
		t.Errorf("counter %d after %d holds", got, held.Load())
	}
}

// closeMutex closes m, which holds nothing, and makes sure its lease is
// gone, as a careful user would. Close is bounded (closeTimeout, 1 s, for
// the wait on a background clean-up and the revocation together): on a
// loaded host, behind a clean-up through the slow link, the revocation
// may not get through in time, and Close says so (the keys would go with
// the lease, liveTTL later, and the storm's final check for stale keys
// would fail). So its deadline error is answered by revoking again with
// time, and waiting for the clean-up; any other error is returned.
func closeMutex(m *Mutex) error {
	err := m.Close()
	if err == nil {
		return nil
	}
	closesTimedOut.Add(1)
	if !errors.Is(err, context.DeadlineExceeded) && !serverTimedOut(err) {
		return fmt.Errorf("Close: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	if err := m.sess.revoke(ctx); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoking the lease after Close timed out: %w", err)
	}
	m.waitIdle()
	return nil
}

// closesTimedOut counts the Closes that closeMutex answered with a
// revocation of its own (logged by the storm).
var closesTimedOut atomic.Int64

// serverTimedOut reports whether err is etcd's own request timeout: the
// server took the request but could not commit it in time, which a loaded
// host or a member stop causes; the call failed, as a cancelled one does.
func serverTimedOut(err error) bool {
	for _, e := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrLeaderChanged} {
		if errors.Is(err, e) || strings.Contains(err.Error(), rpctypes.ErrorDesc(e)) {
			return true
		}
	}
	return false
}

// increment adds one to the counter at key, holding m: read, then a write
// guarded by m's hold.
func increment(m *Mutex, cli *clientv3.Client, key string) error {
	read := func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
		defer cancel()
		r, err := cli.Get(ctx, key)
		if err != nil || len(r.Kvs) == 0 {
			return 0, err
		}
		return strconv.Atoi(string(r.Kvs[0].Value))
	}
	v, err := read()
	for tries := 0; err != nil && tries < 3; tries++ {
		v, err = read() // a read may be retried: it changes nothing
	}
	if err != nil {
		return fmt.Errorf("reading the counter: %w", err)
	}
	for tries := 0; ; tries++ {
		ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
		err := m.Put(ctx, key, strconv.Itoa(v+1))
		cancel()
		if err == nil {
			return nil
		}
		if !errors.Is(err, context.DeadlineExceeded) || tries == 2 {
			return fmt.Errorf("writing the counter (try %d): %w", tries+1, err)
		}
		// The reply did not come in time (a loaded host, the slow link):
		// whether the write landed is read back. We still hold the lock,
		// so nobody else moves the counter, and the write sets v+1 rather
		// than adding, so sending it again cannot count twice; a copy
		// that lands after our Unlock fails the holder guard.
		now, rerr := read()
		if rerr == nil && now == v+1 {
			return nil
		}
	}
}

// overrunBound is the most a blocking call may return after its deadline
// (the type's promise, on a quiet host). A loaded host can delay the
// returning goroutine past it, so a measurement over the bound is
// repeated (up to overrunTries times): the bound itself is not relaxed.
const (
	overrunBound = 100 * time.Millisecond
	overrunTries = 5
)

// overrun measures how long after its deadline call returns, the best of
// up to overrunTries tries; call gets a context with deadline d from now.
func overrun(t *testing.T, name string, d time.Duration, call func(ctx context.Context) error) {
	t.Helper()
	best := time.Duration(1<<63 - 1)
	for range overrunTries {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		dl, _ := ctx.Deadline()
		err := call(ctx)
		late := time.Since(dl)
		cancel()
		t.Logf("%s: %v, %v after the deadline", name, err, late.Round(time.Millisecond))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s with etcd unreachable: %v, want the context's error", name, err)
		}
		best = min(best, late)
		if late <= overrunBound || late > time.Second {
			break // met, or missed by more than scheduling noise
		}
	}
	t.Logf("%s: returned %v after its deadline", name, best.Round(time.Millisecond))
	if best > overrunBound {
		t.Errorf("%s returned %v after its deadline in the best of %d tries; the bound is %v", name, best, overrunTries, overrunBound)
	}
}

// TestMutexDeadlines: with etcd unreachable (a proxy that forwards
// nothing, connections open) every blocking call returns by its deadline
// plus overrunBound, and Close and Unlock, which take no context, within
// closeTimeout and unlockWait plus overrunBound.
func TestMutexDeadlines(t *testing.T) {
	t.Parallel()
	px := etcdtest.NewProxy(t, endpoints[0])
	cli := newClient(t, []string{px.Addr()})
	p := prefix(t)
	holder := newMutex(t, newClient(t, endpoints), p)
	if err := lockCtx(t, holder); err != nil {
		t.Fatal(err)
	}
	m := newMutex(t, cli, p)
	// TryLockContext on Mutexes of their own: m (and each one tried) is
	// busy with the clean-up of its failed call until etcd answers.
	var tries []*Mutex
	for range overrunTries {
		tries = append(tries, newMutex(t, cli, p))
	}
	const d = 150 * time.Millisecond
	px.Blackhole(true)
	overrun(t, "LockContext", d, m.LockContext)
	overrun(t, "TryLockContext", d, func(ctx context.Context) error {
		ok, err := tries[0].TryLockContext(ctx)
		tries = tries[1:]
		if ok {
			return nil
		}
		return err
	})
	overrun(t, "NewMutex", d, func(ctx context.Context) error { _, err := NewMutex(ctx, cli, p, nil); return err })
	px.Heal()
	m.waitIdle()
	holder.Unlock()
	if err := lockCtx(t, m); err != nil {
		t.Fatal(err)
	}
	px.Blackhole(true)
	overrun(t, "Put", d, func(ctx context.Context) error { return m.Put(ctx, p+"-data", "x") })
	overrun(t, "UnlockContext", d, m.UnlockContext)
	for _, c := range []struct {
		name  string
		bound time.Duration
		call  func()
	}{
		{"Unlock", unlockWait, m.Unlock},
		{"Close", closeTimeout, func() { m.Close() }},
	} {
		// These calls cannot be repeated as overrun does (one Unlock,
		// one Close): the allowance follows the host's load instead.
		if err := withinBound(t, c.name+" with etcd unreachable", c.bound, c.call); err != nil {
			t.Error(err)
		}
	}
}

// A call that takes no context (Unlock, Close) is judged against its
// bound plus overrunBound plus boundCanaryFactor times the worst lateness
// of a canary beside it: a goroutine that sleeps boundCanaryPeriod over
// and over and notes how late each wake-up is (shm's live-word fuzzer
// does the same). On a quiet host the canary is on time and the bound is
// the type's promise as it stands. On a loaded one the call's return is
// delayed at each point where a goroutine waits to be run: the timer of
// its bound fires, gRPC's goroutine sees the context end and cancels the
// stream, the caller blocked on the reply is woken, Unlock starts its
// background goroutine and returns, the test's goroutine resumes. Five
// such points, each as late as the canary's worst wake-up, is the
// factor. A real overrun waits for etcd: at least a timeout of this
// package (unlockWait and closeTimeout are 1 s), which only a canary
// woken 180 ms late would excuse; TestWithinBoundCatchesOverrun shows
// one caught.
const (
	boundCanaryPeriod = 10 * time.Millisecond
	boundCanaryFactor = 5
)

// withinBound runs call with a canary beside it and returns an error
// naming what if call took longer than bound plus the allowance above.
func withinBound(t testing.TB, what string, bound time.Duration, call func()) error {
	var worst atomic.Int64 // the canary's latest wake-up, ns past its sleep
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Go(func() {
		// The first wake-up is due one period after t0, so that a
		// canary started late counts its start; the last one, after
		// call returned, counts too.
		for due := t0.Add(boundCanaryPeriod); ; due = time.Now().Add(boundCanaryPeriod) {
			time.Sleep(time.Until(due))
			late := int64(time.Since(due))
			for w := worst.Load(); late > w && !worst.CompareAndSwap(w, late); w = worst.Load() {
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	call()
	took := time.Since(t0)
	close(stop)
	wg.Wait()
	canary := time.Duration(worst.Load())
	allowed := bound + overrunBound + boundCanaryFactor*canary
	t.Logf("%s took %v (bound %v; allowed %v: a canary beside it woke up at worst %v late)", what, took.Round(time.Millisecond), bound, allowed.Round(time.Millisecond), canary.Round(time.Millisecond))
	if took > allowed {
		return fmt.Errorf("%s took %v; the bound is %v, plus %d times the %v a canary beside it was late", what, took, bound+overrunBound, boundCanaryFactor, canary)
	}
	return nil
}

// TestWithinBoundCatchesOverrun: withinBound reports a call that overruns
// its bound as a real one would, waiting one timeout of this package (1 s)
// more; a call within its bound passes. A try in which the canary itself
// was late enough to excuse the overrun (a host stalled for 180 ms) judges
// nothing and is repeated, up to overrunTries times.
func TestWithinBoundCatchesOverrun(t *testing.T) {
	t.Parallel()
	const bound = 50 * time.Millisecond
	if err := withinBound(t, "a call within its bound", bound, func() { time.Sleep(bound / 2) }); err != nil {
		t.Errorf("a call within its bound was reported: %v", err)
	}
	for try := range overrunTries {
		err := withinBound(t, "a planted overrun", bound, func() { time.Sleep(bound + unlockWait) })
		if err != nil {
			t.Logf("caught (try %d): %v", try+1, err)
			return
		}
	}
	t.Errorf("a call that overran its bound by %v passed withinBound in %d tries", unlockWait, overrunTries)
}

// TestMutexFailedCallLeavesNothing: the invariant for a lost reply (the
// write committed, its caller never heard) and a lost connection, for
// LockContext, TryLockContext and the unlocks: once the Mutex is idle
// nothing of the failed call is left, and the next acquirer gets the lock
// without an owner-death report.
func TestMutexFailedCallLeavesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		// fail breaks the link (px) during a call of m; check runs
		// after the link is healed.
		fail func(t *testing.T, px *etcdtest.Proxy, m, holder *Mutex)
	}{
		{"LockContext/lost reply", func(t *testing.T, px *etcdtest.Proxy, m, _ *Mutex) {
			px.DropReplies(true)
			if err := lockWithin(m, 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("LockContext, replies lost: %v", err)
			}
		}},
		{"TryLockContext/lost reply", func(t *testing.T, px *etcdtest.Proxy, m, _ *Mutex) {
			px.DropReplies(true)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if ok, err := m.TryLockContext(ctx); ok || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryLockContext, replies lost: %v, %v", ok, err)
			}
		}},
		{"LockContext/lost connection while waiting", func(t *testing.T, px *etcdtest.Proxy, m, holder *Mutex) {
			if err := lockCtx(t, holder); err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(150*time.Millisecond, px.Cut)
			// The deadline, or the client's error for the cut (either
			// is a failed call; what it leaves is the point).
			if err := lockWithin(m, 500*time.Millisecond); err == nil || errors.Is(err, lockword.ErrOwnerDead) {
				t.Fatalf("LockContext, connection cut: %v, want an error", err)
			}
			holder.Unlock()
		}},
		{"UnlockContext/lost reply", func(t *testing.T, px *etcdtest.Proxy, m, _ *Mutex) {
			if err := lockCtx(t, m); err != nil {
				t.Fatal(err)
			}
			px.DropReplies(true)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if err := m.UnlockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("UnlockContext, replies lost: %v", err)
			}
			px.Heal()
			// Still held as far as m knows: the retry finds it released
			// (after the client's first request on the healed link
			// reports the connection it lost).
			err := m.UnlockContext(context.Background())
			for tries := 0; err != nil && !errors.Is(err, ErrNotHolder) && tries < 20; tries++ {
				time.Sleep(50 * time.Millisecond)
				err = m.UnlockContext(context.Background())
			}
			if !errors.Is(err, ErrNotHolder) {
				t.Fatalf("UnlockContext again: %v, want ErrNotHolder (the first committed)", err)
			}
		}},
		{"Unlock/lost reply", func(t *testing.T, px *etcdtest.Proxy, m, _ *Mutex) {
			if err := lockCtx(t, m); err != nil {
				t.Fatal(err)
			}
			px.DropReplies(true)
			m.Unlock()
			if m.Token() != 0 {
				t.Fatal("Unlock returned with m still holding")
			}
		}},
		{"Unlock/unreachable", func(t *testing.T, px *etcdtest.Proxy, m, _ *Mutex) {
			if err := lockCtx(t, m); err != nil {
				t.Fatal(err)
			}
			px.Blackhole(true)
			m.Unlock() // hands the unlock to the background
			time.Sleep(300 * time.Millisecond)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			direct := newClient(t, endpoints)
			px := etcdtest.NewProxy(t, endpoints[0])
			p := prefix(t)
			m := newMutex(t, newClient(t, []string{px.Addr()}), p)
			holder := newMutex(t, direct, p)
			c.fail(t, px, m, holder)
			px.Heal()
			if err := leftBehind(direct, m); err != nil {
				t.Fatal(err)
			}
			next := newMutex(t, direct, p)
			if err := lockCtx(t, next); err != nil {
				t.Fatalf("the next acquirer: %v", err)
			}
			next.Unlock()
			if err := lockCtx(t, m); err != nil {
				t.Fatalf("m after its failed call: %v", err)
			}
			m.Unlock()
		})
	}
}

func lockWithin(m *Mutex, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return m.LockContext(ctx)
}
