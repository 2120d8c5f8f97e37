package lockword

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// condVar is what the stress needs of a condition variable: Cond and the
// broken one below.
type condVar interface {
	Wait()
	Signal()
	Broadcast()
}

// lateReadCond is a sequence-word condition variable that reads the
// sequence after releasing the lock: the classic lost wake-up (a Signal
// between the Unlock and the read is missed). It yields in the window, as a
// preempted waiter would, so that the stress meets the bug quickly.
type lateReadCond struct {
	seq atomic.Uint32
	L   sync.Locker
}

func (c *lateReadCond) Wait() {
	c.L.Unlock()
	runtime.Gosched()
	v := c.seq.Load()
	wait.Wait(nil, &c.seq, v)
	c.L.Lock()
}
func (c *lateReadCond) Signal()    { c.seq.Add(1); wait.Wake(&c.seq, 1) }
func (c *lateReadCond) Broadcast() { c.seq.Add(1); wait.Wake(&c.seq, wakeAll) }

// condStress passes items through a bounded queue of capacity 1 guarded by
// l, with two condition variables (not empty, not full), Signal only:
// producers goroutines put items 0..items-1, consumers take them. It
// returns an error if some item is not consumed exactly once, or if the
// run stalls for patience (a lost wake-up): then it releases everyone with
// Broadcasts so that no goroutine is left behind. widen yields on entering
// the critical section and between looking at the slot and changing it, as
// a preempted goroutine would: for the run without a lock, so that its
// races show even on few cores.
func condStress(l sync.Locker, newCond func(sync.Locker) condVar, producers, consumers, items int, patience time.Duration, widen bool) error {
	var (
		full   bool // the queue's one slot; all of these are guarded by l
		slot   int
		taken  int
		abort  atomic.Bool
		counts = make([]atomic.Int32, items)
	)
	notEmpty, notFull := newCond(l), newCond(l)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for item := p; item < items; item += producers {
				l.Lock()
				if widen {
					runtime.Gosched()
				}
				for full && !abort.Load() {
					notFull.Wait()
				}
				if abort.Load() {
					l.Unlock()
					return
				}
				if widen {
					runtime.Gosched()
				}
				slot, full = item, true
				notEmpty.Signal()
				l.Unlock()
			}
		})
	}
	for range consumers {
		wg.Go(func() {
			for {
				l.Lock()
				if widen {
					runtime.Gosched()
				}
				for !full && taken < items && !abort.Load() {
					notEmpty.Wait()
				}
				if taken == items || abort.Load() {
					// Done: pass the news on to the next consumer
					// asleep, one Signal at a time.
					notEmpty.Signal()
					l.Unlock()
					return
				}
				item := slot
				if widen {
					runtime.Gosched()
				}
				full = false
				taken++
				notFull.Signal()
				l.Unlock()
				counts[item].Add(1)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(patience):
		abort.Store(true)
		for {
			notEmpty.Broadcast()
			notFull.Broadcast()
			select {
			case <-done:
				return fmt.Errorf("stalled for %v: a wake-up was lost", patience)
			case <-time.After(time.Millisecond):
			}
		}
	}
	for i := range counts {
		if n := counts[i].Load(); n != 1 {
			return fmt.Errorf("item %d consumed %d times", i, n)
		}
	}
	return nil
}

func newCondVar(l sync.Locker) condVar { return NewCond(l) }

// TestCondStress is issue 4's condition-variable stress: 4 producers, 4
// consumers, a queue of capacity 1 guarded by a Mutex and two Conds,
// Signal only, 1,000,000 items (scaled down under -short and -race;
// LOCKWORD_LONG=1 or LOCKWORD_COND_FULL=1 runs the full size), every item
// consumed exactly once, under a watchdog.
func TestCondStress(t *testing.T) {
	items := scaled(1_000_000)
	if os.Getenv("LOCKWORD_COND_FULL") != "" {
		items = 1_000_000
	}
	locks := []struct {
		name string
		new  func() sync.Locker
	}{
		{"Mutex", func() sync.Locker { return new(Mutex) }},
		{"TicketMutex", func() sync.Locker { return new(TicketMutex) }},
	}
	for _, lk := range locks {
		for _, procs := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/procs=%d", lk.name, procs), func(t *testing.T) {
				withGOMAXPROCS(t, procs)
				n := items
				if lk.name != "Mutex" || procs != 2 {
					n = max(items/10, 1000) // the headline run is the Mutex one
				}
				defer watchdog("cond stress", 5*time.Minute)()
				start := time.Now()
				if err := condStress(lk.new(), newCondVar, 4, 4, n, 2*time.Minute, false); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d items in %v", n, time.Since(start))
			})
		}
	}
}

