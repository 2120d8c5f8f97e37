package lockword

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// Lock-word layout of Mutex: bits 0-1 the state, bit 2 a pending hand-off,
// bits 3-30 the number of starving waiters, bit 31 statsFlag.
const (
	mutexUnlocked  = 0
	mutexLocked    = 1
	mutexContended = 2
	mutexStateMask = 3

	// mutexHandoff: Unlock gave the lock to a starving waiter, which has
	// not yet claimed it. The state bits stay 2 meanwhile, so the lock is
	// never seen free.
	mutexHandoff = 4
	// mutexStarver counts one starving waiter: one that has waited
	// mutexStarveNs and sleeps keyed by mutexStarveKey, waiting to be
	// handed the lock.
	mutexStarver     = 8
	mutexStarverMask = statsFlag - mutexStarver
)

// Starvation bound of Mutex. A waiter that has waited this long since it
// first slept stops competing for the lock: it queues for a hand-off,
// and every Unlock hands the lock to the oldest such waiter until none is
// left. Go's sync.Mutex switches to hand-off after the same 1 ms (Go 1.9,
// golang/go#13086); parking_lot makes a fair unlock every 0.5 ms on
// average.
const (
	mutexStarveNs  = 1_000_000 // wait, in nanoseconds, before queueing for a hand-off
	mutexStarveKey = 1         // wait key of the starving waiters' queue
)

// Spin tuning for Mutex, chosen by BenchmarkContended on a 2-core AMD EPYC
// where one PAUSE takes about 19 ns (see BENCHMARKS.md). A cross-core
// wake-up costs microseconds, so a waiter first watches the word, with a
// pause that doubles between looks (exponential backoff) up to a cap: about
// 190 pauses, 3.6 µs here, before it sleeps.
const (
	mutexSpinIterations = 8  // looks at the word before sleeping
	mutexSpinPause      = 64 // cap on PAUSE/YIELD hints between looks
)

// ErrNilContext is returned, without acquiring or waiting, by every method
// that takes a context.Context (LockContext, RLockContext, WaitContext,
// Ring's Push and Pop, ...) when that context is nil: pass
// context.Background() to wait without a deadline.
var ErrNilContext = errors.New("lockword: nil context.Context (use context.Background())")

// A Mutex is a mutual exclusion lock: the three-state futex mutex of Ulrich
// Drepper, "Futexes Are Tricky" (2011), mutex #3, with a short spin before
// sleeping and a hand-off that bounds how long a waiter can be overtaken.
// Its lock word:
//
//	state  meaning
//	0      unlocked
//	1      locked, no waiters
//	2      locked, waiters may be sleeping: Unlock must wake one
//	+4     handed off: Unlock gave the lock to a starving waiter (state
//	       stays 2); a starving waiter claims it by clearing 4, or the
//	       last one counted, leaving cancelled, releases it (4 and 2 → 0)
//	+8·n   n waiters starve (waited 1 ms): Unlock hands the lock over to
//	       the oldest of them instead of releasing it
//	+2^31  statistics enabled (EnableStats): fast paths fail, slow paths count
//
// Lock moves 0→1 with one CAS (the fast path). A waiter that finds the lock
// held spins on the word for a moment (not while another goroutine is
// runnable on its processor, as sync.Mutex), then sets state 2 and sleeps
// while the word is unchanged; when woken it tries again, setting 2
// again, so the word stays 2 while anyone may be asleep. Unlock decrements the word: 1→0
// is the fast path; from 2 it then stores 0 and wakes one sleeper. A woken
// waiter competes with newcomers, which keeps throughput high under
// contention: a goroutine may take the lock many times in a row.
//
// The bound: a waiter that has waited 1 ms since it first slept (and still
// finds the lock held) stops competing. It adds itself to the starving
// count and sleeps in a queue of its own. While that count is nonzero,
// Unlock does not release the lock: it sets the hand-off bit, leaving the
// state at 2, and wakes the oldest starving waiter, which owns the lock as
// soon as it runs; newcomers find the lock held and queue. This is
// sync.Mutex's starvation mode (Go 1.9). Once a waiter starves it waits
// one hand-off per starving waiter ahead of it. Before that it must be
// woken to notice, and a woken goroutine must get a processor: an Unlock
// that wakes a waiter (plain or starving) therefore yields its processor
// (runtime.Gosched), so that the woken goroutine runs at once rather than
// when the running goroutines' 10 ms time slice ends; they seldom block,
// retaking the lock on the fast path or by spinning. Without the yield
// the sleepers' queue advanced a few places per 10 ms and at 64
// goroutines on 2 cores the worst wait was 2.5-6× sync.Mutex's
// (BENCHMARKS.md, "Mutex and SpinMutex"). A hand-off is never taken
// back: if the wake-up finds no starving waiter asleep, one counted is
// still on its way and claims it, and a starving waiter whose context
// ends releases a hand-off that it leaves with nobody counted, so the
// lock is never stranded. Use TicketMutex where every acquisition must be
// served in FIFO order.
//
// Waiters sleep by parking their goroutine (see internal/wait), never by
// blocking an OS thread, so any number of goroutines may wait.
//
// The zero value is an unlocked Mutex. A Mutex must not be copied after
// first use. It is not tied to a goroutine: one goroutine may lock it and
// another unlock it.
//
// In the terminology of the Go memory model, the n'th call to Unlock
// synchronizes before the m'th call to Lock (or successful TryLock or
// LockContext) for any n < m, as for sync.Mutex.
//
// A Mutex is 16 bytes: the lock word and a pointer to optional diagnostics
// (SetName, SetStuckThreshold, EnableStats).
type Mutex struct {
	_     noCopy
	state atomic.Uint32
	diag
}

