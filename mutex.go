package lockword

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// Lock-word states of Mutex.
const (
	mutexUnlocked  = 0
	mutexLocked    = 1
	mutexContended = 2
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

// errNilContext is returned by the Context methods when given a nil context.
var errNilContext = errors.New("lockword: nil context.Context")

// A Mutex is a mutual exclusion lock: the three-state futex mutex of Ulrich
// Drepper, "Futexes Are Tricky" (2011), mutex #3, with a short spin before
// sleeping. Its lock word:
//
//	state  meaning
//	0      unlocked
//	1      locked, no waiters
//	2      locked, waiters may be sleeping: Unlock must wake one
//
// Lock moves 0→1 with one CAS (the fast path). A waiter that finds the lock
// held spins on the word for a moment, then swaps in 2 and sleeps while the
// word is 2; when woken it swaps in 2 again, so the word stays 2 while anyone
// may be asleep. Unlock swaps in 0 and wakes one sleeper if the old value was
// 2. A woken waiter competes with newcomers: the Mutex is not fair (use
// TicketMutex for FIFO order), which keeps throughput high under contention.
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
	// Fast path: no diagnostics and a free lock (0→1).
	if m.info.Load() == nil && m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		return
	}
	m.lockSlow(nil)
}

// TryLock tries to lock m without waiting and reports whether it did.
func (m *Mutex) TryLock() bool {
	if m.info.Load() == nil {
		return m.state.CompareAndSwap(mutexUnlocked, mutexLocked)
	}
	return m.tryLockSlow()
}

// LockContext locks m, waiting until it is available or ctx is done. If
// the lock is free it is taken even when ctx is already done. On failure it
// returns ctx.Err() (so errors.Is(err, context.Canceled) or
// context.DeadlineExceeded holds) and the caller does not hold the lock.
// A cancelled waiter never swallows the wake-up of another.
func (m *Mutex) LockContext(ctx context.Context) error {
	if m.info.Load() == nil && m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		return nil
	}
	if ctx == nil {
		return errNilContext
	}
	return m.lockSlow(ctx)
}

// Unlock unlocks m. Unlocking an unlocked Mutex panics with the message
// "lockword: Unlock of unlocked Mutex" (sync.Mutex makes this a fatal
// error; a panic lets tests observe it, and must not be recovered from in
// production: the lock's state is then unknown).
func (m *Mutex) Unlock() {
	// Release (swap in 0) and learn whether anyone may sleep.
	if old := m.state.Swap(mutexUnlocked); old != mutexLocked {
		m.unlockSlow(old)
	}
}

func (m *Mutex) unlockSlow(old uint32) {
	if old == mutexUnlocked {
		panic("lockword: Unlock of unlocked Mutex")
	}
	// old was mutexContended: a waiter may sleep on the word.
	wait.Wake(&m.state, 1)
}

func (m *Mutex) tryLockSlow() bool {
	if m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		m.info.Load().fastAcquired()
		return true
	}
	return false
}

func (m *Mutex) lockSlow(ctx context.Context) error {
	if info := m.info.Load(); info != nil && m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
		// The fast path deferred to us only to count this acquisition.
		info.fastAcquired()
		return nil
	}
	t := m.track("Mutex", m)

	// Spin: the holder is likely running on another core and about to
	// release; sleeping now would cost a wake-up of microseconds.
	backoff := uint32(1)
	for i := 0; i < mutexSpinIterations; i++ {
		if m.state.Load() == mutexUnlocked && m.state.CompareAndSwap(mutexUnlocked, mutexLocked) {
			t.acquired()
			return nil
		}
		procyield(backoff)
		backoff = min(2*backoff, mutexSpinPause)
	}

	// Sleep. Swap in 2, not 1: we are about to wait, so Unlock must wake.
	// If the swap returns 0 we took the lock (conservatively marked
	// contended: one extra Wake on an empty queue costs a single load).
	for c := m.state.Swap(mutexContended); c != mutexUnlocked; c = m.state.Swap(mutexContended) {
		t.parking(&m.state)
		if err := wait.Wait(ctx, &m.state, mutexContended); err != nil {
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
