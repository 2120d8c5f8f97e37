package lockword

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// A Cond is a condition variable: a rendezvous point for goroutines
// waiting for, or announcing, a change to state guarded by a lock. It is a
// notify list, as the Go runtime builds sync.Cond (runtime/sema.go): Wait
// joins a FIFO queue of waiters while still holding L, releases L, and
// sleeps on a word of its own until a notification takes it off the
// queue; then it locks L again. Signal takes the oldest waiter off the
// queue and wakes it; Broadcast takes all of them.
//
// Its words: a waiter's state, and the queue (a list under a Mutex, mu,
// held for a few pointer moves, never while anyone sleeps):
//
//	state   meaning                                 moved by
//	queued  on c's queue, or leaving it (ctx done)  Wait, as it queues under mu
//	chosen  taken off the queue by Signal or        the notifier, once it took
//	        Broadcast: Wait may return              it off the queue under mu
//
// Wait returns nil only when a Signal or Broadcast took its waiter off the
// queue: never spuriously. One Signal wakes at most one Wait, and
// Broadcast wakes exactly the goroutines waiting when it took the queue.
// Because a waiter joins the queue before it releases L, a notification
// made after that (by a goroutine holding L, or not) finds it there: no
// wake-up is lost; and a goroutine that starts waiting after a Signal was
// not on the queue that Signal chose from, so it cannot take that Signal
// from one that was already waiting. Still, as with any condition
// variable, wait in a loop that re-checks the condition: another goroutine
// may change it between the notification and the waiter's Lock.
//
//	c.L.Lock()
//	for !condition() {
//		c.Wait()
//	}
//	... use the condition ...
//	c.L.Unlock()
//
// L may be any sync.Locker: a Mutex, TicketMutex, SpinMutex, sync.Mutex,
// or an RWMutex's RLocker. Signal and Broadcast may be called with or
// without L held. Calling Wait without holding L is misuse: L's Unlock
// fails (our locks panic, sync.Mutex is fatal), and Wait leaves the queue
// before the failure goes on, so later notifications are not lost to it.
//
// The zero value is a Cond with no L, ready to use once L is set. A Cond
// must not be copied after first use. It is 48 bytes: mu at offset 0, the
// queue's head and tail, then L. A waiter costs no allocation in the
// steady state (its record comes from a pool) and one parked goroutine.
//
// In the terminology of the Go memory model, a call to Signal or Broadcast
// synchronizes before any Wait call that it unblocks.
type Cond struct {
	_  noCopy
	mu Mutex // guards the queue: head's stores, tail, and every waiter's links and queued
	// head is the oldest waiter, nil when none; loaded without mu by
	// Signal and Broadcast, which return at once when it is nil.
	head atomic.Pointer[condWaiter]
	tail *condWaiter
	// L is held while observing or changing the condition.
	L sync.Locker
}

// condWaiter is one goroutine in Wait: its place in the queue and the word
// it sleeps on.
type condWaiter struct {
	state      atomic.Uint32
	queued     bool // on the queue (guarded by mu)
	prev, next *condWaiter
}

// The states of a waiter's word.
const (
	condQueued = 0
	condChosen = 1
)

var condWaiters = sync.Pool{New: func() any { return new(condWaiter) }}

// NewCond returns a new Cond with lock l.
func NewCond(l sync.Locker) *Cond { return &Cond{L: l} }

// Wait atomically unlocks c.L and suspends the calling goroutine until a
// Signal or Broadcast wakes it; it locks c.L before returning. It does not
// return otherwise, but the condition may have changed again by the time
// it holds c.L: call it in a loop that re-checks the condition.
func (c *Cond) Wait() { c.wait(nil) }

// WaitContext is Wait that gives up when ctx is done. It always returns
// with c.L locked, whether it was woken (nil) or ctx ended first
// (ctx.Err(); errors.Is works with context.Canceled and
// context.DeadlineExceeded). A waiter that gives up never swallows a
// Signal meant for another: if a Signal had already chosen it when ctx
// ended, it reports the wake-up (nil) instead, so that the caller acts on
// it; one that gives up first has left the queue, and the next Signal
// chooses another waiter.
func (c *Cond) WaitContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	return c.wait(ctx)
}

