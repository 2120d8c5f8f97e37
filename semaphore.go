package lockword

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// Lock-word layout of Semaphore (64 bits): bits 0-31 the permits free now,
// bit 62 statistics enabled, bit 63 waiters queued.
const (
	semFreeMask = 1<<32 - 1
	// semStats: EnableStats was called; fast paths fail so that slow
	// paths count (statsFlag's role in the 32-bit words).
	semStats = 1 << 62
	// semQueued: the waiters' queue is not empty. Fast paths fail, so
	// freed permits go to the queue's front first (FIFO), and a newcomer
	// queues behind the waiters even when enough permits are free.
	semQueued = 1 << 63
)

// MaxSemaphorePermits is the largest capacity NewSemaphore accepts: the
// free count is 32 bits of the lock word.
const MaxSemaphorePermits = math.MaxUint32

// semSpinIterations is how many times a queued waiter looks at its grant
// before it parks. A grant usually follows within a critical section's
// length; parking and being woken costs microseconds (as for TicketMutex's
// next-in-line spin).
const (
	semSpinIterations = 8 // looks at the grant before parking
	semSpinPause      = 1 // PAUSE/YIELD hints between looks
)

// ErrWeight is matched (errors.Is) by the error Acquire returns for a
// weight it can never grant: negative, or more than the capacity. The
// error is a *WeightError naming the weight and the capacity.
var ErrWeight = errors.New("lockword: semaphore weight out of range")

// A WeightError is returned by Semaphore.Acquire and LockContext for a
// weight below zero or above the semaphore's capacity. It matches
// ErrWeight.
type WeightError struct {
	N        int64  // the weight asked for
	Capacity uint32 // the semaphore's capacity
}

func (e *WeightError) Error() string {
	if e.N < 0 {
		return fmt.Sprintf("lockword: semaphore weight %d is negative", e.N)
	}
	return fmt.Sprintf("lockword: semaphore weight %d exceeds its capacity %d (it could never be granted)", e.N, e.Capacity)
}

// Is reports whether target is ErrWeight.
func (e *WeightError) Is(target error) bool { return target == ErrWeight }

// A Semaphore is a weighted counting semaphore for goroutines of one
// process: NewSemaphore(n) holds n permits; Acquire(ctx, k) takes k of
// them, waiting while fewer are free; Release(k) gives k back. Its lock
// word:
//
//	bits    meaning
//	0-31    permits free now (≤ capacity)
//	62      statistics enabled (EnableStats): fast paths fail, slow paths count
//	63      waiters queued: fast paths fail; freed permits go to the front
//
// Acquire takes permits with one CAS of the word while nobody waits (the
// fast path); Release adds them back with one CAS. An Acquire that finds
// too few free joins a FIFO queue of waiters (under a small in-process
// lock, taken only on slow paths) and sets bit 63; from then on every
// Release goes through the queue and grants permits directly to the waiters
// at its front, in order, as many as now fit, then wakes each of them (a
// waiter sleeps on a word of its own, so a grant wakes exactly the waiter
// it is for). A newcomer queues behind the waiters even when it would fit,
// so a large request is never starved by a stream of small ones: the
// discipline of golang.org/x/sync/semaphore.Weighted, with a lock-free
// uncontended path. This is the classic counting semaphore (Dijkstra,
// 1965) with the FIFO hand-off of POSIX's and x/sync's implementations.
//
// Cancellation: a waiter whose context ends leaves the queue and returns
// ctx.Err() without permits; if it was at the front, the waiters behind it
// that now fit are granted at once (x/sync before golang/go#37852 left them
// waiting). A grant that races the cancellation is kept or given back,
// never both: the waiter returns nil holding the permits, or ctx.Err()
// after releasing them to the queue.
//
// Weights: Acquire(ctx, 0) returns nil at once; a negative weight or one
// above the capacity is refused with a *WeightError (errors.Is ErrWeight)
// instead of waiting for ever. Release(k) with k < 0, or one that would
// leave more permits free than the capacity, panics ("lockword: Release of
// more permits than are held by Semaphore"), as sync.Mutex's unlock of an
// unlocked mutex is fatal. Permits are not owned: a goroutine that
// releases permits another holds is not detected unless the count
// overflows, as with x/sync's Weighted.
//
// The zero value has no permits: Acquire of any positive weight returns a
// *WeightError and Lock panics. Use NewSemaphore, because a capacity is
// what a semaphore is; a zero value that silently behaved as one permit
// (or as none, blocking for ever) would hide a missing constructor call. A
// Semaphore must not be copied after first use.
//
// In the terminology of the Go memory model, a call to Release
// synchronizes before any Acquire (or successful TryAcquire) that obtains
// permits it released.
//
// Lock, Unlock, TryLock and LockContext acquire and release one permit,
// so a Semaphore of one permit is a sync.Locker (with FIFO hand-off).
// SetName, SetStuckThreshold and EnableStats work as for every lockword
// lock; Stats counts acquisitions (not permits).
type Semaphore struct {
	_        noCopy
	state    atomic.Uint64
	capacity uint32
	queue    semQueue
	diag
}

