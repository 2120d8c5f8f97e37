package shm

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword"
)

// Cond object layout (kind 5, 64 bytes, 64-aligned: one cache line).
const (
	condObjSize    = 64
	condObjSeq     = 0 // uint32: bumped by every Signal and Broadcast
	condObjWaiters = 4 // uint32: goroutines in Wait, all processes
)

// A Cond is a condition variable in a Region, shared by every
// process that maps it: goroutines of any process wait on it for a change
// to data in the region guarded by a lock (a Mutex or
// TicketMutex, typically), and goroutines of any process announce
// the change. Get one with (*Region).Cond. It is a sequence word in the
// region, as Rust std's futex condition variable is, waiting with the
// kernel futex in its shared flavour (Cond, in-process, is a queue of
// waiters instead: see below where they differ).
//
// Its object (kind 5, 64 bytes; docs/abi.md):
//
//	offset  word
//	0       seq: bumped by every Signal and Broadcast; wraps at 2^32
//	4       waiters: goroutines in Wait, in all processes (a hint)
//
// Wait adds itself to waiters, reads seq while holding the lock, releases
// the lock, sleeps in the kernel (FUTEX_WAIT) while seq is unchanged,
// leaves waiters and locks again. Signal and Broadcast add one to seq, then
// FUTEX_WAKE one or every sleeper, skipping the system call when waiters
// is zero. Because seq is read before the lock is released, a Signal made
// after that (by a holder of the lock, or not) changes seq, and the wait
// either sees it changed or is woken: no wake-up is lost. The kernel wakes
// sleepers of one word in the order they went to sleep, so a process whose
// waiter started waiting after a Signal does not take it from one already
// asleep; a waiter that had read seq but not yet gone to sleep sees it
// changed and returns, and one that read seq after the Signal keeps
// waiting.
//
// Where it differs from lockword.Cond: that one keeps its waiters in order
// (the runtime's notify list and a queue) and wakes exactly the ones it
// chose, so its Wait never returns without a notification. This Cond's
// Wait can: a notification that reaches a
// process returns every Wait of that process that began before it (its
// goroutines share one kernel sleeper); a waiter that had read seq but not
// yet slept returns on any later notification, so one Signal can return
// two Waits; and a WaitContext that gives up wakes the other sleepers of
// its process. Why: the kernel futex wakes sleepers of a word, not chosen
// goroutines, and a queue of waiter records in the region would need every
// record to be reclaimed after the death of the process that queued it
// (what TicketMutex's queue does for its tickets), a cost not paid
// here. So always wait in a loop that re-checks the condition. What it
// keeps in step with Cond: no lost wake-up, no steal (above), Broadcast
// reaches every waiter, and a WaitContext that gives up never swallows a
// notification.
//
// Nothing in a Cond is owned: a process that dies while waiting, or
// while signalling, leaves at most a waiters count that never drops (the
// cost: Signal makes a system call that wakes nobody). Owner death of the
// lock is the lock's business, reported by WaitContext when it re-locks.
// Within a process one waiting goroutine sleeps in the kernel and the
// others park as goroutines, so waiters cost no OS thread each; a
// notification that reaches a process wakes all of its waiters that it
// concerns, which then re-check the condition.
//
// In the terminology of the Go memory model, a call to Signal or Broadcast
// synchronizes before any Wait call that it unblocks, across processes.
type Cond struct {
	_       noCopy
	seq     *atomic.Uint32
	waiters *atomic.Uint32
	r       *Region
	name    string
	// sleeper lets one of this process's waiters sleep in the kernel;
	// the others park (see sleep).
	sleeper kernelSleeper
}

func init() {
	registerKind(kindCond, &kindInfo{
		name: "cond", size: condObjSize, align: condObjSize,
		inspect: inspectCond,
	})
}

// Cond returns the Cond named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName), creating it if
// the region has no object of that name. Every call with the same name on
// one Region returns the same *Cond. It fails with ErrObjectKind if
// name is an object of another kind, ErrRegionFull if there is no room,
// ErrRegionClosed after Close.
func (r *Region) Cond(name string) (*Cond, error) {
	return handle(r, name, kindCond, func(obj []byte) *Cond {
		return &Cond{seq: word32(obj, condObjSeq), waiters: word32(obj, condObjWaiters), r: r, name: name}
	})
}

