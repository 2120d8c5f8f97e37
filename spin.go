package lockword

import (
	"context"
	"runtime"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// Lock-word states of SpinMutex.
const (
	spinFree = 0
	spinHeld = 1
)

// Spin tuning for SpinMutex (see BENCHMARKS.md): spin on loads with the CPU
// pause hint and exponential backoff (about 700 pauses, 13 µs on the 2-core
// benchmark machine), then yield the processor a few times so that a
// preempted holder can run, then park, so that goroutines that outnumber
// cores do not burn every core spinning on a holder that is not running.
const (
	spinRounds      = 16 // test-and-test-and-set attempts before yielding
	spinRoundPause  = 64 // cap on PAUSE/YIELD hints between attempts
	spinYieldRounds = 8  // runtime.Gosched calls before parking
)

// A SpinMutex is a test-and-test-and-set (TTAS) spin lock with exponential
// backoff (Anderson, 1990; Herlihy & Shavit, "The Art of Multiprocessor
// Programming", ch. 7) that degrades gracefully: a waiter spins on plain
// atomic loads with the CPU's pause hint (PAUSE on amd64, YIELD on arm64)
// until the lock looks free, then tries to claim it with an exchange; after
// a bounded number of rounds it yields the processor (runtime.Gosched), and
// after that it parks. The lock word:
//
//	state  meaning
//	0      free
//	1      held
//
// and a separate sleeper count says whether Unlock must wake a parked
// waiter (so the word itself stays a pure TTAS word: exchange 1 to claim,
// exchange 0 to release). Spinning on loads keeps the cache line shared while
// the lock is held; only the exchange takes it exclusive.
//
// Prefer it to Mutex for very short critical sections when goroutines rarely
// outnumber cores; it is not fair.
//
// Ordering: the claiming exchange is an acquire and the releasing exchange
// in Unlock a release (Go's atomics are sequentially consistent, which is
// stronger): the n'th call to Unlock synchronizes before the m'th call to
// Lock for any n < m.
//
// The zero value is a free SpinMutex. It must not be copied after first use.
// It is 16 bytes.
type SpinMutex struct {
	_        noCopy
	state    atomic.Uint32
	sleepers atomic.Uint32 // goroutines parked (or about to park) on state
	diag
}

var _ interface {
	Lock()
	Unlock()
} = (*SpinMutex)(nil)

// Lock locks s, spinning, then yielding, then sleeping until it is free.
func (s *SpinMutex) Lock() {
	// Fast path: exchange to claim (test-and-set).
	if s.info.Load() == nil && s.state.Swap(spinHeld) == spinFree {
		return
	}
	s.lockSlow(nil)
}

// TryLock tries to lock s without waiting and reports whether it did.
func (s *SpinMutex) TryLock() bool {
	if s.info.Load() == nil {
		// Test before the set: a failed exchange would still take the
		// cache line exclusive from the holder.
		return s.state.Load() == spinFree && s.state.Swap(spinHeld) == spinFree
	}
	return s.tryLockSlow()
}

// LockContext locks s, waiting until it is free or ctx is done. If the lock
// is free it is taken even when ctx is already done. On failure it returns
// ctx.Err() and the caller does not hold the lock.
func (s *SpinMutex) LockContext(ctx context.Context) error {
	if s.info.Load() == nil && s.state.Swap(spinHeld) == spinFree {
		return nil
	}
	if ctx == nil {
		return errNilContext
	}
	return s.lockSlow(ctx)
}

// Unlock unlocks s. Unlocking a free SpinMutex panics with the message
// "lockword: Unlock of unlocked SpinMutex".
func (s *SpinMutex) Unlock() {
	// Release, then check for sleepers. Both are sequentially consistent,
	// so a waiter that counted itself before re-checking the word either
	// sees this store or is seen here.
	if old := s.state.Swap(spinFree); old != spinHeld || s.sleepers.Load() != 0 {
		s.unlockSlow(old)
	}
}

func (s *SpinMutex) unlockSlow(old uint32) {
	if old != spinHeld {
		panic("lockword: Unlock of unlocked SpinMutex")
	}
	wait.Wake(&s.state, 1)
}

func (s *SpinMutex) tryLockSlow() bool {
	if s.state.Load() == spinFree && s.state.Swap(spinHeld) == spinFree {
		s.info.Load().fastAcquired()
		return true
	}
	return false
}

func (s *SpinMutex) lockSlow(ctx context.Context) error {
	if info := s.info.Load(); info != nil && s.state.Swap(spinHeld) == spinFree {
		info.fastAcquired()
		return nil
	}
	t := s.track("SpinMutex", s)

	// Spin: test with plain loads until the word looks free, then set.
	// The pause between tests doubles up to a cap (exponential backoff):
	// fewer waiters touch the line at the moment it is released, and the
	// holder can re-lock without its cache line being stolen.
	backoff := uint32(1)
	for i := 0; i < spinRounds; i++ {
		if s.state.Load() == spinFree && s.state.Swap(spinHeld) == spinFree {
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
		if s.state.Load() == spinFree && s.state.Swap(spinHeld) == spinFree {
			t.acquired()
			return nil
		}
	}
	// Park. Count ourselves before the exchange, so that an Unlock after
	// our failed exchange sees a sleeper and wakes.
	s.sleepers.Add(1)
	for s.state.Swap(spinHeld) != spinFree {
		t.parking(&s.state)
		if err := wait.Wait(ctx, &s.state, spinHeld); err != nil {
			// Not woken, so no wake-up is lost.
			s.sleepers.Add(^uint32(0))
			t.abandoned()
			return err
		}
	}
	s.sleepers.Add(^uint32(0))
	t.acquired()
	return nil
}
