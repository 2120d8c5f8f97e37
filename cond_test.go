package lockword

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

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
	dead := 0
	if c.dead != nil {
		dead = len(*c.dead)
	}
	return int(c.nl.wait.Load()-c.notified()) - dead + int(c.queued.Load())
}

// Every in-process lock that ContextLocker's doc names satisfies it: the
// compiler checks the list (shm's tests check the shared ones).
var (
	_ ContextLocker = (*Mutex)(nil)
	_ ContextLocker = (*SpinMutex)(nil)
	_ ContextLocker = (*TicketMutex)(nil)
	_ ContextLocker = (*RWMutex)(nil)
)

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

// TestCondPlainWaitTakesNoMu: a plain Wait, and a Signal or Broadcast with
// nobody waiting, cost what sync.Cond's do; neither takes the Cond's own
// mu, which only the queue of WaitContext records and the notifications
// that find someone waiting need. Counted with mu's statistics: rounds of
// one Wait woken by one Signal or Broadcast take mu once per round (the
// notification), and none for the Signal and Broadcast with nobody
// waiting that the woken waiter makes.
func TestCondPlainWaitTakesNoMu(t *testing.T) {
	const rounds = 50
	var l Mutex
	c := NewCond(&l)
	c.mu.EnableStats()
	done := make(chan struct{})
	ready := false // guarded by l
	go func() {
		defer close(done)
		for range rounds {
			l.Lock()
			for !ready {
				c.Wait()
			}
			ready = false
			c.Signal() // nobody waits (we are the only waiter): idle
			c.Broadcast()
			l.Unlock()
		}
	}()
	for i := range rounds {
		for c.queueLenNoMu() == 0 { // until the waiter has joined
			runtime.Gosched()
		}
		l.Lock()
		ready = true
		if i%2 == 0 {
			c.Signal()
		} else {
			c.Broadcast()
		}
		l.Unlock()
		for {
			l.Lock()
			r := ready
			l.Unlock()
			if !r {
				break
			}
			runtime.Gosched()
		}
	}
	<-done
	if got := c.mu.Stats().Acquisitions; got != rounds {
		t.Fatalf("mu taken %d times in %d rounds of one Wait and one notification, want %d: a plain Wait or an idle notification took it", got, rounds, rounds)
	}
}

// queueLenNoMu is the number of tickets waiting, read without mu (for a
// test in which no WaitContext and no misuse happen).
func (c *Cond) queueLenNoMu() uint32 { return c.nl.wait.Load() - c.notified() }

// TestCondWaitParksWithoutYield: a Wait whose release of L (our Mutex)
// wakes a sleeper of L parks at once, without yielding first; the woken
// goroutine, readied on the same processor, finds the waiter parked in
// the notify list ("sync.Cond.Wait" in its stack dump), not runnable on
// the scheduler's global queue, where Unlock's yield would have put it.
// One processor (GOMAXPROCS=1), so that nothing runs between the unlock
// and the park. Timing assumption: the waiter is preempted in those few
// instructions only if its thread stalls for 10 ms there, so the test
// fails when more than a quarter of the trials find it runnable; a
// yielding Wait was found runnable in 17 trials of 20.
func TestCondWaitParksWithoutYield(t *testing.T) {
	withGOMAXPROCS(t, 1)
	const trials = 20
	var runnable []string
	for range trials {
		var l Mutex
		c := NewCond(&l)
		state := make(chan string, 1)
		l.Lock()
		go func() {
			l.Lock() // sleeps: the test holds l
			state <- schedState("(*Cond).Wait")
			c.Signal()
			l.Unlock()
		}()
		for wait.Parked(&l.state) == 0 { // until the sleeper sleeps
			runtime.Gosched()
		}
		c.Wait() // its release of l wakes the sleeper
		l.Unlock()
		if s := <-state; s != "sync.Cond.Wait" {
			runnable = append(runnable, s)
		}
	}
	if len(runnable) > trials/4 {
		t.Fatalf("in %d of %d trials the woken sleeper found the waiter %q, not parked in the notify list: Wait yielded after waking it", len(runnable), trials, runnable)
	}
}

// schedState is the scheduler's state ("runnable", "sync.Cond.Wait",
// ...) of the goroutine whose stack holds frame, from a dump of all
// goroutines, or "" if none does.
func schedState(frame string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, frame) {
			continue
		}
		head, _, _ := strings.Cut(g, "\n") // goroutine N [state, ...]:
		_, st, _ := strings.Cut(head, "[")
		st, _, _ = strings.Cut(st, "]")
		st, _, _ = strings.Cut(st, ",")
		return st
	}
	return ""
}

// TestCondCopyPanics: a Cond copied after first use panics on use, as a
// copied sync.Cond does; before, the copy's Signal woke the original's
// waiter (the copy carries the original's notify list). A Cond copied
// before first use works, and the size stays the 128 bytes the Cond's doc
// states. (The copies are of the bytes, as go vet flags a plain one.)
func TestCondCopyPanics(t *testing.T) {
	if n := unsafe.Sizeof(Cond{}); n != 128 {
		t.Fatalf("Cond is %d bytes, want 128", n)
	}
	copyOf := func(c *Cond) *Cond {
		cp := new(Cond)
		*(*[128]byte)(unsafe.Pointer(cp)) = *(*[128]byte)(unsafe.Pointer(c))
		return cp
	}
	fresh := NewCond(new(Mutex))
	early := copyOf(fresh)
	fresh.Signal()
	early.Broadcast() // copied before first use: its own Cond

	used := NewCond(new(Mutex))
	used.Signal()
	late := copyOf(used)
	// The check comes first: Wait and WaitContext panic before touching L
	// (on the old code they slept for ever on the original's list).
	for name, use := range map[string]func(){"Signal": late.Signal, "Broadcast": late.Broadcast,
		"Wait": late.Wait, "WaitContext": func() { late.WaitContext(context.Background()) }} {
		func() {
			defer func() {
				if r := recover(); r != "lockword: Cond is copied" {
					t.Errorf("%s of a Cond copied after use: recovered %v, want the panic \"lockword: Cond is copied\"", name, r)
				}
			}()
			use()
		}()
	}
}
