package lockword

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 12's third finding: a TicketMutex (and RWMutex's writers' queue)
// with a given-up waiter stayed reachable for ever from a global map of
// abandoned tickets, and with it whatever embedded it. No global structure
// may keep a lock reachable once its users drop it. Each case below makes
// 1000 objects, each embedding a lock (and a 1 KiB payload, as a real
// struct would) left in one state, drops them, and counts the cleanups
// (runtime.AddCleanup) that run: all 1000 must.

// leakCase leaves one object's lock in a state and returns a value that
// keeps the lock's other users (goroutines) alive until the check: nothing
// but the lock and the payload may be kept.
type leakCase struct {
	name string
	// make makes a new object left in the state, with done as its
	// cleanup (runtime.AddCleanup). Waiters it starts wait on ctx, which
	// the test cancels once they have parked, and are added to wg.
	make func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, done func(int))
}

// givenUp runs lock with a context that ends at once (1 µs), on a lock
// that is held, so that it gives up.
func givenUp(t *testing.T, lock func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
	defer cancel()
	if err := lock(ctx); err == nil {
		t.Fatal("a waiter on a held lock did not give up")
	}
}

// parked starts two waiters on a held lock that wait on ctx.
func parked(t *testing.T, ctx context.Context, wg *sync.WaitGroup, lock func(context.Context) error) {
	parkedN(t, ctx, wg, 2, lock)
}

// parkedN starts n waiters; a single-producer single-consumer Ring has one
// waiter per side at most (two poppers would race, by its contract).
func parkedN(t *testing.T, ctx context.Context, wg *sync.WaitGroup, n int, lock func(context.Context) error) {
	for range n {
		wg.Go(func() {
			if err := lock(ctx); err == nil {
				t.Error("a cancelled waiter on a held lock took it")
			}
		})
	}
}

type leakPayload [1 << 10]byte

// A leakWaiter leaves a held lock with waiters in one state.
type leakWaiter func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, lock func(context.Context) error)

var leakWaiters = []struct {
	name string
	w    leakWaiter
}{
	{"held", func(*testing.T, context.Context, *sync.WaitGroup, func(context.Context) error) {}},
	{"given-up", func(t *testing.T, _ context.Context, _ *sync.WaitGroup, l func(context.Context) error) { givenUp(t, l) }},
	{"parked-cancelled", parked},
}

// heldLeakCase is the leakCase named name: a new O that hold leaves held,
// with waiter's waiters on the attempt (a LockContext) that attempt gives.
func heldLeakCase[O any](name string, waiter leakWaiter, hold func(*O), attempt func(*O) func(context.Context) error) leakCase {
	return leakCase{name, func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, done func(int)) {
		o := new(O)
		hold(o)
		waiter(t, ctx, wg, attempt(o))
		runtime.AddCleanup(o, done, 0)
	}}
}

func leakCases() []leakCase {
	type mutexObj struct {
		mu  Mutex
		buf leakPayload
	}
	type spinObj struct {
		mu  SpinMutex
		buf leakPayload
	}
	type ticketObj struct {
		mu  TicketMutex
		buf leakPayload
	}
	type rwObj struct {
		mu  RWMutex
		buf leakPayload
	}
	type condObj struct {
		mu   Mutex
		cond Cond
		buf  leakPayload
	}
	type ringObj struct {
		ring *Ring[int]
		buf  leakPayload
	}
	var cases []leakCase
	for _, lw := range leakWaiters {
		state, waiter := lw.name, lw.w
		cases = append(cases,
			heldLeakCase("Mutex/"+state, waiter,
				func(o *mutexObj) { o.mu.Lock() },
				func(o *mutexObj) func(context.Context) error { return o.mu.LockContext }),
			heldLeakCase("SpinMutex/"+state, waiter,
				func(o *spinObj) { o.mu.Lock() },
				func(o *spinObj) func(context.Context) error { return o.mu.LockContext }),
			heldLeakCase("TicketMutex/"+state, waiter,
				func(o *ticketObj) { o.mu.Lock() },
				func(o *ticketObj) func(context.Context) error { return o.mu.LockContext }),
			heldLeakCase("RWMutex/write-held-writer-"+state, waiter,
				func(o *rwObj) { o.mu.Lock() },
				func(o *rwObj) func(context.Context) error { return o.mu.LockContext }),
			heldLeakCase("RWMutex/write-held-reader-"+state, waiter,
				func(o *rwObj) { o.mu.Lock() },
				func(o *rwObj) func(context.Context) error { return o.mu.RLockContext }),
			heldLeakCase("RWMutex/read-held-writer-"+state, waiter,
				func(o *rwObj) { o.mu.RLock() },
				func(o *rwObj) func(context.Context) error { return o.mu.LockContext }),
		)
	}
	cases = append(cases,
		leakCase{"Cond/waiters-cancelled", func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, done func(int)) {
			o := new(condObj)
			o.cond.L = &o.mu
			parked(t, ctx, wg, func(ctx context.Context) error {
				o.mu.Lock()
				defer o.mu.Unlock()
				return o.cond.WaitContext(ctx)
			})
			runtime.AddCleanup(o, done, 0)
		}},
		leakCase{"Ring/empty-poppers-cancelled", func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, done func(int)) {
			r, err := NewRing[int](2)
			if err != nil {
				t.Fatal(err)
			}
			o := &ringObj{ring: r}
			parkedN(t, ctx, wg, 1, func(ctx context.Context) error { _, err := o.ring.Pop(ctx); return err })
			runtime.AddCleanup(o, done, 0)
		}},
		leakCase{"Ring/full-pushers-cancelled", func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, done func(int)) {
			r, err := NewRing[int](2)
			if err != nil {
				t.Fatal(err)
			}
			o := &ringObj{ring: r}
			for o.ring.Len() < o.ring.Cap() {
				if err := o.ring.Push(context.Background(), 1); err != nil {
					t.Fatal(err)
				}
			}
			parkedN(t, ctx, wg, 1, func(ctx context.Context) error { return o.ring.Push(ctx, 2) })
			runtime.AddCleanup(o, done, 0)
		}},
	)
	return cases
}

func TestDroppedLocksAreCollected(t *testing.T) {
	if deadlockBuilt && lockTracking.Load() != 0 {
		// Every case drops a lock while a goroutine holds it, and the
		// lock-order tracker keeps its holders' records (and so the
		// lock) until Unlock: a debugging build's cost, documented in
		// docs/diagnostics.md.
		t.Skip("deadlock detection keeps a held lock reachable until it is unlocked")
	}
	const n = 1000
	for _, c := range leakCases() {
		t.Run(c.name, func(t *testing.T) {
			var collected atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range n {
				c.make(t, ctx, &wg, func(int) { collected.Add(1) })
			}
			time.Sleep(20 * time.Millisecond) // let waiters park (some give up before: both are wanted)
			cancel()
			wg.Wait()
			deadline := time.Now().Add(10 * time.Second)
			for collected.Load() < n && time.Now().Before(deadline) {
				runtime.GC()
				time.Sleep(10 * time.Millisecond)
			}
			if got := collected.Load(); got != n {
				t.Fatalf("%d of %d dropped objects collected: something global keeps the rest reachable", got, n)
			}
		})
	}
}