// TestCondStressCatchesBrokenCond shows that the stress can fail: a Cond
// that reads its sequence after releasing the lock loses wake-ups, and a
// lock that does not exclude loses or duplicates items.
func TestCondStressCatchesBrokenCond(t *testing.T) {
	late := func(l sync.Locker) condVar { return &lateReadCond{L: l} }
	if err := condStress(new(Mutex), late, 4, 4, 100_000, 300*time.Millisecond, false); err == nil {
		t.Error("a Cond that loses wake-ups passed the stress: the stall check cannot fail")
	} else {
		t.Log("late-reading Cond:", err)
	}
	if raceEnabled {
		return // the race detector would (rightly) stop the no-lock run itself
	}
	if err := condStress(brokenLock{}, newCondVar, 4, 4, 100_000, 300*time.Millisecond, true); err == nil {
		t.Error("a queue without a lock passed the stress: neither the exactly-once nor the stall check failed")
	} else {
		t.Log("no lock:", err)
	}
}

// parkedCondWaiters starts waiters first, first+1, ... on c one by one,
// each queued before the next starts (parkedBefore others already are), so
// that their order is known; each sends its id on woke when Wait returns.
func parkedCondWaiters(t *testing.T, c *Cond, parkedBefore, first, n int, woke chan<- int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		go func() {
			c.L.Lock()
			c.Wait()
			c.L.Unlock()
			woke <- i
		}()
		deadline := time.Now().Add(10 * time.Second)
		for c.queueLen() != parkedBefore+i-first+1 {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d did not park", i)
			}
			runtime.Gosched()
		}
	}
}

// TestCondSignalWakesOldest: Signal wakes waiters in the order they began
// waiting; one that began after the Signal cannot take it.
func TestCondSignalWakesOldest(t *testing.T) {
	c := NewCond(new(Mutex))
	woke := make(chan int, 10)
	parkedCondWaiters(t, c, 0, 0, 5, woke)
	c.Signal()
	parkedCondWaiters(t, c, 4, 5, 1, woke) // a newcomer, after the Signal
	if got := <-woke; got != 0 {
		t.Fatalf("Signal woke waiter %d, want the oldest (0)", got)
	}
	for want := 1; want <= 5; want++ {
		c.Signal()
		if got := <-woke; got != want {
			t.Fatalf("Signal woke waiter %d, want %d", got, want)
		}
	}
	select {
	case got := <-woke:
		t.Fatalf("waiter %d woke without a Signal", got)
	case <-time.After(5 * time.Millisecond):
	}
}

