package lockword

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// This file holds the index and wake-up protocol of a single-producer,
// single-consumer ring, apart from what the slots hold. Ring[T] puts Go
// values in the slots of an spscIndex. The byte ring shared between
// processes (sharedring.go) keeps the same words in a region instead, and
// reuses the protocol's functions (ringAwait, wakeSide, closeRingWords): they
// take the words as arguments, and the one platform-specific step, sleeping
// and waking, is passed in as a ringSleeper. It does not overlay spscIndex on
// the mapping, because capacity and mask must come from the Go handle, never
// from memory that another process can write.

// falseSharingRange is the distance in bytes that keeps two fields from
// sharing a cache line: two 64-byte lines, because x86 cores prefetch lines
// in adjacent pairs and arm64 cores such as Apple's have 128-byte lines.
const falseSharingRange = 128

// Bits of a ring's two wake words (spscIndex.notEmpty, spscIndex.notFull).
const (
	// ringSleeping: the side that sleeps on this word is asleep, or about
	// to be; the other side must clear the bit and wake it.
	ringSleeping = 1
	// ringClosed: Close was called. Set in both words, never cleared.
	ringClosed = 2
)

// Spin tuning for the blocking ring calls, chosen by the ring benchmarks on
// the 2-core benchmark machine (one PAUSE about 20 ns; see BENCHMARKS.md).
// A side that finds the ring full (empty) alternates two ways of waiting,
// looking at the other side's index after each, and only then sleeps:
//
//   - yield the processor (runtime.Gosched): the other side may be
//     runnable on our own P, which is where a side that was just woken
//     lands, so spinning would only delay it;
//   - watch with the CPU's pause hint, ringSpinFirst pauses, then doubling
//     up to ringSpinPause (about 1.3 µs): the other side runs on another
//     core, and items (room) accumulate to be taken in a burst.
//
// Yielding comes first. Spinning first (the earlier order) made a pair of
// sides on one P, as happens on a loaded machine or after a wake-up, spin
// out their whole budget against a peer that could not run: batches of 64
// went 10-20 times slower than a channel of arrays at load 6-12, with 88%
// of CPU time in PAUSE.
const (
	ringSpinFirst = 16 // PAUSE hints before the first spinning look
	ringSpinPause = 64 // cap on PAUSE hints between looks
)

// The spin and yield budgets are variables only so that a test can turn
// them off and show that the sleep-rate check catches a ring that sleeps
// as soon as it finds the ring full or empty.
var (
	ringSpinIterations = 7 // spinning looks before sleeping
	ringYieldRounds    = 7 // runtime.Gosched calls before sleeping
	// ringYieldFirst false restores the earlier order (all spins, then
	// the yields), for the test that shows what yielding first saves.
	ringYieldFirst = true
)

// spinner is the wait before sleeping of the rings and Queue: a budget of
// yields and pause-hint spins taken in turn, yield first (see ringSpinFirst).
type spinner struct {
	backoff       uint32 // pause hints of the next spin
	spins, yields int    // what is left of the budget
	look          int    // waits so far
}

func newSpinner() spinner {
	return spinner{backoff: ringSpinFirst, spins: ringSpinIterations, yields: ringYieldRounds}
}

// wait waits once, after a look at the other side that found it not ready,
// and reports false, without waiting, once the budget is spent: then the
// caller sleeps.
func (s *spinner) wait() bool {
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
	if s.yields > 0 && (s.spins == 0 || ringYieldFirst && s.look%2 == 1) {
		// The other side may be waiting for our processor.
		runtime.Gosched()
		s.yields--
	} else {
		// The other side is probably running: watch it without
		// sleeping, letting items (or room) accumulate.
		procyield(s.backoff)
		s.backoff = min(2*s.backoff, ringSpinPause)
		s.spins--
	}
	return true
}

// ErrRingClosed is returned by the blocking calls of a Ring once it has
// been closed: by Push and PushSlice at once, by Pop and PopSlice when
// every item pushed before Close has been popped.
var ErrRingClosed = errors.New("lockword: ring closed")

// producerWords are the words the producer writes on every push.
type producerWords struct {
	tail      atomic.Uint64 // next position to write; positions below it are published
	headCache uint64        // the producer's last view of head (producer-only)
	// notEmpty is the consumer's wake word: the consumer sleeps on it,
	// the producer reads it after every publish. It sits on the
	// producer's line because the producer reads it all the time and the
	// consumer writes it only when it goes to sleep.
	notEmpty atomic.Uint32
	sleeps   atomic.Uint64 // times the producer slept on a full ring
	wakes    atomic.Uint64 // wake-ups the producer (or Close) sent
}

