package etcdlock

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func newSem(t testing.TB, cli *clientv3.Client, p string, permits int, ttl time.Duration) *Semaphore {
	t.Helper()
	s, err := NewSemaphore(context.Background(), cli, p, permits, &Options{TTL: ttl})
	return closedAtEnd(t, s, err)
}

func acquire(t testing.TB, s *Semaphore, n int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	return s.Acquire(ctx, n)
}

// semKeys returns the keys under p's queue and holds directories.
func semKeys(t testing.TB, cli *clientv3.Client, p string) []string {
	t.Helper()
	var keys []string
	for _, dir := range []string{queueDir, holdsDir} {
		r, err := cli.Get(context.Background(), p+dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range r.Kvs {
			keys = append(keys, string(kv.Key))
		}
	}
	return keys
}

func TestSemaphoreBadArguments(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		prefix  string
		permits int
	}{
		{"no permits", p, 0}, {"negative permits", p, -1},
		{"name inside another semaphore's holds", p + "/holds/x", 2}, {"empty name", "", 2},
	} {
		if s, err := NewSemaphore(ctx, cli, c.prefix, c.permits, nil); !errors.Is(err, ErrBadArgument) {
			if s != nil {
				s.Close()
			}
			t.Errorf("NewSemaphore, %s: %v, want ErrBadArgument", c.name, err)
		}
	}
	s := newSem(t, cli, p, 3, liveTTL)
	for _, n := range []int{0, -1, 4, math.MinInt} {
		if err := acquire(t, s, n); !errors.Is(err, ErrBadArgument) {
			t.Errorf("Acquire(%d) of 3: %v, want ErrBadArgument", n, err)
		}
		if ok, err := s.TryAcquire(ctx, n); ok || !errors.Is(err, ErrBadArgument) {
			t.Errorf("TryAcquire(%d) of 3: %v %v, want ErrBadArgument", n, ok, err)
		}
	}
	if err := acquire(t, s, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Another count on the same name is refused, naming both.
	other := newSem(t, cli, p, 5, liveTTL)
	if err := acquire(t, other, 1); !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), "not 5") {
		t.Fatalf("Acquire on a semaphore of 3 as one of 5: %v, want ErrBadArgument", err)
	}
	if err := s.Release(ctx); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("Release without a hold: %v, want ErrNotHolder", err)
	}
}