// TestCondSignalOldestOfEitherKind: Wait and WaitContext waiters sleep in
// different lists (the runtime's tickets, the queue of records); Signal
// must still wake them in the order they began waiting, across the two,
// and pass over the ticket of a Wait that failed (Wait without L).
func TestCondSignalOldestOfEitherKind(t *testing.T) {
	c := NewCond(new(Mutex))
	func() {
		defer func() { _ = recover() }()
		c.Wait() // misuse: its ticket is buried, first in line
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 6
	woke := make(chan int, n) // i, or -1 if its WaitContext failed
	for i := range n {
		go func() {
			c.L.Lock()
			var err error
			if i%3 == 1 {
				c.Wait()
			} else {
				err = c.WaitContext(ctx)
			}
			c.L.Unlock()
			if err != nil {
				i = -1
			}
			woke <- i
		}()
		for c.queueLen() != i+1 {
			runtime.Gosched()
		}
	}
	for want := range n {
		c.Signal()
		select {
		case got := <-woke:
			if got != want {
				t.Fatalf("Signal %d woke waiter %d, want %d", want, got, want)
			}
		case <-time.After(10 * time.Second): // microseconds when correct; a loaded machine's scheduling, not speed
			t.Fatalf("Signal %d woke nobody: lost to the failed Wait's ticket?", want)
		}
	}
}

// TestCondBroadcastWakesOnlyThoseWaiting: Broadcast wakes every waiter, and
// none that starts waiting after it.
func TestCondBroadcastWakesOnlyThoseWaiting(t *testing.T) {
	c := NewCond(new(TicketMutex))
	woke := make(chan int, 20)
	parkedCondWaiters(t, c, 0, 0, 8, woke)
	c.Broadcast()
	seen := map[int]bool{}
	for range 8 {
		seen[<-woke] = true
	}
	if len(seen) != 8 {
		t.Fatalf("Broadcast woke %v, want all 8", seen)
	}
	parkedCondWaiters(t, c, 0, 8, 1, woke) // after the Broadcast
	select {
	case got := <-woke:
		t.Fatalf("waiter %d, which began after the Broadcast, woke", got)
	case <-time.After(5 * time.Millisecond):
	}
	c.Broadcast()
	<-woke
}

func TestCondWaitContext(t *testing.T) {
	m := new(Mutex)
	c := NewCond(m)
	m.Lock()
	if err := c.WaitContext(nil); err == nil {
		t.Fatal("WaitContext(nil) = nil")
	}
	start := time.Now() // before the deadline is set, so it cannot be early
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.WaitContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitContext = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", d)
	}
	if m.TryLock() {
		t.Fatal("WaitContext returned without the lock held")
	}
	m.Unlock()
	// Woken: nil.
	res := make(chan error)
	go func() {
		m.Lock()
		res <- c.WaitContext(context.Background())
		m.Unlock()
	}()
	for c.queueLen() != 1 {
		runtime.Gosched()
	}
	c.Signal()
	if err := <-res; err != nil {
		t.Fatalf("woken WaitContext = %v", err)
	}
}

// TestCondCancelledWaiterNeverSwallowsSignal: eight waiters park, four of
// them with contexts; the four contexts are cancelled while four Signals
// are sent. Each Signal wakes a parked waiter, so exactly four Waits must
// return woken: a cancelled waiter that took a Signal and reported the
// cancellation would leave a plain waiter asleep and the count short.
func TestCondCancelledWaiterNeverSwallowsSignal(t *testing.T) {
	rounds := scaled(2000)
	for range rounds {
		c := NewCond(new(Mutex))
		var woken, gaveUp atomic.Int32
		cancels := make([]context.CancelFunc, 4)
		var all sync.WaitGroup
		for i := range 8 {
			ctx := context.Background()
			if i%2 == 0 {
				ctx, cancels[i/2] = context.WithCancel(ctx)
			}
			all.Go(func() {
				c.L.Lock()
				if c.WaitContext(ctx) == nil {
					woken.Add(1)
				} else {
					gaveUp.Add(1)
				}
				c.L.Unlock()
			})
			for c.queueLen() != i+1 {
				runtime.Gosched()
			}
		}
		var race sync.WaitGroup
		for i := range 4 {
			race.Go(cancels[i])
			race.Go(c.Signal)
		}
		race.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for woken.Load() < 4 {
			if time.Now().After(deadline) {
				t.Fatalf("4 Signals to parked waiters, but only %d woke (%d gave up)", woken.Load(), gaveUp.Load())
			}
			runtime.Gosched()
		}
		c.Broadcast() // release the rest
		all.Wait()
		if woken.Load()+gaveUp.Load() != 8 {
			t.Fatalf("woken %d + gave up %d != 8", woken.Load(), gaveUp.Load())
		}
	}
}