var _ interface {
	Lock()
	Unlock()
} = (*Mutex)(nil)

// Lock locks m, waiting until it is available.
func (m *Mutex) Lock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		m.lockTracked(context.Background())
		return
	}
	// Fast path: a free lock, 0→1.
	if m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		return
	}
	m.lockSlow()
}

// TryLock tries to lock m without waiting and reports whether it did.
func (m *Mutex) TryLock() bool {
	if deadlockBuilt && lockTracking.Load() != 0 {
		return trackAcquire(nil, m.ref(), m.tryAcquire, nil) == nil
	}
	if m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		return true
	}
	return m.tryLockSlow()
}

// LockContext locks m, waiting until it is available or ctx is done. If
// the lock is free it is taken even when ctx is already done. On failure it
// returns ctx.Err() (so errors.Is(err, context.Canceled) or
// context.DeadlineExceeded holds) and the caller does not hold the lock.
// A cancelled waiter never swallows the wake-up of another.
func (m *Mutex) LockContext(ctx context.Context) error {
	if deadlockBuilt && lockTracking.Load() != 0 && ctx != nil {
		return m.lockTracked(ctx)
	}
	if ctx != nil && m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		return nil
	}
	return m.lockSlowContext(ctx)
}

// Unlock unlocks m. If it wakes a waiter it yields the processor to it
// (runtime.Gosched); an Unlock with nobody asleep never yields. Unlocking
// an unlocked Mutex panics with the message
// "lockword: Unlock of unlocked Mutex" (sync.Mutex makes this a fatal
// error; a panic lets tests observe it, and must not be recovered from in
// production: the lock's state is then unknown).
func (m *Mutex) Unlock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		trackRelease(m) // before the release: see trackRelease
	}
	// Fast path: decrement, as Drepper's mutex #3 does; 1→0 means nobody
	// waits and we are done.
	if new := m.state.Add(^uint32(0)); new != mutexUnlocked {
		m.unlockSlow(new)
	}
}

// EnableStats starts collecting contention statistics (see Stats). It may
// be called at any time. From then on every acquisition takes the slow
// path and pays a few atomic adds on counters shared by all its users.
func (m *Mutex) EnableStats() {
	m.enableStats()
	m.state.Or(statsFlag)
}

// The diagnostics methods, spelt out rather than promoted from diag so
// that the documentation shows them with Mutex's receiver, as its own.

// SetName names the lock in stuck reports and in Stats users' output.
// It may be called at any time, concurrently with use of the lock.
func (m *Mutex) SetName(name string) { m.diag.SetName(name) }

// Name returns the name given by SetName, or "".
func (m *Mutex) Name() string { return m.diag.Name() }

// SetStuckThreshold sets how long a waiter waits before the lock's stuck
// report (a log/slog warning) is logged; the waiter keeps waiting. One
// report covers every waiter of the lock, repeated only when the longest
// wait or the number of waiters doubles (docs/in-process.md). Zero
// restores DefaultStuckThreshold; a negative duration disables reports
// for this lock.
func (m *Mutex) SetStuckThreshold(threshold time.Duration) { m.diag.SetStuckThreshold(threshold) }

// Stats returns a snapshot of the statistics collected since EnableStats;
// all zero if it was never called.
func (m *Mutex) Stats() Stats { return m.diag.Stats() }

