package lockword

import (
	"context"
	"sync/atomic"

	"github.com/lockword/lockword/internal/ringindex"
	"github.com/lockword/lockword/internal/wait"
)

// This file holds the index and wake-up protocol of a single-producer,
// single-consumer ring, apart from what the slots hold. Ring[T] puts Go
// values in the slots of an spscIndex. The byte ring shared between
// processes (package shm) keeps the same words in a region instead, and
// reuses the protocol's functions (internal/ringindex: Await, WakeSide,
// CloseWords): they take the words as arguments, and the one
// platform-specific step, sleeping and waking, is passed in as a
// ringSleeper. It does not overlay spscIndex on
// the mapping, because capacity and mask must come from the Go handle, never
// from memory that another process can write.

// ErrRingClosed is returned by the blocking calls of a Ring once it has
// been closed: by Push and PushSlice at once, by Pop and PopSlice when
// every item pushed before Close has been popped.
var ErrRingClosed = ringindex.ErrClosed

// The protocol's words, bits and functions are package ringindex's, which
// the byte ring of package shm shares; these names keep this package's
// spelling of them.
const (
	falseSharingRange = ringindex.FalseSharingRange
	ringSleeping      = ringindex.Sleeping
	ringClosed        = ringindex.Closed
)

// ringSleeper is how one side of a ring sleeps on its wake word and how the
// other side wakes it (ringindex.Sleeper). In-process rings park goroutines
// (parkSleeper); a ring shared between processes sleeps on the kernel
// futex in bounded slices (package shm).
type ringSleeper = ringindex.Sleeper

// wakeSide clears ringSleeping in word and, if it was set, wakes the
// sleeper (ringindex.WakeSide).
func wakeSide(word *atomic.Uint32, wakes *atomic.Uint64, sl ringSleeper) {
	ringindex.WakeSide(word, wakes, sl)
}

// publishIndex stores a side's index, ordered before the side's next load
// of the other's wake word (ringindex.Publish).
func publishIndex(w *atomic.Uint64, v uint64) { ringindex.Publish(w, v) }

// ringAwait is ringindex.Await for a Ring, which reports a nil ctx as
// ErrNilContext.
func ringAwait(ctx context.Context, word *atomic.Uint32, sleeps *atomic.Uint64, sl ringSleeper,
	closedFirst bool, ready func() bool) error {
	if ctx == nil {
		return ErrNilContext
	}
	return ringindex.Await(ctx, word, sleeps, sl, closedFirst, ready)
}

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

// parkSleeper parks goroutines (internal/wait): for rings in the Go heap.
type parkSleeper struct{}

func (parkSleeper) Sleep(ctx context.Context, word *atomic.Uint32, val uint32) error {
	return wait.Wait(ctx, word, val)
}

func (parkSleeper) Wake(word *atomic.Uint32) { wait.Wake(word, 1) }

// init sets the capacity, which must be a power of two.
func (x *spscIndex) init(capacity uint64) {
	x.capacity = capacity
	x.mask = capacity - 1
}

// closeRing sets ringClosed in both wake words and wakes whoever sleeps.
func (x *spscIndex) closeRing(sl ringSleeper) {
	ringindex.CloseWords(&x.notEmpty, &x.notFull, &x.producerWords.wakes, sl)
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