// consumerWords are the words the consumer writes on every pop.
type consumerWords struct {
	head      atomic.Uint64 // next position to read; positions below it are free
	tailCache uint64        // the consumer's last view of tail (consumer-only)
	notFull   atomic.Uint32 // the producer's wake word (see notEmpty)
	sleeps    atomic.Uint64 // times the consumer slept on an empty ring
	wakes     atomic.Uint64 // wake-ups the consumer sent
}

// spscIndex is the state of an SPSC ring apart from its slots: the design of
// Erik Rigtorp's SPSCQueue ("Optimizing a ring buffer for throughput", 2021),
// with a wake-up protocol added for blocking calls. Positions are free-running
// 64-bit counters of slots (or, for a byte ring, of bytes): the slot of
// position p is p mod capacity, the ring holds tail-head items, and all
// arithmetic is modulo 2^64, so the counters may wrap.
//
//	word       written by                  read by
//	tail       producer, once per publish  consumer, when its cache runs out
//	head       consumer, once per release  producer, when its cache runs out
//	headCache  producer only               producer only
//	tailCache  consumer only               consumer only
//	notEmpty   consumer going to sleep,    producer after each publish
//	           producer waking it, Close
//	notFull    producer going to sleep,    consumer after each release
//	           consumer waking it, Close
//
// Wake words: bit 0 (ringSleeping) the waiting side is asleep or about to
// be; bit 1 (ringClosed) the ring is closed. All zero is an open ring with
// nobody asleep.
//
// No lost wake-up: a side that would sleep sets ringSleeping in its wake
// word and then looks at the other index again; the other side stores its
// index and then looks at the wake word. Go's atomics are sequentially
// consistent, so at least one of them sees the other's store: either the
// sleeper sees the new index and does not sleep, or the other side sees the
// bit, clears it and wakes. The sleep itself compares the word under the
// waiting layer's queue lock, so a wake between the look and the sleep is
// not lost either. A side wakes the other only if the bit is set, so a busy
// ring makes no wake calls.
//
// Each side's words lie on their own cache lines (falseSharingRange), so
// the producer's stores never invalidate the consumer's line and vice
// versa, except to hand over an index when a cached copy runs out.
type spscIndex struct {
	_ [falseSharingRange]byte // keep neighbours in the heap off the producer's line
	producerWords
	_ [falseSharingRange]byte
	consumerWords
	_ [falseSharingRange]byte

	// Read-mostly: set at construction.
	capacity uint64 // a power of two; 0 for a zero Ring (always full and empty)
	mask     uint64 // capacity-1
}

// ringSleeper is how one side of a ring sleeps on its wake word and how the
// other side wakes it. In-process rings park goroutines (parkSleeper); a ring
// shared between processes sleeps on the kernel futex (wait.Shared) in
// bounded slices (sharedRingSleeper).
type ringSleeper interface {
	// sleep waits while *word == val; it may return early (the caller
	// loops). It returns a non-nil error only when the wait must end
	// without a wake-up: ctx ended, or (shared rings) the other side's
	// process died.
	sleep(ctx context.Context, word *atomic.Uint32, val uint32) error
	// wake wakes the sleeper of word, if any.
	wake(word *atomic.Uint32)
}

// parkSleeper parks goroutines (internal/wait): for rings in the Go heap.
type parkSleeper struct{}

func (parkSleeper) sleep(ctx context.Context, word *atomic.Uint32, val uint32) error {
	return wait.Wait(ctx, word, val)
}

func (parkSleeper) wake(word *atomic.Uint32) { wait.Wake(word, 1) }

// init sets the capacity, which must be a power of two.
func (x *spscIndex) init(capacity uint64) {
	x.capacity = capacity
	x.mask = capacity - 1
}

// wake clears ringSleeping in word and, if it was set, wakes the sleeper.
// Callers have already seen the bit set with a plain load, so a busy ring
// pays one load per publish and nothing more.
//
//go:noinline
func wakeSide(word *atomic.Uint32, wakes *atomic.Uint64, sl ringSleeper) {
	// Clear first: a sleeper that wakes and looks again must not see a
	// stale bit, and of two wakers (a side and Close) only one wakes.
	if word.And(^uint32(ringSleeping))&ringSleeping != 0 {
		wakes.Add(1)
		sl.wake(word)
	}
}