// unlockSlow finishes an Unlock whose decrement left new in the word, and
// yields to a goroutine it woke. Out of line, so that Unlock inlines.
//
//go:noinline
func (m *Mutex) unlockSlow(new uint32) { yieldIfWoke(m.release(new)) }

// release is unlockSlow without the yield: it returns how many goroutines
// it woke, and the caller decides whether to yield to them (Unlock does,
// Cond's unlockToPark need not).
func (m *Mutex) release(new uint32) (woken int) {
	switch (new + 1) & mutexStateMask { // the state before the decrement
	case mutexUnlocked:
		m.state.Add(1) // undo, so the panic leaves the word as it was
		panic("lockword: Unlock of unlocked Mutex")
	case mutexLocked:
		// The decrement released the lock; the statistics flag or a
		// starving count kept the word nonzero. Starving waiters sleep
		// only at state 2, so none of them is asleep: nothing to wake.
	case mutexContended:
		// Now 1 (still locked, nobody else can take it). Waiters may
		// change the word meanwhile (set 2 again, join the starving), so
		// the next step is a CAS on what we load.
		for old := new; ; old = m.state.Load() {
			if old&mutexStarverMask != 0 {
				// Someone starves: keep the lock locked (state 2, as
				// plain sleepers may remain) and hand it over.
				if m.state.CompareAndSwap(old, old&^mutexStateMask|mutexContended|mutexHandoff) {
					return m.handoff()
				}
				continue
			}
			// Release (keeping the statistics flag) and wake one
			// sleeper. A waiter that set 2 meanwhile is covered by this
			// wake-up: the woken waiter sets 2 again (Drepper's argument).
			if m.state.CompareAndSwap(old, old&^mutexStateMask) {
				return wait.Wake(&m.state, 1)
			}
		}
	}
	return 0
}

// yieldIfWoke gives up the processor (runtime.Gosched) after Unlock woke
// a waiter (woken > 0), so that the woken goroutine runs now instead of
// when our time slice ends. The wake-up readied it on this P (runnext),
// but the running goroutines seldom block: they retake the lock on the
// fast path or by spinning, so without the yield a woken waiter waited
// for the scheduler's 10 ms preemption, and with more goroutines than
// cores the sleepers' queue advanced a few places per 10 ms (BENCHMARKS.md,
// "Mutex and SpinMutex"). A Mutex waiter also stops spinning while its P
// has a runnable goroutine (runtimeCanSpin), which covers what the yield
// cannot: a woken waiter that the scheduler passed over (it takes from
// the global queue now and then) or pushed out of runnext. One Gosched
// per wake-up, not per Unlock: an Unlock that wakes nobody does not
// yield. SpinMutex's Unlock uses it too.
func yieldIfWoke(woken int) {
	if woken > 0 {
		runtime.Gosched()
	}
}

// handoff wakes the oldest starving waiter after unlockSlow set
// mutexHandoff; that waiter claims the lock. If none was asleep, the lock
// stays handed off all the same: every starving waiter counted in the
// word either is on its way to sleep (its sleep compares the word, which
// now has mutexHandoff, so it looks again and claims), or is awake and
// claims at its next look, or is leaving with its context ended, and the
// last to leave releases a hand-off that nobody claimed (leaveStarving).
// Unlock never takes a hand-off back: by the time it looked again, the
// waiter could have claimed it, unlocked and handed off to a second
// starving waiter, and a take-back would then release that second
// hand-off to whoever came first, overtaking a starving waiter.
// It returns how many it woke (0 or 1); Unlock then yields: the lock is
// the starving waiter's, let it run.
func (m *Mutex) handoff() (woken int) {
	return wait.WakeKey(&m.state, mutexStarveKey, 1)
}

// leaveStarving uncounts a starving waiter whose context ended before any
// hand-off woke it. If that leaves a hand-off pending with no starving
// waiter counted, nobody will claim it: the same CAS releases the lock
// (clearing the hand-off and the state) and a plain sleeper is woken, as
// from state 2. While others are counted, one of them claims it.
func (m *Mutex) leaveStarving() {
	for {
		old := m.state.Load()
		next := old - mutexStarver
		release := next&mutexHandoff != 0 && next&mutexStarverMask == 0
		if release {
			next &^= mutexHandoff | mutexStateMask
		}
		if m.state.CompareAndSwap(old, next) {
			if release {
				yieldIfWoke(wait.Wake(&m.state, 1))
			}
			return
		}
	}
}

// ref is m for deadlock detection.
func (m *Mutex) ref() lockRef { return lockRef{m, "Mutex", &m.diag} }