// TestSemaphoreFIFO: a request of N permits waits behind the holders before
// it, and a small request after it waits behind it, though a permit is free.
func TestSemaphoreFIFO(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	a, big, small := newSem(t, cli, p, 2, liveTTL), newSem(t, cli, p, 2, liveTTL), newSem(t, cli, p, 2, liveTTL)
	if err := acquire(t, a, 1); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- acquire(t, big, 2) }()
	waitOneWaiterSem(t, cli, p, 2)
	if si, err := InspectSemaphore(ctx, cli, p); err != nil || si.Permits != 2 || si.InUse != 1 || len(si.Holders) != 1 || len(si.Waiters) != 1 || si.Waiters[0].N != 2 {
		t.Fatalf("InspectSemaphore, one holder of 1 and a waiter for 2: %+v, %v", si, err)
	}
	if ok, err := small.TryAcquire(ctx, 1); ok || err != nil {
		t.Fatalf("TryAcquire(1) behind a waiting Acquire(2): %v %v, want false: the large request would starve", ok, err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := small.Acquire(short, 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire(1) behind a waiting Acquire(2): %v, want DeadlineExceeded", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if big.Held() != 2 || big.Token() <= a.Token() {
		t.Fatalf("big holds %d, token %d", big.Held(), big.Token())
	}
	if err := big.Release(ctx); err != nil {
		t.Fatal(err)
	}
	small.waitIdle()
	if keys := semKeys(t, cli, p); len(keys) != 0 {
		t.Fatalf("keys left after every Release and a cancelled Acquire: %v", keys)
	}
}

// waitOneWaiterSem waits until p's queue has want keys.
func waitOneWaiterSem(t *testing.T, cli *clientv3.Client, p string, want int) {
	t.Helper()
	for deadline := time.Now().Add(lockTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r, err := cli.Get(context.Background(), p+queueDir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && r.Count == int64(want) {
			return
		}
	}
	t.Fatalf("the queue of %s never had %d keys", p, want)
}

// TestSemaphoreContention: 6 holders of a 3-permit semaphore ask 1..3
// permits, a third of the acquisitions cancelled at random points; the
// permits in use (counted in the process, under the permits) never exceed
// 3, and nothing is left once all are closed. It proves nothing about
// speed: a loaded host only makes it slower (and may make etcd time a
// request out, which fails that Acquire like a cancellation).
func TestSemaphoreContention(t *testing.T) {
	cli, p := parallelClient(t)
	const permits, holders, rounds = 3, 6, 8
	var inUse, over, held, cancelled atomic.Int64
	var wg sync.WaitGroup
	sems := make([]*Semaphore, holders)
	for i := range sems {
		sems[i] = newSem(t, cli, p, permits, liveTTL)
	}
	for _, s := range sems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				k := 1 + rand.IntN(permits)
				timeout := lockTimeout
				if rand.IntN(3) == 0 {
					timeout = time.Duration(rand.IntN(20)) * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				err := s.Acquire(ctx, k)
				cancel()
				if err != nil {
					// etcd's own request timeout (a loaded host)
					// fails the call as a cancellation does.
					if !errors.Is(err, context.DeadlineExceeded) && !serverTimedOut(err) {
						t.Errorf("Acquire(%d): %v", k, err)
					}
					if s.Held() != 0 {
						t.Errorf("a failed Acquire holds %d", s.Held())
					}
					cancelled.Add(1)
					continue
				}
				if n := inUse.Add(int64(k)); n > permits {
					over.Add(1)
				}
				held.Add(1)
				time.Sleep(time.Millisecond)
				inUse.Add(-int64(k))
				if err := s.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if over.Load() != 0 {
		t.Fatalf("permits in use above %d %d times", permits, over.Load())
	}
	for _, s := range sems {
		s.waitIdle()
	}
	if keys := semKeys(t, cli, p); len(keys) != 0 {
		t.Fatalf("keys left after %d holds and %d failed Acquires: %v", held.Load(), cancelled.Load(), keys)
	}
	t.Logf("%d holds, %d cancelled", held.Load(), cancelled.Load())
}

// TestSemaphoreOwnerDead: a holder's lease is revoked while it holds 2 of 3
// permits; the permits come back, the next acquirer holds with
// ErrOwnerDead naming 2 permits, the one after is not told again, and the
// dead holder's guarded write is refused.
func TestSemaphoreOwnerDead(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	dead, next, after := newSem(t, cli, p, 3, liveTTL), newSem(t, cli, p, 3, liveTTL), newSem(t, cli, p, 3, liveTTL)
	if err := acquire(t, dead, 2); err != nil {
		t.Fatal(err)
	}
	if err := dead.Put(ctx, p+"-data", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(dead.Identity().Lease)); err != nil {
		t.Fatal(err)
	}
	if si, err := InspectSemaphore(ctx, cli, p); err != nil || si.InUse != 0 || len(si.Dead) != 1 || si.Dead[0].N != 2 {
		t.Fatalf("InspectSemaphore after a holder of 2 died: %+v, %v", si, err)
	}
	err := acquire(t, next, 3)
	var ode *SemOwnerDeadError
	if !errors.Is(err, lockword.ErrOwnerDead) || !errors.As(err, &ode) || ode.Permits != 2 || len(ode.Dead) != 1 || ode.Dead[0] != dead.Identity() {
		t.Fatalf("Acquire(3) after a holder of 2 died: %v, want ErrOwnerDead naming 2 permits of %v", err, dead.Identity())
	}
	if next.Held() != 3 {
		t.Fatalf("told of the death, holds %d, want 3", next.Held())
	}
	if err := dead.Put(ctx, p+"-data", "late"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("the dead holder's guarded write: %v, want ErrNotHolder", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := acquire(t, after, 1); err != nil {
		t.Fatalf("the death was reported twice: %v", err)
	}
}

// TestSemaphoreHostileKeys: keys under the prefix that no Semaphore writes
// are reported as ErrCorrupt naming the key, at once, not waited on.
func TestSemaphoreHostileKeys(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	for _, c := range []struct{ key, val string }{
		{p + queueDir + "0000000000000001-00000000", `{"n":1}`},           // no lease: would never expire
		{p + holdsDir + "by-hand", `{"n":1,"token":5}`},                   // not a Semaphore's name
		{p + holdsDir + "0000000000000001-00000000", `{"n":9,"token":5}`}, // weight above N
	} {
		if _, err := cli.Put(ctx, c.key, c.val); err != nil {
			t.Fatal(err)
		}
		s := newSem(t, cli, p, 3, liveTTL)
		short, cancel := context.WithTimeout(ctx, hostileWait)
		err := s.Acquire(short, 1)
		cancel()
		if !errors.Is(err, lockword.ErrCorrupt) || !strings.Contains(err.Error(), c.key) {
			t.Fatalf("Acquire with %s = %s: %v, want ErrCorrupt naming the key", c.key, c.val, err)
		}
		if s.Held() != 0 {
			t.Fatal("holds after ErrCorrupt")
		}
		if _, err := cli.Delete(ctx, c.key); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSemaphoreCorruptPermits: a stored N that is not a count of permits
// (no Semaphore writes it) is ErrCorrupt naming the key, not ErrBadArgument,
// which stays for a valid N other than the caller's; InspectSemaphore
// names it too.
func TestSemaphoreCorruptPermits(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	for _, val := range []string{"x", "", "0", "-1", "99999999999999999999"} {
		if _, err := cli.Put(ctx, p+permitsKey, val); err != nil {
			t.Fatal(err)
		}
		s := newSem(t, cli, p, 3, liveTTL)
		short, cancel := context.WithTimeout(ctx, hostileWait)
		err := s.Acquire(short, 1)
		cancel()
		if !errors.Is(err, lockword.ErrCorrupt) || errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), p+permitsKey) {
			t.Fatalf("Acquire with %s = %q: %v, want ErrCorrupt naming the key", p+permitsKey, val, err)
		}
		si, err := InspectSemaphore(ctx, cli, p)
		if err != nil || len(si.Corrupt) != 1 || !strings.Contains(si.Corrupt[0], p+permitsKey) {
			t.Fatalf("InspectSemaphore with %s = %q: %+v, %v; want it corrupt, naming the key", p+permitsKey, val, si, err)
		}
	}
	if _, err := cli.Put(ctx, p+permitsKey, "2"); err != nil {
		t.Fatal(err)
	}
	s := newSem(t, cli, p, 3, liveTTL)
	if err := s.Acquire(ctx, 1); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("Acquire of a 3-permit semaphore stored with 2: %v, want ErrBadArgument", err)
	}
}

// TestSemaphoreFailedCallLeavesNothing: an Acquire whose replies are lost
// (its queuing committed, the caller never heard) returns by its deadline
// plus overrunBound, holds nothing, and once the Semaphore is idle leaves
// no key: the next acquirer takes every permit, told of no death.
func TestSemaphoreFailedCallLeavesNothing(t *testing.T) {
	t.Parallel()
	direct := newClient(t, endpoints)
	px := etcdtest.NewProxy(t, endpoints[0])
	p := prefix(t)
	s := newSem(t, newClient(t, []string{px.Addr()}), p, 2, liveTTL)
	next := newSem(t, direct, p, 2, liveTTL)
	if err := acquire(t, next, 1); err != nil { // stores N before the link breaks
		t.Fatal(err)
	}
	if err := next.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	px.DropReplies(true)
	overrun(t, "Acquire", 300*time.Millisecond, func(ctx context.Context) error { return s.Acquire(ctx, 1) })
	if s.Held() != 0 {
		t.Fatalf("a failed Acquire holds %d", s.Held())
	}
	px.Heal()
	s.waitIdle()
	if keys := semKeys(t, direct, p); len(keys) != 0 {
		t.Fatalf("a failed Acquire left %v", keys)
	}
	if err := acquire(t, next, 2); err != nil {
		t.Fatalf("Acquire of every permit after a failed Acquire: %v", err)
	}
}

// TestSemaphoreSession: two Semaphores on one Session; closing the
// Session while one holds reports its permits to the next acquirer.
func TestSemaphoreSession(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	sess, err := NewSession(ctx, cli, &SessionOptions{TTL: liveTTL})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewSemaphore(ctx, cli, p, 2, &Options{Session: sess})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSemaphore(ctx, cli, p, 2, &Options{Session: sess})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSemaphore(ctx, cli, p, 2, &Options{Session: sess, TTL: time.Second}); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("a TTL with a Session: %v, want ErrBadArgument", err)
	}
	if err := acquire(t, a, 1); err != nil {
		t.Fatal(err)
	}
	if err := acquire(t, b, 1); err != nil {
		t.Fatal(err)
	}
	if a.Identity().Lease != b.Identity().Lease || a.Token() == b.Token() {
		t.Fatalf("one lease, two acquisitions: %v %v, tokens %d %d", a.Identity(), b.Identity(), a.Token(), b.Token())
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	<-a.Lost()
	next := newSem(t, cli, p, 2, liveTTL)
	var ode *SemOwnerDeadError
	if err := acquire(t, next, 2); !errors.As(err, &ode) || ode.Permits != 1 {
		t.Fatalf("Acquire after the Session of a holder of 1 closed: %v, want ErrOwnerDead for 1 permit", err)
	}
}

// TestSemaphoreLeaseLostNamesSemaphore: Mutex and Semaphore share the
// handle that reports a lost lease; a Semaphore's error must name the
// Semaphore (and still match ErrLeaseLost), a Mutex's the Mutex.
func TestSemaphoreLeaseLostNamesSemaphore(t *testing.T) {
	cli, p := parallelClient(t)
	s := newSem(t, cli, p+"/sem", 2, liveTTL)
	m := newMutex(t, cli, p+"/mutex")
	for _, lease := range []int64{s.Identity().Lease, m.Identity().Lease} {
		if _, err := cli.Revoke(context.Background(), clientv3.LeaseID(lease)); err != nil {
			t.Fatal(err)
		}
	}
	// Not waiting for Lost: a call that sees it open writes on the revoked
	// lease, which etcd refuses with the same error.
	check := func(call string, err error, want, notWant string) {
		t.Helper()
		if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), notWant) {
			t.Errorf("%s with a lost lease: %v; want ErrLeaseLost naming %q, not %q", call, err, want, notWant)
		}
	}
	// notWant is the other type's lease: the errors also name the lock's
	// prefix, which holds this test's name.
	check("Semaphore.Acquire", acquire(t, s, 1), "Semaphore's lease", "Mutex's lease")
	_, err := s.TryAcquire(context.Background(), 1)
	check("Semaphore.TryAcquire", err, "Semaphore's lease", "Mutex's lease")
	check("Mutex.LockContext", lockCtx(t, m), "Mutex's lease", "Semaphore's lease")
}
