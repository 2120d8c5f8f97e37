// Package ringindex is the index and wake-up protocol of a
// single-producer, single-consumer ring, apart from what the slots hold:
// the in-process Ring[T] of package lockword and the byte ring that package
// shm shares between processes both use it. Its functions take the ring's
// words as arguments, and the one platform-specific step, sleeping and
// waking, is passed in as a Sleeper. The state table of the words is
// spscIndex's, in lockword's ringindex.go.
package ringindex

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"

	"github.com/lockword/lockword/internal/backoff"
)

// FalseSharingRange is the distance in bytes that keeps two fields from
// sharing a cache line: two 64-byte lines, because x86 cores prefetch lines
// in adjacent pairs and arm64 cores such as Apple's have 128-byte lines.
const FalseSharingRange = 128

// Bits of a ring's two wake words (spscIndex.notEmpty, spscIndex.notFull).
const (
	// Sleeping: the side that sleeps on this word is asleep, or about
	// to be; the other side must clear the bit and wake it.
	Sleeping = 1
	// Closed: Close was called. Set in both words, never cleared.
	Closed = 2
)

// Spin tuning for the blocking ring calls (and lockword's Queue), chosen by
// the ring benchmarks on the 2-core benchmark machine (one PAUSE about
// 20 ns; see BENCHMARKS.md). A side that finds the ring full (empty)
// alternates two ways of waiting, looking at the other side's index after
// each, and only then sleeps:
//
//   - yield the processor (runtime.Gosched): the other side may be
//     runnable on our own P, which is where a side that was just woken
//     lands, so spinning would only delay it;
//   - watch with the CPU's pause hint, SpinFirst pauses, then doubling up
//     to SpinPause (about 1.3 µs): the other side runs on another core,
//     and items (room) accumulate to be taken in a burst.
//
// Yielding comes first. Spinning first (the earlier order) made a pair of
// sides on one P, as happens on a loaded machine or after a wake-up, spin
// out their whole budget against a peer that could not run: batches of 64
// went 10-20 times slower than a channel of arrays at load 6-12, with 88%
// of CPU time in PAUSE.
const (
	SpinFirst = 16 // PAUSE hints before the first spinning look
	SpinPause = 64 // cap on PAUSE hints between looks
)

// The spin and yield budgets are variables only so that a test can turn
// them off and show that the sleep-rate check catches a ring that sleeps
// as soon as it finds the ring full or empty.
var (
	SpinIterations = 7 // spinning looks before sleeping
	YieldRounds    = 7 // runtime.Gosched calls before sleeping
	// YieldFirst false restores the earlier order (all spins, then the
	// yields), for the test that shows what yielding first saves.
	YieldFirst = true
)

// Spinner is the wait before sleeping of the rings and lockword's Queue: a
// budget of yields and pause-hint spins taken in turn, yield first (see
// SpinFirst).
type Spinner struct {
	hints         uint32 // pause hints of the next spin
	spins, yields int    // what is left of the budget
	look          int    // waits so far
}

// NewSpinner returns a Spinner with the full budget.
func NewSpinner() Spinner {
	return Spinner{hints: SpinFirst, spins: SpinIterations, yields: YieldRounds}
}

// Wait waits once, after a look at the other side that found it not ready,
// and reports false, without waiting, once the budget is spent: then the
// caller sleeps.
func (s *Spinner) Wait() bool {
	if s.spins+s.yields == 0 {
		return false
	}
	s.look++
	if s.look == 2 && runtime.GOMAXPROCS(0) == 1 {
		// One processor: the other side cannot run while we spin, so
		// only yield. (Asked only now, since it takes the scheduler's
		// lock, and most waits of a busy ring end at the first or
		// second look.)
		s.spins = 0
	}
	if s.yields > 0 && (s.spins == 0 || YieldFirst && s.look%2 == 1) {
		// The other side may be waiting for our processor.
		runtime.Gosched()
		s.yields--
	} else {
		// The other side is probably running: watch it without
		// sleeping, letting items (or room) accumulate.
		backoff.Pause(s.hints)
		s.hints = min(2*s.hints, SpinPause)
		s.spins--
	}
	return true
}

// ErrClosed is lockword.ErrRingClosed: what Await returns once the ring
// is closed.
var ErrClosed = errors.New("lockword: ring closed")