// lockTracked is LockContext with deadlock detection (deadlock.go).
func (m *Mutex) lockTracked(ctx context.Context) error {
	return trackAcquire(ctx, m.ref(), m.tryAcquire, m.lockSlowContext)
}

// tryAcquire is TryLock without deadlock detection.
func (m *Mutex) tryAcquire() bool {
	return m.state.CompareAndSwap(mutexUnlocked, mutexLocked) || m.tryLockSlow()
}

//go:noinline
func (m *Mutex) tryLockSlow() bool {
	flag := m.state.Load() & statsFlag
	if flag != 0 && m.state.CompareAndSwap(flag|mutexUnlocked, flag|mutexLocked) {
		m.uncontended()
		return true
	}
	return false
}

// lockSlow is Lock's slow path; a separate function without a context
// argument keeps Lock within the inliner's budget.
//
//go:noinline
func (m *Mutex) lockSlow() { m.lockSlowContext(context.Background()) }

func (m *Mutex) lockSlowContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	flag := m.state.Load() & statsFlag
	if flag != 0 && m.state.CompareAndSwap(flag|mutexUnlocked, flag|mutexLocked) {
		// Free: we came here only to be counted.
		m.uncontended()
		return nil
	}
	t := m.track("Mutex", m)

	// Spin: the holder is likely running on another core and about to
	// release; sleeping now would cost a wake-up of microseconds. Not
	// while waiters starve: Unlock hands the lock to them, it is never
	// left free for a spinner. Nor while another goroutine is runnable
	// on our processor (runtimeCanSpin, sync.Mutex's rule): spins that
	// keep succeeding never enter the scheduler, and that goroutine (a
	// woken waiter that must run to keep the sleepers' queue moving)
	// waited for our preemption, 10 ms.
	backoff := uint32(1)
	for i := 0; i < mutexSpinIterations; i++ {
		s := m.state.Load()
		if s&mutexStarverMask != 0 {
			break
		}
		if s&mutexStateMask == mutexUnlocked && m.state.CompareAndSwap(s, s|mutexLocked) {
			t.acquired()
			return nil
		}
		if !runtimeCanSpin(0) {
			break // sleep: the scheduler runs the other goroutine
		}
		procyield(backoff)
		backoff = min(2*backoff, mutexSpinPause)
	}

	// Sleep, on the word as we last saw it, until it changes or we are
	// woken; then look again. Plain waiters sleep on the word itself,
	// starving ones keyed, so that Unlock can wake them alone.
	var slept time.Time // when we first went to sleep
	starving := false   // counted in the word's starving waiters
	for {
		s := m.state.Load()
		switch {
		case starving && s&mutexHandoff != 0:
			// Handed off to a starving waiter: claim it (only one CAS
			// can) and stop counting ourselves. The state stays 2.
			if m.state.CompareAndSwap(s, s-mutexHandoff-mutexStarver) {
				t.acquired()
				return nil
			}
			continue
		case s&mutexStateMask == mutexUnlocked:
			// Free. Take it as 2, not 1: we slept, others may, and
			// Unlock must wake them (one extra Wake on an empty queue
			// costs a single load).
			next := s | mutexContended
			if starving {
				next -= mutexStarver
			}
			if m.state.CompareAndSwap(s, next) {
				t.acquired()
				return nil
			}
			continue
		case !starving && !slept.IsZero() && time.Since(slept) >= mutexStarveNs:
			// Waited too long: stop competing and queue for a hand-off.
			// State 2, so that Unlock takes its slow path and sees us.
			if m.state.CompareAndSwap(s, s&^mutexStateMask|mutexContended+mutexStarver) {
				starving = true
			}
			continue
		case s&mutexStateMask != mutexContended:
			// Held as 1: mark contended so Unlock knows to wake.
			next := s&^mutexStateMask | mutexContended
			if !m.state.CompareAndSwap(s, next) {
				continue
			}
			s = next
		}
		if slept.IsZero() {
			slept = time.Now()
		}
		t.parking(&m.state)
		var err error
		if starving {
			err = wait.WaitKey(ctx, &m.state, s, mutexStarveKey)
		} else {
			err = wait.Wait(ctx, &m.state, s)
		}
		if err != nil {
			// Not woken (wait returns an error only then), so no
			// wake-up is lost. The word may stay 2 with nobody asleep:
			// that costs the next Unlock one empty Wake, nothing more.
			// A hand-off made meanwhile found us gone: it is released
			// here if nobody else starves (leaveStarving).
			if starving {
				m.leaveStarving()
			}
			t.abandoned()
			return err
		}
	}
}