// Wait atomically unlocks l, which the caller holds, and suspends the
// calling goroutine until a Signal or Broadcast (or another process's
// notification reaches its kernel sleeper: see the type's doc, Cond's
// Wait does not do that); it locks l again before returning (with l.Lock: a shared robust lock's Lock runs its repair
// function or panics on an owner death; use WaitContext to be told).
func (c *Cond) Wait(l sync.Locker) {
	c.r.checkOpen("shm.Cond", c.name, "Wait")
	v := c.enter()
	l.Unlock()
	c.sleep(context.Background(), v)
	l.Lock()
}

// WaitContext is Wait that gives up when ctx is done, and that re-locks l
// with l.LockContext(context.Background()), so it reports what the lock
// reports. It returns:
//
//   - nil: woken (or spuriously), l held;
//   - ctx.Err(): ctx ended first, l held;
//   - an error with errors.Is(err, ErrOwnerDead): l held, its previous
//     holder died holding it (repair, MarkConsistent);
//   - an error wrapping ErrNotRecoverable: l is not held.
//
// A waiter that gives up never swallows a notification: if seq changed
// while it waited, it reports the wake-up (nil) instead.
func (c *Cond) WaitContext(ctx context.Context, l lockword.ContextLocker) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if err := c.r.errClosed("shm.Cond", c.name, "WaitContext"); err != nil {
		return err
	}
	v := c.enter()
	l.Unlock()
	err := c.sleep(ctx, v)
	if lerr := l.LockContext(context.Background()); lerr != nil {
		return lerr
	}
	return err
}

// enter counts the caller in as a waiter and reads seq: before the lock is
// released, so that any later notification changes it, and after the
// count, so that such a notification sees the count and makes its system
// call.
func (c *Cond) enter() uint32 {
	c.waiters.Add(1)
	return c.seq.Load()
}

// sleep waits while seq is v, then counts the caller out.
//
// One goroutine per process (the sleeper) sleeps in the kernel on seq; the
// others park as goroutines behind it (kernelSleeper) until it wakes, and
// look at seq again. So a thousand waiting goroutines cost one
// OS thread, and a notification that wakes a process's sleeper wakes every
// goroutine of that process whose sequence value it changed (condition
// variables allow the extra returns).
func (c *Cond) sleep(ctx context.Context, v uint32) error {
	defer c.waiters.Add(^uint32(0))
	c.r.waiting.Add(1)
	defer c.r.waiting.Add(-1)
	for c.seq.Load() == v {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !c.sleeper.enter(ctx, func() bool { return c.seq.Load() != v }) {
			continue
		}
		sleepShared(ctx, c.seq, v, unboundedSlice)
		c.sleeper.leave()
	}
	return nil
}

// Signal wakes at least one goroutine waiting on c, in any process, if
// there is one. It wakes one kernel sleeper, the one of some process that
// sleeps for all that process's waiters; that process's waiters then all
// look again, so one Signal can return from several Waits of one process
// (allowed: callers re-check their condition in a loop), and which
// goroutine goes first within a process is not defined. A goroutine that
// starts waiting after the Signal never takes it.
func (c *Cond) Signal() {
	c.r.checkOpen("shm.Cond", c.name, "Signal")
	c.notify(1)
}

// Broadcast wakes every goroutine waiting on c, in every process.
func (c *Cond) Broadcast() {
	c.r.checkOpen("shm.Cond", c.name, "Broadcast")
	c.notify(wakeAll)
}

func (c *Cond) notify(n int) {
	c.seq.Add(1) // before the wake: a waiter not yet asleep sees it and returns
	if c.waiters.Load() != 0 {
		wakeShared(c.seq, n)
	}
}

// Name returns the object's name in its region.
func (c *Cond) Name() string { return c.name }

// holdsLock: a condition variable is never held.
func (c *Cond) holdsLock() bool { return false }

func inspectCond(_ *inspector, obj []byte, info *ObjectInfo) {
	info.Word = word32(obj, condObjSeq).Load()
	n := word32(obj, condObjWaiters).Load()
	info.Queued = int(n)
	info.Waiters = n != 0
	info.State = "idle"
	if n != 0 {
		info.State = "waiting"
	}
}