var _ sync.Locker = (*Semaphore)(nil)

// NewSemaphore returns a semaphore holding permits free permits, at most
// MaxSemaphorePermits (it panics above that, or below zero).
func NewSemaphore(permits int64) *Semaphore {
	if permits < 0 || permits > MaxSemaphorePermits {
		panic(fmt.Sprintf("lockword: NewSemaphore(%d): permits must be in [0, %d]", permits, int64(MaxSemaphorePermits)))
	}
	s := &Semaphore{capacity: uint32(permits)}
	s.state.Store(uint64(permits))
	return s
}

// Capacity returns the number of permits the semaphore was made with.
func (s *Semaphore) Capacity() int64 { return int64(s.capacity) }

// Free returns the number of permits free at the moment of the call (a
// snapshot, for diagnostics).
func (s *Semaphore) Free() int64 { return int64(s.state.Load() & semFreeMask) }

// Acquire takes n permits, waiting until they are free or ctx is done. If
// they are free and nobody waits they are taken even when ctx is already
// done. On failure it returns ctx.Err() (or ErrNilContext for a nil ctx,
// or a *WeightError) and holds nothing.
func (s *Semaphore) Acquire(ctx context.Context, n int64) error {
	// Fast path: nobody queued, no statistics (old < semStats), and
	// 1 ≤ n ≤ free (n-1 < old, unsigned: n ≤ 0 wraps past every count).
	if old := s.state.Load(); old < semStats && uint64(n)-1 < old && ctx != nil &&
		s.state.CompareAndSwap(old, old-uint64(n)) {
		return nil
	}
	return s.acquireSlow(ctx, n)
}

// TryAcquire takes n permits if they are free and nobody waits, without
// waiting, and reports whether it did. A weight outside [0, capacity]
// returns false.
func (s *Semaphore) TryAcquire(n int64) bool {
	if old := s.state.Load(); old < semStats && uint64(n)-1 < old && s.state.CompareAndSwap(old, old-uint64(n)) {
		return true
	}
	return s.tryAcquireSlow(n)
}

// Release gives back n permits, granting them to the waiters at the front
// of the queue that now fit. It panics if n is negative or if more
// permits would be free than the capacity.
func (s *Semaphore) Release(n int64) {
	// Fast path: nobody queued, no statistics, and 1 ≤ n ≤ held, where
	// held = capacity - free (unsigned, as in Acquire): one CAS.
	if old := s.state.Load(); old < semStats && uint64(n)-1 < uint64(s.capacity)-old &&
		s.state.CompareAndSwap(old, old+uint64(n)) {
		return
	}
	s.releaseSlow(n)
}

// Lock acquires one permit, waiting as long as it takes. It panics for a
// Semaphore without permits (a zero value).
func (s *Semaphore) Lock() {
	if err := s.Acquire(context.Background(), 1); err != nil {
		panic(fmt.Sprintf("lockword: Lock of Semaphore: %v", err))
	}
}

// LockContext acquires one permit, as Acquire(ctx, 1).
func (s *Semaphore) LockContext(ctx context.Context) error { return s.Acquire(ctx, 1) }