// Signal wakes the goroutine that has waited longest on c, if any.
func (c *Cond) Signal() {
	if c.head.Load() != nil { // else nobody waits: nothing to do
		c.signalSlow()
	}
}

// Broadcast wakes every goroutine waiting on c.
func (c *Cond) Broadcast() {
	if c.head.Load() != nil { // else nobody waits: nothing to do
		c.broadcastSlow()
	}
}

// wait is Wait and WaitContext (ctx nil: no context).
func (c *Cond) wait(ctx context.Context) error {
	w := condWaiters.Get().(*condWaiter)
	w.state.Store(condQueued)
	c.enqueue(w) // before releasing L: a notification after it finds w
	c.release(w)
	err := c.sleep(ctx, w)
	condWaiters.Put(w)
	c.L.Lock()
	return err
}

// enqueue puts w at the tail of the queue: queued.
func (c *Cond) enqueue(w *condWaiter) {
	c.mu.Lock()
	w.queued = true
	if t := c.tail; t != nil {
		w.prev = t
		t.next = w
	} else {
		c.head.Store(w)
	}
	c.tail = w
	c.mu.Unlock()
}

// release unlocks L for a queued w. If L's Unlock panics (Wait without L
// held), w leaves the queue before the panic goes on, so that no later
// Signal goes to a waiter that is not there; one that chose w already
// (a Signal without L, meanwhile) is passed on to the next waiter. w is
// not returned to the pool: its notifier may still be waking it.
func (c *Cond) release(w *condWaiter) {
	released := false
	defer func() {
		if !released && !c.leave(w) {
			c.Signal()
		}
	}()
	c.L.Unlock()
	released = true
}

// sleep parks until w is chosen, or ctx is done and w left the queue
// first (then it returns ctx.Err()). The futex contract allows early
// returns from WaitOne (and a notifier of w's previous use may still wake
// it), so it loops on w's state.
func (c *Cond) sleep(ctx context.Context, w *condWaiter) error {
	for w.state.Load() != condChosen {
		if err := wait.WaitOne(ctx, &w.state, condQueued, 0, nil, 0); err != nil {
			if c.leave(w) {
				return err
			}
			// A notification chose w before it could leave: its store
			// and wake-up are on their way. Take them, and report them.
			ctx = nil
		}
	}
	return nil
}

// leave takes w off the queue, if it is still there, and reports whether
// it was (false: a notification chose it).
func (c *Cond) leave(w *condWaiter) bool {
	c.mu.Lock()
	was := w.queued
	if was {
		c.unlink(w)
	}
	c.mu.Unlock()
	return was
}

// unlink takes w off the queue; the caller holds mu.
func (c *Cond) unlink(w *condWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		c.head.Store(w.next)
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		c.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
}

// signalSlow takes the oldest waiter off the queue and wakes it.
func (c *Cond) signalSlow() {
	c.mu.Lock()
	w := c.head.Load()
	if w == nil { // left (cancelled) or taken since the caller looked
		c.mu.Unlock()
		return
	}
	c.unlink(w)
	c.mu.Unlock()
	choose(w)
}

// broadcastSlow takes every waiter off the queue, then wakes them, oldest
// first.
func (c *Cond) broadcastSlow() {
	c.mu.Lock()
	list := c.head.Load()
	c.head.Store(nil)
	c.tail = nil
	for w := list; w != nil; w = w.next {
		w.queued = false
	}
	c.mu.Unlock()
	for w := list; w != nil; {
		next := w.next
		w.prev, w.next = nil, nil
		choose(w)
		w = next
	}
}

// choose wakes w, which the caller took off the queue. The store comes
// first: it is what lets w return (and w may be reused as soon as it
// is seen), and a w that is not asleep yet sees it before it sleeps. A
// wake-up that reaches w's next use finds its state queued, and that
// waiter sleeps again.
func choose(w *condWaiter) {
	w.state.Store(condChosen)
	wait.WakeOne(&w.state, 0)
}

// wakeAll is the n of internal/wait's Wake (and of the futex wake-ups of
// the shared kinds) for "every waiter".
const wakeAll = 1<<31 - 1
