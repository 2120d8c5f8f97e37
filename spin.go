package lockword

import (
	"context"
	"runtime"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// Lock-word layout of SpinMutex: bit 0 held, bits 1-30 sleeper count,
// bit 31 statsFlag.
const (
	spinHeld    = 1
	spinSleeper = 2 // one parked (or about to park) waiter
	spinCount   = statsFlag - spinSleeper
)

// Spin tuning for SpinMutex, chosen by BenchmarkContended on the 2-core
// benchmark machine (see BENCHMARKS.md): a few looks at the word with the
// CPU pause hint between them, doubling (1+2+4+8 = 15 pauses, about 0.3 µs
// there), then a few rounds of yielding the processor (runtime.Gosched) so
// that a preempted holder can run, then park, so that goroutines that
// outnumber cores do not burn every core spinning on a holder that is not
// running. Longer CPU spinning (16 looks, 13 µs) halved throughput at 4-64
// goroutines on 2 cores.
const (
	spinRounds      = 4  // test-and-test-and-set attempts before yielding
	spinRoundPause  = 64 // cap on PAUSE/YIELD hints between attempts
	spinYieldRounds = 8  // runtime.Gosched calls before parking
)

// A SpinMutex is a test-and-test-and-set (TTAS) spin lock with exponential
// backoff (Anderson, 1990; Herlihy & Shavit, "The Art of Multiprocessor
// Programming", ch. 7) that degrades gracefully: a waiter spins on plain
// atomic loads with the CPU's pause hint (PAUSE on amd64, YIELD on arm64)
// until the lock looks free, then tries to set the held bit; after a
// bounded number of rounds it yields the processor (runtime.Gosched), and
// after that it parks. The lock word:
//
//	bits   meaning
//	0      held
//	1-30   number of parked waiters (Unlock wakes one if nonzero)
//	31     statistics enabled (EnableStats): fast paths fail, slow paths count
//
// so 0 is free, 1 is held with nobody asleep. Lock's fast path is one CAS
// 0→1 and Unlock's one CAS 1→0. Spinning on loads keeps the cache line
// shared while the lock is held; only the set takes it exclusive.
//
// Prefer it to Mutex for very short critical sections when goroutines
// rarely outnumber cores. It is not fair and, like Mutex, has no
// starvation mode.
//
// Ordering: the set that claims the lock is an acquire and the store that
// releases it a release (Go's atomics are sequentially consistent, which is
// stronger): the n'th call to Unlock synchronizes before the m'th call to
// Lock for any n < m.
//
// The zero value is a free SpinMutex. It must not be copied after first use.
// It is 16 bytes.
type SpinMutex struct {
	_     noCopy
	state atomic.Uint32
	diag
}

var _ interface {
	Lock()
	Unlock()
} = (*SpinMutex)(nil)

// Lock locks s, spinning, then yielding, then sleeping until it is free.
func (s *SpinMutex) Lock() {
	// Fast path: free, nobody asleep, no statistics: set the held bit.
	if s.state.CompareAndSwap(0, spinHeld) {
		return
	}
	s.lockSlow()
}

// TryLock tries to lock s without waiting and reports whether it did.
func (s *SpinMutex) TryLock() bool {
	if s.state.CompareAndSwap(0, spinHeld) {
		return true
	}
	return s.tryLockSlow()
}

// LockContext locks s, waiting until it is free or ctx is done. If the lock
// is free it is taken even when ctx is already done. On failure it returns
// ctx.Err() and the caller does not hold the lock.
func (s *SpinMutex) LockContext(ctx context.Context) error {
	if ctx != nil && s.state.CompareAndSwap(0, spinHeld) {
		return nil
	}
	return s.lockSlowContext(ctx)
}

// Unlock unlocks s. Unlocking a free SpinMutex panics with the message
// "lockword: Unlock of unlocked SpinMutex".
func (s *SpinMutex) Unlock() {
	// Fast path: held with nobody asleep, 1→0.
	if s.state.CompareAndSwap(spinHeld, 0) {
		return
	}
	s.unlockSlow()
}

// EnableStats starts collecting contention statistics (see Stats). It may
// be called at any time. From then on every acquisition takes the slow
// path and pays a few atomic adds on counters shared by all its users.
func (s *SpinMutex) EnableStats() {
	s.enableStats()
	s.state.Or(statsFlag)
}

//go:noinline
func (s *SpinMutex) unlockSlow() {
	for {
		old := s.state.Load()
		if old&spinHeld == 0 {
			panic("lockword: Unlock of unlocked SpinMutex")
		}
		if s.state.CompareAndSwap(old, old&^spinHeld) {
			if old&spinCount != 0 {
				wait.Wake(&s.state, 1)
			}
			return
		}
	}
}

// tryAcquire sets the held bit if it is clear, keeping the other bits.
func (s *SpinMutex) tryAcquire(old uint32) bool {
	return old&spinHeld == 0 && s.state.CompareAndSwap(old, old|spinHeld)
}

//go:noinline
func (s *SpinMutex) tryLockSlow() bool {
	if s.tryAcquire(s.state.Load()) {
		s.uncontended()
		return true
	}
	return false
}

//go:noinline
func (s *SpinMutex) lockSlow() { s.lockSlowContext(context.Background()) }

func (s *SpinMutex) lockSlowContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s.tryAcquire(s.state.Load()) {
		// Free: we came here only to be counted (or to pass sleepers).
		s.uncontended()
		return nil
	}
	t := s.track("SpinMutex", s)

	// Spin: test with plain loads until the word looks free, then set.
	// The pause between tests doubles up to a cap (exponential backoff):
	// fewer waiters touch the line at the moment it is released, and the
	// holder can re-lock without its cache line being stolen.
	backoff := uint32(1)
	for i := 0; i < spinRounds; i++ {
		if s.tryAcquire(s.state.Load()) {
			t.acquired()
			return nil
		}
		procyield(backoff)
		backoff = min(2*backoff, spinRoundPause)
	}
	// Yield: with more goroutines than cores the holder may be waiting
	// for a processor that we are burning.
	for round := 0; round < spinYieldRounds; round++ {
		runtime.Gosched()
		if s.tryAcquire(s.state.Load()) {
			t.acquired()
			return nil
		}
	}
	// Park. Count ourselves as a sleeper first, so that an Unlock after
	// our failed attempt sees us and wakes.
	s.state.Add(spinSleeper)
	for {
		old := s.state.Load()
		if old&spinHeld == 0 {
			// Free: take it and stop counting ourselves, in one CAS.
			if s.state.CompareAndSwap(old, old|spinHeld-spinSleeper) {
				t.acquired()
				return nil
			}
			continue
		}
		t.parking(&s.state)
		// Sleep while the word is unchanged. Any change (a release,
		// another sleeper arriving) returns early and we look again.
		if err := wait.Wait(ctx, &s.state, old); err != nil {
			// Not woken, so no wake-up is lost.
			s.state.Add(^uint32(spinSleeper - 1)) // subtract one sleeper
			t.abandoned()
			return err
		}
	}
}