// Sleeper is how one side of a ring sleeps on its wake word and how the
// other side wakes it. In-process rings park goroutines (parkSleeper); a ring
// shared between processes sleeps on the kernel futex (wait.Shared) in
// bounded slices (sharedRingSleeper).
type Sleeper interface {
	// Sleep waits while *word == val; it may return early (the caller
	// loops). It returns a non-nil error only when the wait must end
	// without a wake-up: ctx ended, or (shared rings) the other side's
	// process died.
	Sleep(ctx context.Context, word *atomic.Uint32, val uint32) error
	// Wake wakes the sleeper of word, if any.
	Wake(word *atomic.Uint32)
}

// A ManySleeper is a Sleeper on some of whose words more than one waiter
// may sleep at once (the shared MPSC queue's producers on notFull), which
// ManySleepers reports. On such a word the Sleeping bit may be another
// waiter's announcement too, so a waiter that stops waiting (ready after
// announcing, or giving up) leaves it set: clearing it made the other
// side's next release wake nobody, and a sleeper missed its wake-up for
// the rest of its slice. The cost is one wake-up call for nobody.
type ManySleeper interface {
	Sleeper
	ManySleepers(word *atomic.Uint32) bool
}

// WakeSide clears Sleeping in word and, if it was set, wakes the sleeper.
// Callers have already seen the bit set with a plain load, so a busy ring
// pays one load per publish and nothing more.
//
//go:noinline
func WakeSide(word *atomic.Uint32, wakes *atomic.Uint64, sl Sleeper) {
	// Clear first: a sleeper that wakes and looks again must not see a
	// stale bit, and of two wakers (a side and Close) only one wakes.
	if word.And(^uint32(Sleeping))&Sleeping != 0 {
		wakes.Add(1)
		sl.Wake(word)
	}
}

// CloseWords sets Closed in a ring's two wake words and wakes
// whoever sleeps on them, counting the wake-ups in wakes.
func CloseWords(notEmpty, notFull *atomic.Uint32, wakes *atomic.Uint64, sl Sleeper) {
	for _, w := range [...]*atomic.Uint32{notEmpty, notFull} {
		if w.Or(Closed)&Sleeping != 0 {
			WakeSide(w, wakes, sl)
		}
	}
}

// Await waits until ready reports true: it yields and spins in turn
// (Spinner), then sleeps on word. ready looks at the other side's index. A
// closed ring ends the wait with ErrClosed: at once if closedFirst (the
// producer), else only when ready fails (the consumer, which drains first).
// The closed bit is always read before ready is called, so a consumer that
// sees the ring closed also sees every item published before Close. Any
// other error comes from sl.sleep (a context, or a shared ring's dead peer),
// and is returned with the sleep announcement withdrawn (left, on a word
// with many sleepers: see ManySleeper). It serves both the
// in-process Ring and the shared byte ring (package shm). ctx must not
// be nil: callers check it, to return their own ErrNilContext.
func Await(ctx context.Context, word *atomic.Uint32, sleeps *atomic.Uint64, sl Sleeper,
	closedFirst bool, ready func() bool) error {
	sp := NewSpinner()
	for {
		closed := word.Load()&Closed != 0
		if closed && closedFirst {
			return ErrClosed
		}
		if ready() {
			return nil
		}
		if closed {
			return ErrClosed
		}
		if !sp.Wait() {
			break
		}
	}
	// withdraw takes back our announcement, where it is ours alone.
	withdraw := func() {}
	if m, ok := sl.(ManySleeper); !ok || !m.ManySleepers(word) {
		withdraw = func() { word.And(^uint32(Sleeping)) }
	}
	for {
		// Announce the sleep, then look again (the Dekker pair with
		// the other side's store-index-then-load-word).
		old := word.Or(Sleeping)
		if old&Closed != 0 && closedFirst {
			withdraw()
			return ErrClosed
		}
		if ready() {
			withdraw()
			return nil
		}
		if old&Closed != 0 {
			withdraw()
			return ErrClosed
		}
		sleeps.Add(1)
		if err := sl.Sleep(ctx, word, Sleeping); err != nil {
			// Not woken (or woken and giving up anyway), so no
			// wake-up of ours is lost; withdraw the announcement (a
			// waker racing with us wakes nobody).
			withdraw()
			return err
		}
	}
}

// Publish stores a side's index before that side loads the other's
// wake word: the store-then-load half of the Dekker pair that keeps
// wake-ups from being lost, which needs the store ordered before the load.
// Go's atomic Store is sequentially consistent and gives that, but under
// the race detector Store is only a release store and Load an acquire load
// (ThreadSanitizer's Go interface), which lets the load pass the store
// (TestSharedRingNoLostWakeups caught a consumer asleep for its whole
// slice). A swap is a read-modify-write, ordered in both builds; on amd64
// it is the same XCHG instruction that Store compiles to.
func Publish(w *atomic.Uint64, v uint64) { w.Swap(v) }
