package lockword

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// Lock-word layout of SpinMutex: bit 0 held, bit 1 a pending hand-off,
// bits 2-7 the number of starving waiters, bits 8-30 the number of other
// sleepers, bit 31 statsFlag.
const (
	spinHeld = 1
	// spinHandoff: Unlock gave the lock to a starving waiter, which has
	// not yet claimed it; the held bit stays set meanwhile.
	spinHandoff = 2
	// spinStarver counts one starving waiter (waited spinStarveNs, asleep
	// keyed by spinStarveKey); at most 63, more stay ordinary sleepers.
	spinStarver     = 4
	spinStarverMask = spinSleeper - spinStarver
	spinSleeper     = 256 // one parked (or about to park) waiter
	spinCount       = statsFlag - spinSleeper
)

// Starvation bound of SpinMutex, as Mutex's (mutexStarveNs): a waiter that
// has waited this long since it started yielding queues for a hand-off.
const (
	spinStarveNs  = 1_000_000 // wait, in nanoseconds, before queueing for a hand-off
	spinStarveKey = 1         // wait key of the starving waiters' queue
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
//	1      handed off: Unlock gave the lock to a starving waiter (bit 0
//	       stays set); a starving waiter claims it by clearing bit 1, or
//	       the last one counted, leaving cancelled, releases it
//	2-7    number of starving waiters (waited 1 ms): Unlock hands the
//	       lock over to the oldest of them instead of releasing it
//	8-30   number of other parked waiters (Unlock wakes one if nonzero)
//	31     statistics enabled (EnableStats): fast paths fail, slow paths count
//
// so 0 is free, 1 is held with nobody asleep. Lock's fast path is one CAS
// 0→1 and Unlock's one CAS 1→0. Spinning on loads keeps the cache line
// shared while the lock is held; only the set takes it exclusive.
//
// Prefer it to Mutex for very short critical sections when goroutines
// rarely outnumber cores. It is not fair, but its waits are bounded as
// Mutex's are: a waiter that has waited 1 ms since it started yielding
// (and still finds the lock held) stops competing and sleeps in a queue
// of starving waiters; while any is counted, Unlock keeps the lock held,
// sets bit 1 and wakes the oldest of them, which owns the lock as soon as
// it runs, and spinners do not compete. A hand-off is never taken back:
// if the wake-up finds no starving waiter asleep, one counted is on its
// way and claims it, and a starving waiter whose context ends releases a
// hand-off that it leaves with nobody counted. An Unlock that wakes a parked waiter yields its processor
// (runtime.Gosched), as Mutex's does, so that the woken goroutine runs at
// once rather than when the running goroutines' time slice ends. At most
// 2^23-1 goroutines may sleep on one SpinMutex (their stacks alone would
// take 16 GiB).
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
	if deadlockBuilt && lockTracking.Load() != 0 {
		s.lockTracked(context.Background())
		return
	}
	// Fast path: free, nobody asleep, no statistics: set the held bit.
	if s.state.CompareAndSwap(0, spinHeld) {
		return
	}
	s.lockSlow()
}

// TryLock tries to lock s without waiting and reports whether it did.
func (s *SpinMutex) TryLock() bool {
	if deadlockBuilt && lockTracking.Load() != 0 {
		return trackAcquire(nil, s.ref(), s.tryAcquireFree, nil) == nil
	}
	if s.state.CompareAndSwap(0, spinHeld) {
		return true
	}
	return s.tryLockSlow()
}

// LockContext locks s, waiting until it is free or ctx is done. If the lock
// is free it is taken even when ctx is already done. On failure it returns
// ctx.Err() and the caller does not hold the lock.
func (s *SpinMutex) LockContext(ctx context.Context) error {
	if deadlockBuilt && lockTracking.Load() != 0 && ctx != nil {
		return s.lockTracked(ctx)
	}
	if ctx != nil && s.state.CompareAndSwap(0, spinHeld) {
		return nil
	}
	return s.lockSlowContext(ctx)
}

// Unlock unlocks s. If it wakes a parked waiter it yields the processor
// to it (runtime.Gosched). Unlocking a free SpinMutex panics with the
// message "lockword: Unlock of unlocked SpinMutex".
func (s *SpinMutex) Unlock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		trackRelease(s) // before the release: see trackRelease
	}
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
		if old&spinStarverMask != 0 {
			// Someone starves: keep the held bit and hand the lock over.
			if s.state.CompareAndSwap(old, old|spinHandoff) {
				s.handoff()
				return
			}
			continue
		}
		if s.state.CompareAndSwap(old, old&^spinHeld) {
			if old&spinCount != 0 {
				yieldIfWoke(wait.Wake(&s.state, 1))
			}
			return
		}
	}
}

