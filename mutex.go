package lockword

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// Lock-word states of Mutex (bits 0-1; bit 31 is statsFlag).
const (
	mutexUnlocked  = 0
	mutexLocked    = 1
	mutexContended = 2
	mutexStateMask = 3
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
// sleeping. Its lock word:
//
//	state  meaning
//	0      unlocked
//	1      locked, no waiters
//	2      locked, waiters may be sleeping: Unlock must wake one
//	+2^31  statistics enabled (EnableStats): fast paths fail, slow paths count
//
// Lock moves 0→1 with one CAS (the fast path). A waiter that finds the lock
// held spins on the word for a moment, then swaps in 2 and sleeps while the
// word is 2; when woken it swaps in 2 again, so the word stays 2 while anyone
// may be asleep. Unlock decrements the word: 1→0 is the fast path; from 2
// it then stores 0 and wakes one sleeper. A woken waiter competes with
// newcomers: the Mutex is not fair, which keeps throughput high under
// contention. Unlike sync.Mutex it has no starvation mode, so under
// sustained contention a waiter may lose to newcomers for a long time
// (beside a greedy re-locker, measured p50 45-613 ms, max 0.38-1.24 s); use
// TicketMutex where waits must be bounded (it serves in FIFO order).
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
	// Fast path: a free lock, 0→1.
	if m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		return
	}
	m.lockSlow()
}

// TryLock tries to lock m without waiting and reports whether it did.
func (m *Mutex) TryLock() bool {
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
	if ctx != nil && m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		return nil
	}
	return m.lockSlowContext(ctx)
}

// Unlock unlocks m. Unlocking an unlocked Mutex panics with the message
// "lockword: Unlock of unlocked Mutex" (sync.Mutex makes this a fatal
// error; a panic lets tests observe it, and must not be recovered from in
// production: the lock's state is then unknown).
func (m *Mutex) Unlock() {
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

// unlockSlow finishes an Unlock whose decrement left new in the word.
//
//go:noinline
func (m *Mutex) unlockSlow(new uint32) {
	switch (new + 1) & mutexStateMask { // the state before the decrement
	case mutexUnlocked:
		m.state.Add(1) // undo, so the panic leaves the word as it was
		panic("lockword: Unlock of unlocked Mutex")
	case mutexLocked:
		// Statistics flag set: the decrement already released the lock.
	case mutexContended:
		// 2→1: release fully (keeping the statistics flag) and wake one
		// sleeper. A waiter that swapped in 2 meanwhile is covered by this
		// wake-up: the woken waiter swaps 2 back in (Drepper's argument).
		m.state.And(statsFlag)
		wait.Wake(&m.state, 1)
	}
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

// swap sets the state bits of the word to s and returns the old state
// bits: Drepper's atomic exchange, keeping the statistics flag.
func (m *Mutex) swap(s uint32) uint32 {
	for {
		old := m.state.Load()
		if old&statsFlag == 0 {
			// No statistics: one exchange, as in Drepper's mutex.
			old = m.state.Swap(s)
			if old&statsFlag != 0 {
				// EnableStats ran between the load and the exchange:
				// put its flag back (a fast path in that instant
				// goes uncounted; the lock is unaffected).
				m.state.Or(statsFlag)
			}
			return old & mutexStateMask
		}
		// Statistics on: keep the flag set throughout, so that no fast
		// path slips through uncounted.
		if m.state.CompareAndSwap(old, statsFlag|s) {
			return old & mutexStateMask
		}
	}
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
	// release; sleeping now would cost a wake-up of microseconds.
	backoff := uint32(1)
	for i := 0; i < mutexSpinIterations; i++ {
		s := m.state.Load()
		if s&mutexStateMask == mutexUnlocked && m.state.CompareAndSwap(s, s|mutexLocked) {
			t.acquired()
			return nil
		}
		procyield(backoff)
		backoff = min(2*backoff, mutexSpinPause)
	}

	// Sleep. Swap in 2, not 1: we are about to wait, so Unlock must wake.
	// If the swap returns 0 we took the lock (conservatively marked
	// contended: one extra Wake on an empty queue costs a single load).
	for c := m.swap(mutexContended); c != mutexUnlocked; c = m.swap(mutexContended) {
		t.parking(&m.state)
		if err := wait.Wait(ctx, &m.state, m.state.Load()&statsFlag|mutexContended); err != nil {
			// Not woken (wait.Wait returns an error only then), so no
			// wake-up is lost. The word may stay 2 with nobody asleep:
			// that costs the next Unlock one empty Wake, nothing more.
			t.abandoned()
			return err
		}
	}
	t.acquired()
	return nil
}
