package lockword

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// A Cond is a condition variable: a rendezvous point for goroutines
// waiting for, or announcing, a change to state guarded by a lock.
//
// Its waiters stand in one order of arrival, kept in two lists:
//
//   - Wait (and WaitContext with a context that is never done) sleeps in
//     the runtime's notify list, through a sync.Cond (rt): the list that
//     sync.Cond is built on (runtime/sema.go, notifyList), in which every
//     waiter draws a ticket and a notification takes tickets in order.
//     The runtime parks the goroutine itself, which no code outside it can
//     do as cheaply.
//   - WaitContext with a context that can end joins a FIFO queue of
//     records (head, tail) and sleeps on a word of its own, which lets it
//     leave the queue when ctx ends (the runtime's list cannot be left).
//
// Both kinds join while holding L and mu, so the order in which they join
// is the order in which they began to wait. mu (held for a few counter
// and pointer moves, never while anyone sleeps) guards the queue, the two
// counters of rt's tickets and every notification of rt:
//
//	counter     meaning
//	rtAdded     tickets drawn from rt (by Wait, under mu)
//	rtNotified  tickets that a notification took (Signal one, Broadcast
//	            all, under mu); rt's tickets in [rtNotified, rtAdded)
//	            are waiting
//	before      (per queued record) rtAdded when it joined: the tickets
//	            drawn before it
//
// A waiter, by kind:
//
//	kind   state      meaning                           moved by
//	plain  waiting    ticket t in [rtNotified, rtAdded) Wait, as it joins
//	plain  notified   t < rtNotified: rt lets it return Signal, Broadcast
//	plain  dead       L.Unlock panicked (misuse), t     Wait's release
//	                  still waiting: t is in dead
//	ctx    queued     on the queue, or leaving it       WaitContext, as it
//	                  (ctx done)                        joins
//	ctx    chosen     taken off the queue: may return   Signal, Broadcast
//
// Signal takes the oldest waiter: the queue's head if every ticket drawn
// before it was taken (before == rtNotified), else the next ticket, with
// rt.Signal, which wakes exactly that ticket's goroutine (or lets it pass
// if it has not slept yet); a dead ticket it takes is passed over to the
// next waiter. Broadcast takes every ticket (rt.Broadcast) and the whole
// queue. waiters counts the waiting and queued ones, so that Signal and
// Broadcast with nobody waiting cost one atomic load.
//
// Wait returns only when a Signal or Broadcast took its waiter, never
// spuriously; one Signal wakes exactly one Wait, the one waiting longest,
// if any; Broadcast wakes exactly the goroutines waiting when it took
// mu. Because a waiter joins before it releases L, a notification made
// after that (by a goroutine holding L, or not) finds it: no wake-up is
// lost; and a goroutine that starts waiting after a Signal joined after
// it, so it cannot take that Signal from one that was already waiting.
// Still, as with any condition variable, wait in a loop that re-checks
// the condition: another goroutine may change it between the notification
// and the waiter's Lock.
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
// fails (our locks panic, sync.Mutex is fatal), and the waiter is taken
// out of the order before the failure goes on (its ticket marked dead, its
// record off the queue), so later notifications are not lost to it.
//
// The zero value is a Cond with no L, ready to use once L is set. A Cond
// must not be copied after first use. It is 128 bytes, mu at offset 0.
// A Wait costs what sync.Cond's does
// plus one lock of mu; a WaitContext costs a record (pooled) and a parked
// goroutine.
//
// In the terminology of the Go memory model, a call to Signal or Broadcast
// synchronizes before any Wait call that it unblocks.
type Cond struct {
	_  noCopy
	mu Mutex // guards the queue, the counters, dead, and every call into rt
	// waiters counts the waiting plain waiters and the queued records;
	// changed under mu, loaded without it by Signal and Broadcast, which
	// return at once when it is zero.
	waiters             atomic.Int32
	rtAdded, rtNotified uint32 // rt's tickets, mod 2^32 as rt's own
	// rt is the runtime's notify list; its L is the Cond as a condRelease.
	// At offset 32, so that its ticket counters and lock share the first
	// cache line with mu and the counters: a waiter or a notifier moves
	// one line, not two (Cond is 128 bytes, a size class whose objects
	// are 128-aligned).
	rt         sync.Cond
	head, tail *condWaiter
	dead       *[]uint32 // waiting tickets of Waits whose L.Unlock panicked
	// L is held while observing or changing the condition.
	L sync.Locker
}

// condWaiter is one goroutine in WaitContext: its place in the queue and
// the word it sleeps on.
type condWaiter struct {
	state      atomic.Uint32
	before     uint32 // rtAdded when it joined (guarded by mu)
	queued     bool   // on the queue (guarded by mu)
	prev, next *condWaiter
}

// The states of a record's word.
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
func (c *Cond) Wait() {
	c.mu.Lock()
	c.rtAdded++ // the ticket rt.Wait draws next: mu orders both
	c.waiters.Add(1)
	if c.rt.L == nil {
		c.rt.L = (*condRelease)(c) // once, under mu: every later reader holds or held mu
	}
	c.rt.Wait() // draws the ticket, then releases mu and L (condRelease.Unlock)
}

