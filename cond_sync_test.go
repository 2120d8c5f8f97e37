package lockword

// Cond's tests in the shapes of Go's own sync.Cond tests, over our Mutex
// and over sync.Mutex, and the race of a Signal with a waiter that has
// joined but not slept.

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
