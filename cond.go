package lockword

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe" // for go:linkname: the runtime's notify list

	"github.com/lockword/lockword/internal/wait"
)

// A Cond is a condition variable: a rendezvous point for goroutines
// waiting for, or announcing, a change to state guarded by a lock.
//
// Its waiters stand in one order of arrival, kept in two lists:
//
//   - Wait (and WaitContext with a context that is never done) draws a
//     ticket from the runtime's notify list (nl), the list that sync.Cond
//     is built on (runtime/sema.go, notifyList): a waiter draws a ticket
//     with one atomic add, and a notification takes tickets in order. The
//     runtime parks the goroutine itself, which no code outside it can do
//     as cheaply. A plain Wait takes no lock of the Cond's own, so it
//     costs what sync.Cond's Wait costs.
//   - WaitContext with a context that can end joins a FIFO queue of
//     records (head, tail) and sleeps on a word of its own, which lets it
//     leave the queue when ctx ends (the runtime's list cannot be left).
//
// Both kinds join while holding L, so the order in which they join is the
// order in which they began to wait. mu (held for a few counter and
// pointer moves, never while anyone sleeps) guards the queue, the dead
// tickets and every notification of nl, so that nl's notified count moves
// only under mu:
//
//	counter     meaning
//	nl.wait     tickets drawn (by Wait, an atomic add, without mu)
//	nl.notify   tickets that a notification took (Signal one, Broadcast
//	            all, under mu); tickets in [nl.notify, nl.wait) are waiting
//	before      (per queued record) nl.wait when it joined: the tickets
//	            drawn before it
//	queued      records on the queue (changed under mu, read without it)
//
// A waiter, by kind:
//
//	kind   state      meaning                           moved by
//	plain  waiting    ticket t in [nl.notify, nl.wait)  Wait, as it joins
//	plain  notified   t < nl.notify: Wait returns       Signal, Broadcast
//	plain  dead       L.Unlock panicked (misuse), t     Wait's release
//	                  still waiting: t is in dead
//	ctx    queued     on the queue, or leaving it       WaitContext, as it
//	                  (ctx done)                        joins
//	ctx    chosen     taken off the queue: may return   Signal, Broadcast
//
// Signal takes the oldest waiter: the queue's head if every ticket drawn
// before it was taken (before == nl.notify), else the next ticket, which
// the runtime wakes alone (or lets pass if its goroutine has not slept
// yet); a dead ticket it takes is passed over to the next waiter.
// Broadcast takes every ticket and the whole queue. With no ticket waiting
// and no record queued (idle), Signal and Broadcast return after three
// atomic loads, without mu.
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
// must not be copied after first use: a copy made after it panics on use
// ("lockword: Cond is copied"), as a copied sync.Cond does. It is 128 bytes, mu at offset 0 and
// nl at 16. A Wait costs what sync.Cond's does; a WaitContext with a
// context that can end costs a record (pooled), two locks of mu and a
// parked goroutine; a Signal or Broadcast with someone waiting costs
// sync.Cond's plus one lock of mu.
//
// In the terminology of the Go memory model, a call to Signal or Broadcast
// synchronizes before any Wait call that it unblocks.
type Cond struct {
	_  noCopy
	mu Mutex // guards the queue, dead, and every notification of nl
	// nl is the runtime's notify list, at offset 16 so that its counters
	// and lock share the first cache line with mu and queued: a waiter or
	// a notifier moves one line, not two (Cond is 128 bytes, a size class
	// whose objects are 128-aligned).
	nl         notifyList
	queued     atomic.Int32 // records on the queue: see idle
	head, tail *condWaiter
	dead       *[]uint32 // waiting tickets of Waits whose L.Unlock panicked
	// L is held while observing or changing the condition.
	L       sync.Locker
	checker copyChecker
	_       [24]byte // to 128 bytes: see nl
}

// copyChecker holds the address of the Cond it is part of, recorded at
// the Cond's first Wait, Signal or Broadcast. A copy made after that
// holds the original's address, and its notify list the original's
// waiters: using it panics, as a copied sync.Cond does (go vet's
// copylocks check catches most copies before they run).
type copyChecker uintptr

func (c *copyChecker) check() {
	self := uintptr(unsafe.Pointer(c))
	if p := (*uintptr)(c); atomic.LoadUintptr(p) != self && !atomic.CompareAndSwapUintptr(p, 0, self) && atomic.LoadUintptr(p) != self {
		panic("lockword: Cond is copied")
	}
}

// notifyList is the runtime's notifyList (runtime/sema.go), which
// sync.Cond embeds the same way; its size is checked against the
// runtime's at init, as package sync does.
type notifyList struct {
	wait   atomic.Uint32 // the next ticket to draw
	notify uint32        // the next ticket to notify: written by the runtime under lock
	lock   uintptr       // the runtime's lock of the list
	head   unsafe.Pointer
	tail   unsafe.Pointer
}

// The runtime's notify list, as package sync reaches it: the runtime
// exports these by go:linkname under sync's names and keeps them for it.
//
//go:linkname runtimeNotifyListAdd sync.runtime_notifyListAdd
func runtimeNotifyListAdd(l *notifyList) uint32