// TryLock acquires one permit if one is free and nobody waits.
func (s *Semaphore) TryLock() bool { return s.TryAcquire(1) }

// Unlock releases one permit, as Release(1).
func (s *Semaphore) Unlock() { s.Release(1) }

// EnableStats starts collecting contention statistics (see Stats). From
// then on every call takes the slow path.
func (s *Semaphore) EnableStats() {
	s.enableStats()
	s.state.Or(semStats)
}

// stuckInfo is for the stuck watcher (stuckOwner).
func (s *Semaphore) stuckInfo() (string, *diag) { return "Semaphore", &s.diag }

// weight checks n against the capacity.
func (s *Semaphore) weight(n int64) error {
	if n < 0 || n > int64(s.capacity) {
		return &WeightError{N: n, Capacity: s.capacity}
	}
	return nil
}

//go:noinline
func (s *Semaphore) tryAcquireSlow(n int64) bool {
	if n == 0 {
		return true
	}
	if s.weight(n) != nil {
		return false
	}
	for {
		old := s.state.Load()
		if old&semQueued != 0 || old&semFreeMask < uint64(n) {
			return false
		}
		if s.state.CompareAndSwap(old, old-uint64(n)) {
			if old&semStats != 0 {
				s.uncontended()
			}
			return true
		}
	}
}

//go:noinline
func (s *Semaphore) acquireSlow(ctx context.Context, n int64) error {
	if ctx == nil {
		return ErrNilContext
	}
	if err := s.weight(n); err != nil || n == 0 {
		return err
	}
	// Without the queue's lock: take what is free while nobody waits (the
	// statistics bit, or a CAS lost to another party, brought us here).
	for old := s.state.Load(); old&semQueued == 0 && old&semFreeMask >= uint64(n); old = s.state.Load() {
		if s.state.CompareAndSwap(old, old-uint64(n)) {
			if old&semStats != 0 {
				s.uncontended()
			}
			return nil
		}
	}
	t := s.trackNoted(s)
	w, err := s.queue.join(s, uint64(n), ctx)
	if w == nil { // taken after all, or ctx done before queueing
		if err != nil {
			t.abandoned()
		} else {
			t.acquired()
		}
		return err
	}
	if err := s.await(ctx, w, &t); err != nil {
		t.abandoned()
		return err
	}
	t.acquired()
	return nil
}

// await waits for w's grant: a short spin, then park on w's own word. If
// ctx ends first the waiter leaves the queue, or gives back a grant that
// raced its departure.
func (s *Semaphore) await(ctx context.Context, w *semWaiter, t *noteTrack) error {
	for i := 0; i < semSpinIterations; i++ {
		if w.granted.Load() != 0 {
			putSemWaiter(w)
			return nil
		}
		procyield(semSpinPause)
	}
	for w.granted.Load() == 0 {
		note, since := t.sleeping()
		if err := wait.WaitNoted(ctx, &w.granted, 0, note, since); err != nil {
			if s.queue.leave(s, w) {
				putSemWaiter(w)
				return err
			}
			// Granted while we gave up: the permits are ours; give them
			// back so that the caller, told ctx.Err(), holds nothing.
			n := int64(w.n)
			putSemWaiter(w)
			s.Release(n)
			return err
		}
	}
	putSemWaiter(w)
	return nil
}

//go:noinline
func (s *Semaphore) releaseSlow(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("lockword: Release(%d) of Semaphore: negative weight", n))
	}
	if n == 0 {
		return
	}
	// Nobody queued (statistics on, or a CAS lost): add without the lock.
	for old := s.state.Load(); old&semQueued == 0; old = s.state.Load() {
		if old&semFreeMask+uint64(n) > uint64(s.capacity) {
			panicOverRelease(n, old, s.capacity)
		}
		if s.state.CompareAndSwap(old, old+uint64(n)) {
			return
		}
	}
	s.queue.release(s, uint64(n))
}

func panicOverRelease(n int64, old uint64, capacity uint32) {
	panic(fmt.Sprintf("lockword: Release of more permits than are held by Semaphore (Release(%d) with %d of %d free)",
		n, old&semFreeMask, capacity))
}
