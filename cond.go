package lockword

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// A Cond is a condition variable: a rendezvous point for goroutines
// waiting for, or announcing, a change to state guarded by a lock. It is
// built on one sequence word, as Rust's futex condition variable is: Wait
// reads the sequence while holding L, releases L, sleeps while the
// sequence is unchanged, and locks L again; Signal and Broadcast add one to
// the sequence and wake one or every sleeper. Its lock word:
//
//	word  meaning
//	seq   bumped by every Signal and Broadcast; wraps at 2^32
//
// Because Wait reads seq before it releases L, and a Signal or Broadcast
// made after that (by a goroutine holding L, or not) changes seq, a
// notification can never fall between Wait's release of L and its sleep:
// no wake-up is lost. Sleepers queue in FIFO order and Signal wakes the
// oldest, so a goroutine that starts waiting after a Signal cannot take
// that Signal from one that was already waiting (a waiter that had read seq
// but not yet gone to sleep sees it changed and returns at once).
//
// Wait may return without a Signal or Broadcast (rarely: when a
// notification races with it, more than one waiter may return), so, as
// with any condition variable, wait in a loop that re-checks the
// condition:
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
// without L held.
//
// A waiter that sleeps through exactly 2^32 notifications between reading
// seq and going to sleep would miss them; that window is a few
// instructions long.
//
// The zero value is a Cond with no L, ready to use once L is set. A Cond
// must not be copied after first use. It is 24 bytes: seq at offset 0, 4
// bytes of alignment, then L.
//
// In the terminology of the Go memory model, a call to Signal or Broadcast
// synchronizes before any Wait call that it unblocks.
type Cond struct {
	_   noCopy
	seq atomic.Uint32
	// L is held while observing or changing the condition.
	L sync.Locker
}

// NewCond returns a new Cond with lock l.
func NewCond(l sync.Locker) *Cond { return &Cond{L: l} }

// Wait atomically unlocks c.L and suspends the calling goroutine; when it
// is woken it locks c.L before returning. Wait may return spuriously, so
// call it in a loop that re-checks the condition.
func (c *Cond) Wait() { condWait(nil, &c.seq, c.L) }

// WaitContext is Wait that gives up when ctx is done. It always returns
// with c.L locked, whether it was woken (nil) or ctx ended first
// (ctx.Err(); errors.Is works with context.Canceled and
// context.DeadlineExceeded). A waiter that gives up never swallows a
// Signal meant for another: if a Signal chose it as ctx ended, it reports
// the wake-up (nil) instead.
func (c *Cond) WaitContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	return condWait(ctx, &c.seq, c.L)
}

// Signal wakes the goroutine that has waited longest on c, if any.
func (c *Cond) Signal() { condNotify(&c.seq, 1) }

// Broadcast wakes every goroutine waiting on c.
func (c *Cond) Broadcast() { condNotify(&c.seq, wakeAll) }

// condWait is the protocol of Wait: read seq while holding l, release l,
// park while seq is unchanged, lock l again.
func condWait(ctx context.Context, seq *atomic.Uint32, l sync.Locker) error {
	v := seq.Load() // before Unlock: any notification after it changes seq
	l.Unlock()
	err := wait.Wait(ctx, seq, v)
	l.Lock()
	return err
}

// condNotify is Signal (n = 1) and Broadcast (n = wakeAll).
func condNotify(seq *atomic.Uint32, n int) {
	seq.Add(1) // before the wake: a waiter not yet asleep sees it and returns
	wait.Wake(seq, n)
}

// wakeAll is the n of internal/wait's Wake (and of the futex wake-ups of
// the shared kinds) for "every waiter".
const wakeAll = 1<<31 - 1