// condRelease is the lock that rt.Wait releases after drawing its ticket,
// and takes again once notified: mu (held since the waiter joined), then
// L.
type condRelease Cond

// Unlock releases mu, then L. If L's Unlock panics (Wait without L
// held), the ticket is buried before the panic goes on.
func (r *condRelease) Unlock() {
	c := (*Cond)(r)
	t := c.rtAdded - 1 // this waiter's ticket: mu is still held
	c.mu.Unlock()
	released := false
	defer func() {
		if !released {
			c.bury(t)
		}
	}()
	c.L.Unlock()
	released = true
}

// Lock locks L, as Wait returns.
func (r *condRelease) Lock() { (*Cond)(r).L.Lock() }

// bury takes ticket t, whose Wait failed to release L, out of the order:
// if it is still waiting, the next Signal to take it passes over it (dead);
// if a notification took it meanwhile (a Signal without L), that Signal is
// passed on to the next waiter.
func (c *Cond) bury(t uint32) {
	c.mu.Lock()
	if t-c.rtNotified < c.rtAdded-c.rtNotified { // still waiting
		if c.dead == nil {
			c.dead = new([]uint32)
		}
		*c.dead = append(*c.dead, t)
		c.waiters.Add(-1)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.Signal()
}

// WaitContext is Wait that gives up when ctx is done. It always returns
// with c.L locked, whether it was woken (nil) or ctx ended first
// (ctx.Err(); errors.Is works with context.Canceled and
// context.DeadlineExceeded). A waiter that gives up never swallows a
// Signal meant for another: if a Signal had already chosen it when ctx
// ended, it reports the wake-up (nil) instead, so that the caller acts on
// it; one that gives up first has left the queue, and the next Signal
// chooses another waiter. A ctx that can never end (Done returns nil)
// waits as Wait does.
func (c *Cond) WaitContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if ctx.Done() == nil {
		c.Wait()
		return nil
	}
	return c.waitContext(ctx)
}

// Signal wakes the goroutine that has waited longest on c, if any.
func (c *Cond) Signal() {
	if c.waiters.Load() != 0 { // else nobody waits: nothing to do
		c.signalSlow()
	}
}

// Broadcast wakes every goroutine waiting on c.
func (c *Cond) Broadcast() {
	if c.waiters.Load() != 0 { // else nobody waits: nothing to do
		c.broadcastSlow()
	}
}

// waitContext is WaitContext with a ctx that can end: a queued record.
func (c *Cond) waitContext(ctx context.Context) error {
	w := condWaiters.Get().(*condWaiter)
	w.state.Store(condQueued)
	c.enqueue(w) // before releasing L: a notification after it finds w
	c.release(w)
	err := c.sleep(ctx, w)
	condWaiters.Put(w)
	c.L.Lock()
	return err
}

// enqueue puts w at the tail of the queue, after the tickets drawn so
// far: queued.
func (c *Cond) enqueue(w *condWaiter) {
	c.mu.Lock()
	w.queued = true
	w.before = c.rtAdded
	if t := c.tail; t != nil {
		w.prev = t
		t.next = w
	} else {
		c.head = w
	}
	c.tail = w
	c.waiters.Add(1)
	c.mu.Unlock()
}

// release unlocks L for a queued w. If L's Unlock panics (WaitContext
// without L held), w leaves the queue before the panic goes on, so that no
// later Signal goes to a waiter that is not there; one that chose w
// already (a Signal without L, meanwhile) is passed on to the next waiter.
// w is not returned to the pool: its notifier may still be waking it.
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
		c.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		c.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	c.waiters.Add(-1)
}

// signalSlow takes the oldest waiter: the queue's head if every ticket
// drawn before it was taken, else the next ticket (passing over dead
// ones).
func (c *Cond) signalSlow() {
	c.mu.Lock()
	for {
		if w := c.head; w != nil && w.before == c.rtNotified {
			c.unlink(w)
			c.mu.Unlock()
			choose(w)
			return
		}
		if c.rtNotified == c.rtAdded { // left (cancelled) or taken since the caller looked
			break
		}
		c.rt.Signal() // wakes the goroutine of ticket rtNotified, and only it
		t := c.rtNotified
		c.rtNotified++
		if !c.unbury(t) {
			c.waiters.Add(-1)
			break
		}
		// t's Wait failed: this Signal is for the next waiter.
	}
	c.mu.Unlock()
}

// unbury reports whether ticket t is dead, and forgets it; the caller
// holds mu.
func (c *Cond) unbury(t uint32) bool {
	if c.dead == nil {
		return false
	}
	for i, d := range *c.dead {
		if d == t {
			*c.dead = append((*c.dead)[:i], (*c.dead)[i+1:]...)
			return true
		}
	}
	return false
}

// broadcastSlow takes every ticket and the whole queue, then wakes the
// queue's records, oldest first (rt.Broadcast has readied the ticket
// holders).
func (c *Cond) broadcastSlow() {
	c.mu.Lock()
	if c.rtNotified != c.rtAdded {
		c.rt.Broadcast()
		c.rtNotified = c.rtAdded
		c.dead = nil
	}
	list := c.head
	c.head, c.tail = nil, nil
	for w := list; w != nil; w = w.next {
		w.queued = false
	}
	c.waiters.Store(0)
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