// closeRing sets ringClosed in both wake words and wakes whoever sleeps.
func (x *spscIndex) closeRing(sl ringSleeper) {
	closeRingWords(&x.notEmpty, &x.notFull, &x.producerWords.wakes, sl)
}

// closeRingWords sets ringClosed in a ring's two wake words and wakes
// whoever sleeps on them, counting the wake-ups in wakes.
func closeRingWords(notEmpty, notFull *atomic.Uint32, wakes *atomic.Uint64, sl ringSleeper) {
	for _, w := range [...]*atomic.Uint32{notEmpty, notFull} {
		if w.Or(ringClosed)&ringSleeping != 0 {
			wakeSide(w, wakes, sl)
		}
	}
}

// closed reports whether Close was called, from the producer's line.
func (x *spscIndex) closed() bool { return x.notEmpty.Load()&ringClosed != 0 }

// waitRoom is the producer's slow path: it returns nil once at least one
// slot is free, ErrRingClosed once the ring is closed (room or not), or
// ctx's error.
func (x *spscIndex) waitRoom(ctx context.Context, sl ringSleeper) error {
	t := x.tail.Load()
	return ringAwait(ctx, &x.notFull, &x.producerWords.sleeps, sl, true, func() bool {
		x.headCache = x.head.Load()
		return t-x.headCache < x.capacity
	})
}

// waitItems is the consumer's slow path: it returns nil once at least one
// item is published, ErrRingClosed once the ring is closed and drained, or
// ctx's error.
func (x *spscIndex) waitItems(ctx context.Context, sl ringSleeper) error {
	h := x.head.Load()
	return ringAwait(ctx, &x.notEmpty, &x.consumerWords.sleeps, sl, false, func() bool {
		x.tailCache = x.tail.Load()
		return x.tailCache != h
	})
}

// ringAwait waits until ready reports true: it yields and spins in turn
// (see ringSpinFirst), then sleeps on word. ready looks at the other side's
// index. A closed ring ends the wait with ErrRingClosed: at once if closedFirst (the
// producer), else only when ready fails (the consumer, which drains first).
// The closed bit is always read before ready is called, so a consumer that
// sees the ring closed also sees every item published before Close. Any
// other error comes from sl.sleep (a context, or a shared ring's dead peer),
// and is returned with the sleep announcement withdrawn. It serves both the
// in-process Ring and the shared byte ring (sharedring.go).
func ringAwait(ctx context.Context, word *atomic.Uint32, sleeps *atomic.Uint64, sl ringSleeper,
	closedFirst bool, ready func() bool) error {
	if ctx == nil {
		return ErrNilContext
	}
	sp := newSpinner()
	for {
		closed := word.Load()&ringClosed != 0
		if closed && closedFirst {
			return ErrRingClosed
		}
		if ready() {
			return nil
		}
		if closed {
			return ErrRingClosed
		}
		if !sp.wait() {
			break
		}
	}
	for {
		// Announce the sleep, then look again (the Dekker pair with
		// the other side's store-index-then-load-word).
		old := word.Or(ringSleeping)
		if old&ringClosed != 0 && closedFirst {
			word.And(^uint32(ringSleeping))
			return ErrRingClosed
		}
		if ready() {
			word.And(^uint32(ringSleeping))
			return nil
		}
		if old&ringClosed != 0 {
			word.And(^uint32(ringSleeping))
			return ErrRingClosed
		}
		sleeps.Add(1)
		if err := sl.sleep(ctx, word, ringSleeping); err != nil {
			// Not woken (or woken and giving up anyway: there is only
			// one sleeper per word), so no wake-up is lost; withdraw
			// the announcement (a waker racing with us wakes nobody).
			word.And(^uint32(ringSleeping))
			return err
		}
	}
}

// publishIndex stores a side's index before that side loads the other's
// wake word: the store-then-load half of the Dekker pair that keeps
// wake-ups from being lost, which needs the store ordered before the load.
// Go's atomic Store is sequentially consistent and gives that, but under
// the race detector Store is only a release store and Load an acquire load
// (ThreadSanitizer's Go interface), which lets the load pass the store
// (TestSharedRingNoLostWakeups caught a consumer asleep for its whole
// slice). A swap is a read-modify-write, ordered in both builds; on amd64
// it is the same XCHG instruction that Store compiles to.
func publishIndex(w *atomic.Uint64, v uint64) { w.Swap(v) }