//go:linkname runtimeNotifyListWait sync.runtime_notifyListWait
func runtimeNotifyListWait(l *notifyList, t uint32)

//go:linkname runtimeNotifyListNotifyOne sync.runtime_notifyListNotifyOne
func runtimeNotifyListNotifyOne(l *notifyList)

//go:linkname runtimeNotifyListNotifyAll sync.runtime_notifyListNotifyAll
func runtimeNotifyListNotifyAll(l *notifyList)

//go:linkname runtimeNotifyListCheck sync.runtime_notifyListCheck
func runtimeNotifyListCheck(size uintptr)

func init() { runtimeNotifyListCheck(unsafe.Sizeof(notifyList{})) }

// condWaiter is one goroutine in WaitContext: its place in the queue and
// the word it sleeps on.
type condWaiter struct {
	state      atomic.Uint32
	before     uint32 // nl.wait when it joined (guarded by mu)
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
	c.checker.check()
	t := runtimeNotifyListAdd(&c.nl) // join: before L is released, so no notification after it is lost
	c.unlockL(t)
	runtimeNotifyListWait(&c.nl, t)
	c.L.Lock()
}

// unlockL releases L for the Wait that drew ticket t. If L's Unlock
// panics (Wait without L held), the ticket is buried before the panic
// goes on.
func (c *Cond) unlockL(t uint32) {
	released := false
	defer func() {
		if !released {
			c.bury(t)
		}
	}()
	if m, ok := c.L.(*Mutex); ok {
		woke := m.unlockToPark() // we park next: no yield (mutex_cond.go)
		released = true
		c.yieldUnlessParking(woke, t)
		return
	}
	c.L.Unlock()
	released = true
}

// bury takes ticket t, whose Wait failed to release L, out of the order:
// if it is still waiting, the next Signal to take it passes over it (dead);
// if a notification took it meanwhile (a Signal without L), that Signal is
// passed on to the next waiter.
func (c *Cond) bury(t uint32) {
	c.mu.Lock()
	if !condBefore(t, c.notified()) { // still waiting
		if c.dead == nil {
			c.dead = new([]uint32)
		}
		*c.dead = append(*c.dead, t)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.Signal()
}

// notified is nl.notify: the next ticket a notification takes. It moves
// only under mu (every notification holds it), so with mu held it is
// stable; without, it is a snapshot.
func (c *Cond) notified() uint32 { return atomic.LoadUint32(&c.nl.notify) }

// condBefore reports whether ticket a was drawn before b, as the runtime
// compares its tickets (mod 2^32, less than 2^31 apart).
func condBefore(a, b uint32) bool { return int32(a-b) < 0 }

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
	c.checker.check()
	if ctx.Done() == nil {
		c.Wait()
		return nil
	}
	return c.waitContext(ctx)
}

// Signal wakes the goroutine that has waited longest on c, if any.
func (c *Cond) Signal() {
	c.checker.check()
	if !c.idle() {
		c.signalSlow()
	}
}

// Broadcast wakes every goroutine waiting on c.
func (c *Cond) Broadcast() {
	c.checker.check()
	if !c.idle() {
		c.broadcastSlow()
	}
}

// idle reports whether nobody waits: no ticket waiting, no record queued.
// The ticket count is read on both sides of the queue's: if no ticket
// was drawn in between, there was a moment (the queue's read) with no
// ticket waiting and no record queued, at which a Signal that does
// nothing takes effect. Dead tickets count as waiting: signalSlow
// passes over them.
func (c *Cond) idle() bool {
	w := c.nl.wait.Load()
	return w == c.notified() && c.queued.Load() == 0 && c.nl.wait.Load() == w
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
	w.before = c.nl.wait.Load()
	if t := c.tail; t != nil {
		w.prev = t
		t.next = w
	} else {
		c.head = w
	}
	c.tail = w
	c.queued.Add(1)
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
	c.queued.Add(-1)
}

// signalSlow takes the oldest waiter: the queue's head if every ticket
// drawn before it was taken, else the next ticket (passing over dead
// ones).
func (c *Cond) signalSlow() {
	c.mu.Lock()
	for {
		n := c.notified()
		if w := c.head; w != nil && w.before == n {
			c.unlink(w)
			c.mu.Unlock()
			choose(w)
			return
		}
		if c.nl.wait.Load() == n { // left (cancelled) or taken since the caller looked
			break
		}
		runtimeNotifyListNotifyOne(&c.nl) // takes ticket n (only we notify: mu) and wakes its goroutine alone
		if !c.unbury(n) {
			break
		}
		// n's Wait failed: this Signal is for the next waiter.
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
// queue's records, oldest first (the runtime has readied the ticket
// holders).
func (c *Cond) broadcastSlow() {
	c.mu.Lock()
	runtimeNotifyListNotifyAll(&c.nl) // nothing to do if no ticket waits
	if c.dead != nil {
		c.dead = nil // every ticket was taken, dead ones too
	}
	// With no record queued (plain Waits only, the common case) the queue
	// is left alone: queued's store is an exchange, a full fence, and the
	// stores would dirty the line that the waiters' tickets are drawn on.
	list := c.head
	if list != nil {
		c.head, c.tail = nil, nil
		for w := list; w != nil; w = w.next {
			w.queued = false
		}
		c.queued.Store(0)
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