// handoff wakes the oldest starving waiter after unlockSlow set
// spinHandoff. If none was asleep, the lock stays handed off: a starving
// waiter counted in the word is on its way to sleep (and its sleep, which
// compares the word, fails), awake (and claims at its next look), or
// leaving with its context ended, and the last to leave releases a
// hand-off that nobody claimed (leaveStarving). It is never taken back
// here: by then the waiter could have claimed it, unlocked and handed off
// to a second starving waiter, whose hand-off a take-back would release
// to whoever came first.
func (s *SpinMutex) handoff() {
	if wait.WakeKey(&s.state, spinStarveKey, 1) != 0 {
		yieldIfWoke(1) // the lock is the starving waiter's: let it run
	}
}

// leaveStarving uncounts a starving waiter whose context ended before any
// hand-off woke it. If that leaves a hand-off pending with no starving
// waiter counted, nobody will claim it: the same CAS releases the lock
// and a parked sleeper is woken if one is counted. While others are
// counted, one of them claims it.
func (s *SpinMutex) leaveStarving() {
	for {
		old := s.state.Load()
		next := old - spinStarver
		release := next&spinHandoff != 0 && next&spinStarverMask == 0
		if release {
			next &^= spinHandoff | spinHeld
		}
		if s.state.CompareAndSwap(old, next) {
			if release && next&spinCount != 0 {
				yieldIfWoke(wait.Wake(&s.state, 1))
			}
			return
		}
	}
}

// tryAcquire sets the held bit if it is clear, keeping the other bits.
func (s *SpinMutex) tryAcquire(old uint32) bool {
	return old&spinHeld == 0 && s.state.CompareAndSwap(old, old|spinHeld)
}

// ref is s for deadlock detection.
func (s *SpinMutex) ref() lockRef { return lockRef{s, "SpinMutex", &s.diag} }

// lockTracked is LockContext with deadlock detection (deadlock.go).
func (s *SpinMutex) lockTracked(ctx context.Context) error {
	return trackAcquire(ctx, s.ref(), s.tryAcquireFree, s.lockSlowContext)
}

// tryAcquireFree is TryLock without deadlock detection.
func (s *SpinMutex) tryAcquireFree() bool {
	return s.state.CompareAndSwap(0, spinHeld) || s.tryLockSlow()
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
	// holder can re-lock without its cache line being stolen. Not while
	// waiters starve: the lock goes to them.
	backoff := uint32(1)
	for i := 0; i < spinRounds; i++ {
		old := s.state.Load()
		if old&spinStarverMask != 0 {
			break
		}
		if s.tryAcquire(old) {
			t.acquired()
			return nil
		}
		procyield(backoff)
		backoff = min(2*backoff, spinRoundPause)
	}
	// Yield: with more goroutines than cores the holder may be waiting
	// for a processor that we are burning. From here on the wait is timed
	// for the starvation bound (a clock read costs less than a Gosched).
	start := time.Now()
	for round := 0; round < spinYieldRounds; round++ {
		if s.state.Load()&spinStarverMask != 0 || time.Since(start) >= spinStarveNs {
			break
		}
		runtime.Gosched()
		if s.tryAcquire(s.state.Load()) {
			t.acquired()
			return nil
		}
	}
	// Park. Count ourselves as a sleeper first, so that an Unlock after
	// our failed attempt sees us and wakes; a starving waiter counts
	// itself among the starving instead, so that Unlock hands it the lock.
	unit := uint32(spinSleeper)
	s.state.Add(unit)
	for {
		old := s.state.Load()
		if unit == spinStarver && old&spinHandoff != 0 {
			// Handed off to a starving waiter: claim it (only one CAS
			// can) and stop counting ourselves; the held bit stays.
			if s.state.CompareAndSwap(old, old&^spinHandoff-spinStarver) {
				t.acquired()
				return nil
			}
			continue
		}
		if old&spinHeld == 0 {
			// Free: take it and stop counting ourselves, in one CAS.
			if s.state.CompareAndSwap(old, old|spinHeld-unit) {
				t.acquired()
				return nil
			}
			continue
		}
		if unit == spinSleeper && old&spinStarverMask != spinStarverMask && time.Since(start) >= spinStarveNs {
			// Waited too long: move from the sleepers to the starving.
			if s.state.CompareAndSwap(old, old-spinSleeper+spinStarver) {
				unit = spinStarver
			}
			continue
		}
		t.parking(&s.state)
		// Sleep while the word is unchanged. Any change (a release,
		// another sleeper arriving) returns early and we look again.
		var err error
		if unit == spinStarver {
			err = wait.WaitKey(ctx, &s.state, old, spinStarveKey)
		} else {
			err = wait.Wait(ctx, &s.state, old)
		}
		if err != nil {
			// Not woken, so no wake-up is lost. A hand-off made
			// meanwhile found us gone: it is released here if nobody
			// else starves (leaveStarving).
			if unit == spinStarver {
				s.leaveStarving()
			} else {
				s.state.Add(-unit) // stop counting ourselves
			}
			t.abandoned()
			return err
		}
	}
}