// queueLen reports how many goroutines wait on c: in Wait or WaitContext,
// joined, not yet taken by a notification, not given up.
func (c *Cond) queueLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.waiters.Load())
}

// Every in-process lock that ContextLocker's doc names satisfies it: the
// compiler checks the list (shm's tests check the shared ones).
var (
	_ ContextLocker = (*Mutex)(nil)
	_ ContextLocker = (*SpinMutex)(nil)
	_ ContextLocker = (*TicketMutex)(nil)
	_ ContextLocker = (*RWMutex)(nil)
)

// condLockers are the locks the sync-shaped Cond tests run over: ours, and
// sync.Mutex (so a failure there is the Cond's own).
var condLockers = []struct {
	name string
	new  func() sync.Locker
}{
	{"Mutex", func() sync.Locker { return new(Mutex) }},
	{"sync.Mutex", func() sync.Locker { return new(sync.Mutex) }},
}

// forCondLockers runs f once per lock of condLockers, as a subtest.
func forCondLockers(t *testing.T, f func(t *testing.T, l sync.Locker)) {
	for _, lk := range condLockers {
		t.Run(lk.name, func(t *testing.T) { f(t, lk.new()) })
	}
}

// repeatCondLockers runs f over condLockers at GOMAXPROCS 1, 2 and 8, as
// go test -cpu 1,2,8 would: 3 times in a row at each by default (about 0.2
// s for the five sync-shaped tests), 100 times with LOCKWORD_LONG=1, the
// run that shows one Signal never waking two (run it with and without
// -race). A Cond that could wake two failed TestCondSignal about 1 run in
// 15 under -race.
func repeatCondLockers(t *testing.T, f func(t *testing.T, l sync.Locker)) {
	runs := 3
	if os.Getenv("LOCKWORD_LONG") != "" {
		runs = 100
	}
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			for range runs {
				forCondLockers(t, f)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// The tests from TestCondSignal to TestCondSignalStealing check the
// promises of sync.Cond's documentation, in the shapes of Go's own tests of
// sync.Cond: Wait returns only when a Signal or Broadcast woke it, one
// Signal wakes one waiter, Broadcast wakes all. A waiter that is known to be
// inside Wait is one that sent on a channel while holding L, after which the
// test took L itself: Wait released it, so the waiter is queued.

// TestCondSignal: each Signal, with every waiter known to be inside Wait,
// wakes exactly one of them.
func TestCondSignal(t *testing.T) {
	repeatCondLockers(t, func(t *testing.T, l sync.Locker) {
		c := NewCond(l)
		const n = 3
		inside := make(chan struct{}, n)
		awake := make(chan struct{}, n)
		for range n {
			go func() {
				l.Lock()
				inside <- struct{}{}
				c.Wait()
				awake <- struct{}{}
				l.Unlock()
			}()
		}
		for range n {
			<-inside
		}
		for left := n; left > 0; left-- {
			select {
			case <-awake:
				t.Fatal("a waiter woke before any Signal")
			default:
			}
			l.Lock() // every waiter has released l inside Wait
			c.Signal()
			l.Unlock()
			<-awake // hangs (watchdog of go test) if the Signal woke nobody
			select {
			case <-awake:
				t.Fatal("too many goroutines awake after one Signal")
			default:
			}
		}
		c.Signal() // nobody waits: must not block or panic
	})
}

// TestCondSignalGenerations: waiters start one at a time, each Signalled
// once the previous one has been; the i'th Signal must wake the i'th
// waiter, the only one waiting, and no other.
func TestCondSignalGenerations(t *testing.T) {
	repeatCondLockers(t, func(t *testing.T, l sync.Locker) {
		c := NewCond(l)
		const n = 100
		inside := make(chan int, n)
		awake := make(chan int, n)
		for i := range n {
			go func() {
				l.Lock()
				inside <- i
				c.Wait()
				awake <- i
				l.Unlock()
			}()
			if i > 0 {
				if got := <-awake; got != i-1 {
					t.Fatalf("Signal %d woke waiter %d", i-1, got)
				}
			}
			<-inside
			l.Lock()
			c.Signal()
			l.Unlock()
		}
		if got := <-awake; got != n-1 {
			t.Fatalf("Signal %d woke waiter %d", n-1, got)
		}
	})
}

// TestCondBroadcast: rounds of n waiters, each round ended by one
// Broadcast that must wake all n and nobody before it.
func TestCondBroadcast(t *testing.T) {
	repeatCondLockers(t, func(t *testing.T, l sync.Locker) {
		c := NewCond(l)
		const n, rounds = 5, 20
		inside := make(chan int, n)
		awake := make(chan int, n)
		exit := false // guarded by l
		for g := range n {
			go func() {
				l.Lock()
				for !exit {
					inside <- g
					c.Wait()
					awake <- g
				}
				l.Unlock()
			}()
		}
		for range rounds {
			for range n {
				<-inside
			}
			select {
			case g := <-awake:
				t.Fatalf("waiter %d awake before the Broadcast", g)
			default:
			}
			l.Lock()
			c.Broadcast()
			l.Unlock()
			seen := make(map[int]bool)
			for range n {
				seen[<-awake] = true // hangs if the Broadcast missed one
			}
			if len(seen) != n {
				t.Fatalf("one Broadcast woke %v, want each of %d once", seen, n)
			}
		}
		for range n {
			<-inside
		}
		l.Lock()
		exit = true
		c.Broadcast()
		l.Unlock()
		for range n {
			<-awake
		}
	})
}

// TestCondRace: three goroutines move x from 0 to 3 under l, two of them
// waiting on c for their turn (the other two polling); the race detector
// (under -race) checks that Wait's return orders the data as the lock
// does, and the values check the turns. Each Signal has one waiter: the
// one that waits for the value it sets.
func TestCondRace(t *testing.T) {
	repeatCondLockers(t, func(t *testing.T, l sync.Locker) {
		c := NewCond(l)
		x := 0 // guarded by l
		done := make(chan bool, 3)
		// poll holds l until x is one of want, releasing it in between.
		poll := func(want ...int) int {
			for {
				for _, v := range want {
					if x == v {
						return v
					}
				}
				l.Unlock()
				runtime.Gosched()
				l.Lock()
			}
		}
		go func() {
			l.Lock()
			x = 1
			c.Wait() // for the second goroutine's 2
			if x != 2 {
				t.Error("after the first Wait x =", x, "want 2")
			}
			x = 3
			c.Signal()
			l.Unlock()
			done <- true
		}()
		go func() {
			l.Lock()
			poll(1) // the first goroutine waits
			x = 2
			c.Signal()
			l.Unlock()
			done <- true
		}()
		go func() {
			l.Lock()
			if poll(2, 3) == 2 {
				c.Wait() // for the first goroutine's 3
				if x != 3 {
					t.Error("after the second Wait x =", x, "want 3")
				}
			}
			l.Unlock()
			done <- true
		}()
		for range 3 {
			<-done
		}
	})
}

// TestCondSignalStealing: a waiter is known to be inside Wait; then a
// Broadcast races with a second goroutine that starts waiting. The second
// may or may not be woken, but the first must be, whichever way the race
// goes: a late waiter never takes a notification meant for an earlier one.
func TestCondSignalStealing(t *testing.T) {
	repeatCondLockers(t, func(t *testing.T, l sync.Locker) {
		for range scaled(1000) {
			c := NewCond(l)
			first := make(chan struct{})
			go func() {
				l.Lock()
				first <- struct{}{}
				c.Wait()
				l.Unlock()
				first <- struct{}{}
			}()
			<-first
			l.Lock() // the first waiter is inside Wait
			l.Unlock()
			done := false // guarded by l
			go c.Broadcast()
			go func() {
				l.Lock()
				for !done {
					c.Wait()
				}
				l.Unlock()
			}()
			select {
			case <-first:
			case <-time.After(10 * time.Second): // a loaded machine's scheduling, not the Cond's speed
				t.Fatal("the first waiter missed the Broadcast")
			}
			l.Lock()
			done = true
			l.Unlock()
			c.Broadcast()
		}
	})
}

// gateLocker is a lock whose Unlock, once armed, stops the goroutine after
// releasing: it reports on stopped and waits for go. Cond.Wait calls
// Unlock after it has begun waiting and before it sleeps, so an armed gate
// holds a waiter in that window, the one in which a notification races
// with it.
type gateLocker struct {
	sync.Locker
	armed   atomic.Bool
	stopped chan struct{}
	goOn    chan struct{}
}

func (g *gateLocker) Unlock() {
	g.Locker.Unlock()
	if g.armed.CompareAndSwap(true, false) {
		g.stopped <- struct{}{}
		<-g.goOn
	}
}

// TestCondSignalRacingWaiterWakesOne: waiter A sleeps in Wait; waiter B has
// begun waiting but is held between releasing L and sleeping; one Signal is
// sent, then B goes on. The Signal must wake A, the older, and only A: B
// must stay asleep. (Waking both is what a sequence-word Cond did: B saw the
// sequence move and returned.) The check that B stays asleep gives B 100 ms
// to return wrongly, far more than the microseconds its return takes once
// it runs, and retries it 3 times; on a machine loaded enough to keep B off
// a processor for that long, a broken Cond could pass, but a correct one
// never fails.
func TestCondSignalRacingWaiterWakesOne(t *testing.T) {
	forCondLockers(t, func(t *testing.T, l sync.Locker) {
		g := &gateLocker{Locker: l, stopped: make(chan struct{}), goOn: make(chan struct{})}
		c := NewCond(g)
		awake := make(chan string, 2)
		waiter := func(name string) {
			g.Lock()
			c.Wait()
			awake <- name
			g.Unlock()
		}
		inside := make(chan struct{})
		go func() {
			g.Lock()
			inside <- struct{}{}
			c.Wait()
			awake <- "A"
			g.Unlock()
		}()
		<-inside
		g.Lock() // A is inside Wait
		g.Unlock()
		g.armed.Store(true)
		go waiter("B")
		<-g.stopped // B is inside Wait, held before it sleeps
		g.Lock()
		c.Signal()
		g.Unlock()
		close(g.goOn)
		if got := <-awake; got != "A" {
			t.Fatalf("the Signal woke %s, want A (waiting longest)", got)
		}
		for range 3 {
			select {
			case got := <-awake:
				t.Fatalf("one Signal woke A and %s", got)
			case <-time.After(100 * time.Millisecond):
			}
		}
		g.Lock()
		c.Signal()
		g.Unlock()
		<-awake
	})
}

// TestCondWaitWithoutLockLeavesQueue: Wait without holding L is misuse and
// panics (our Mutex's Unlock of an unlocked Mutex); the waiter must not stay
// queued, or the next Signal would choose a goroutine that is not waiting
// and be lost.
func TestCondWaitWithoutLockLeavesQueue(t *testing.T) {
	c := NewCond(new(Mutex))
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("Wait without L held did not panic")
			}
		}()
		c.Wait()
	}()
	if n := c.queueLen(); n != 0 {
		t.Fatalf("%d waiters queued after the failed Wait, want 0", n)
	}
	woke := make(chan int, 1)
	parkedCondWaiters(t, c, 0, 0, 1, woke)
	c.Signal()
	if got := <-woke; got != 0 { // hangs if the Signal went to the failed Wait
		t.Fatalf("woke %d", got)
	}
}
