package lockword

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"unsafe"
)

// MaxRingCapacity is the largest capacity NewRing accepts: 2^62 slots on
// 64-bit platforms, 2^30 on 32-bit ones (memory runs out long before).
const MaxRingCapacity = 1 << (bits.UintSize - 2)

// maxRingBytes bounds the memory NewRing and NewQueue allocate: 128 TiB, half of the
// 48-bit address space of today's 64-bit machines (the largest int on 32-bit
// ones). A larger make either panics (length out of range) or kills the
// process with a fatal out-of-memory error that no caller can recover from.
const maxRingBytes = min(1<<47, math.MaxInt)

// A Ring is a bounded, wait-free, single-producer single-consumer (SPSC)
// queue of T: a ring buffer of a power-of-two number of slots and two
// free-running indices, after Erik Rigtorp's SPSCQueue ("Optimizing a ring
// buffer for throughput", 2021). At most one goroutine at a time may push
// (the producer) and at most one at a time may pop (the consumer); they may
// run concurrently with each other. Use a buffered channel, or a Mutex, for
// several producers or consumers.
//
// The producer's index (tail) and the consumer's (head) lie on separate cache
// lines, each beside a cached copy of the other side's index, so that a side
// reads the other's line only when its copy says the ring is full (empty).
// Everything a side writes on every operation stays on its own line:
//
//	line       words                           written on every
//	producer   tail, headCache, notEmpty       push
//	consumer   head, tailCache, notFull        pop
//	shared     capacity, mask, slots header    never (read-only)
//
// TryPush and TryPop never wait: a bounded number of steps (wait-free),
// except that one which finds the other side asleep wakes it, which takes
// the parking lot's short internal lock. TryPushSlice and TryPopSlice move
// many items and publish the index once.
// Push, Pop, PushSlice and PopSlice block when the ring is full (empty):
// for a few microseconds they yield the processor and watch the other index
// in turn (yielding first, so that a peer waiting for our processor runs at
// once; spinning with the CPU's pause hint and backoff between yields), and
// only then sleep; the other side wakes them. A sleeper sets a bit in its wake word
// (notEmpty for the consumer, notFull for the producer) and looks at the
// other index once more; the other side stores its index and then reads the
// wake word, and wakes only if the bit is set. So no wake-up is lost, a side
// never sleeps while the other makes progress, and a busy ring makes no wake
// calls. See RingStats.
//
// Close ends the stream: blocked calls return, pushes fail with
// ErrRingClosed, and the consumer pops what remains before it gets
// ErrRingClosed.
//
// In the terminology of the Go memory model, a push of an item synchronizes
// before the pop that returns it, and a pop that frees a slot synchronizes
// before the push that reuses it.
//
// A Ring must be created with NewRing and must not be copied. The zero Ring
// has no slots: it is always full and always empty.
type Ring[T any] struct {
	_ noCopy
	spscIndex
	buf   []T         // the capacity slots (the allocation is padded at both ends)
	clear bool        // T holds pointers: zero popped slots so the GC can free what they held
	sl    ringSleeper // how the blocking calls sleep and wake
	_     [falseSharingRange]byte
}

// RingStats counts how often the blocking calls of a Ring slept and woke
// each other. A busy ring, where neither side waits for long, sleeps rarely
// and makes no wake calls.
type RingStats struct {
	// ProducerSleeps and ConsumerSleeps count the times Push or PushSlice
	// found the ring full (Pop or PopSlice found it empty) for longer than
	// the spin and went to sleep.
	ProducerSleeps, ConsumerSleeps uint64
	// Wakes counts wake-up calls, made by a side (or Close) that found
	// the other side asleep.
	Wakes uint64
}

// NewRing returns an empty Ring with room for capacity items. capacity must
// be a power of two from 1 to MaxRingCapacity; otherwise NewRing returns an
// error. The ring allocates capacity slots of T up front: it also returns an
// error, instead of letting make panic or the runtime die out of memory, when
// those slots would take more than maxRingBytes (128 TiB).
func NewRing[T any](capacity int) (*Ring[T], error) {
	if capacity < 1 || capacity > MaxRingCapacity || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("lockword: NewRing capacity %d: must be a power of two from 1 to %d (try %d)",
			capacity, MaxRingCapacity, ringRoundUp(capacity))
	}
	if err := checkSlotBytes[T]("NewRing", capacity); err != nil {
		return nil, err
	}
	r := &Ring[T]{sl: parkSleeper{}}
	r.init(uint64(capacity))
	r.buf = paddedSlice[T](capacity)
	r.clear = holdsPointers(reflect.TypeFor[T]())
	return r, nil
}

// ringRoundUp suggests a valid capacity near n.
func ringRoundUp(n int) int {
	if n <= 1 {
		return 1
	}
	if n >= MaxRingCapacity {
		return MaxRingCapacity
	}
	return 1 << bits.Len(uint(n-1))
}

// paddedSlice allocates n elements of T with about falseSharingRange bytes of
// unused elements before and after them, so that other objects in the heap
// do not share the first and last slots' cache lines.
func paddedSlice[T any](n int) []T {
	pad := slotPad[T]()
	return make([]T, n+2*pad)[pad : pad+n : pad+n]
}

// checkSlotBytes returns an error when paddedSlice[T](capacity) would take
// more than maxRingBytes, so that NewRing and NewQueue refuse a capacity
// whose slots cannot be allocated instead of letting make panic (length out
// of range) or the runtime die out of memory. fn names the caller.
func checkSlotBytes[T any](fn string, capacity int) error {
	var zero T
	if hi, lo := bits.Mul64(uint64(capacity+2*slotPad[T]()), uint64(unsafe.Sizeof(zero))); hi != 0 || lo > maxRingBytes {
		return fmt.Errorf("lockword: %s capacity %d of %d-byte slots: they would take more than %d bytes",
			fn, capacity, unsafe.Sizeof(zero), uint64(maxRingBytes))
	}
	return nil
}

// slotPad is the number of elements of T that span falseSharingRange bytes.
func slotPad[T any]() int {
	var zero T
	if size := int(unsafe.Sizeof(zero)); size > 0 {
		return (falseSharingRange + size - 1) / size
	}
	return 0
}

// Cap returns the number of slots.
func (r *Ring[T]) Cap() int { return int(r.capacity) }

// Len returns the number of items in the ring: exact when called by the
// producer or the consumer while the other side is idle, otherwise a
// snapshot that may be out of date by the time it returns.
func (r *Ring[T]) Len() int {
	h := r.head.Load()
	t := r.tail.Load()
	n := t - h
	if n > r.capacity { // h was loaded before a pop that t has seen
		return 0
	}
	return int(n)
}

// Stats returns counts of sleeps and wake-ups so far.
func (r *Ring[T]) Stats() RingStats {
	return RingStats{
		ProducerSleeps: r.producerWords.sleeps.Load(),
		ConsumerSleeps: r.consumerWords.sleeps.Load(),
		Wakes:          r.producerWords.wakes.Load() + r.consumerWords.wakes.Load(),
	}
}

// TryPush appends v to the ring, unless the ring is full or closed, and
// reports whether it did. It never waits. Only the producer may call it.
func (r *Ring[T]) TryPush(v T) bool {
	t := r.tail.Load()
	// Full by our cached view of head? Only then read the consumer's line.
	if t-r.headCache >= r.capacity && !r.refreshHead(t) {
		return false
	}
	if r.notEmpty.Load()&ringClosed != 0 {
		return false
	}
	r.buf[t&r.mask] = v
	// Publish: the slot write above happens before this store, and the
	// consumer's load of tail before its read of the slot.
	publishIndex(&r.tail, t+1)
	// Then look for a sleeping consumer (see spscIndex on why this
	// order cannot lose a wake-up).
	if r.notEmpty.Load()&ringSleeping != 0 {
		r.wakeConsumer()
	}
	return true
}

// TryPop removes and returns the oldest item, if there is one. It never
// waits. Only the consumer may call it. Items pushed before Close are still
// returned after it.
func (r *Ring[T]) TryPop() (v T, ok bool) {
	h := r.head.Load()
	if h == r.tailCache && !r.refreshTail(h) {
		return v, false
	}
	i := h & r.mask
	v = r.buf[i]
	if r.clear {
		var zero T
		r.buf[i] = zero
	}
	// Release the slot: our read above happens before the producer
	// reuses it.
	publishIndex(&r.head, h+1)
	if r.notFull.Load()&ringSleeping != 0 {
		r.wakeProducer()
	}
	return v, true
}

// refreshHead re-reads head and reports whether the ring has room.
//
//go:noinline
func (r *Ring[T]) refreshHead(t uint64) bool {
	r.headCache = r.head.Load()
	return t-r.headCache < r.capacity
}

// refreshTail re-reads tail and reports whether the ring has items.
//
//go:noinline
func (r *Ring[T]) refreshTail(h uint64) bool {
	r.tailCache = r.tail.Load()
	return r.tailCache != h
}

func (r *Ring[T]) wakeConsumer() { wakeSide(&r.notEmpty, &r.producerWords.wakes, r.sleeper()) }
func (r *Ring[T]) wakeProducer() { wakeSide(&r.notFull, &r.consumerWords.wakes, r.sleeper()) }

// sleeper returns how the blocking calls sleep; a zero Ring has none set.
func (r *Ring[T]) sleeper() ringSleeper {
	if r.sl == nil {
		return parkSleeper{}
	}
	return r.sl
}

// TryPushSlice appends as many leading items of src as fit, publishes them
// with one store of the index, and returns how many it appended: 0 if the
// ring is full or closed. It never waits. Only the producer may call it.
func (r *Ring[T]) TryPushSlice(src []T) int {
	if len(src) == 0 {
		return 0
	}
	t := r.tail.Load()
	room := r.capacity - (t - r.headCache)
	if room < uint64(len(src)) {
		r.headCache = r.head.Load()
		room = r.capacity - (t - r.headCache)
	}
	if room == 0 || r.notEmpty.Load()&ringClosed != 0 {
		return 0
	}
	n := min(room, uint64(len(src)))
	i := t & r.mask
	c := copy(r.buf[i:], src[:n]) // up to the end of the buffer
	copy(r.buf, src[c:n])         // the rest from its start
	publishIndex(&r.tail, t+n)
	if r.notEmpty.Load()&ringSleeping != 0 {
		r.wakeConsumer()
	}
	return int(n)
}

// TryPopSlice removes up to len(dst) of the oldest items into dst, releases
// their slots with one store of the index, and returns how many it removed.
// It never waits. Only the consumer may call it.
func (r *Ring[T]) TryPopSlice(dst []T) int {
	if len(dst) == 0 {
		return 0
	}
	h := r.head.Load()
	avail := r.tailCache - h
	if avail < uint64(len(dst)) {
		r.tailCache = r.tail.Load()
		avail = r.tailCache - h
	}
	if avail == 0 {
		return 0
	}
	n := min(avail, uint64(len(dst)))
	i := h & r.mask
	c := copy(dst[:n], r.buf[i:])
	copy(dst[c:n], r.buf)
	if r.clear {
		clear(r.buf[i : i+uint64(c)])
		clear(r.buf[:n-uint64(c)])
	}
	publishIndex(&r.head, h+n)
	if r.notFull.Load()&ringSleeping != 0 {
		r.wakeProducer()
	}
	return int(n)
}

// Push appends v to the ring, waiting while it is full. It returns nil once
// v is in the ring, ErrRingClosed (without pushing) if the ring is closed,
// or, if ctx ends first, ctx.Err() with v not pushed. If there is room, v is
// pushed even when ctx is already done. Only the producer may call it.
func (r *Ring[T]) Push(ctx context.Context, v T) error {
	if ctx != nil && r.TryPush(v) {
		return nil
	}
	return r.pushSlow(ctx, v)
}

//go:noinline
func (r *Ring[T]) pushSlow(ctx context.Context, v T) error {
	for {
		if err := r.waitRoom(ctx, r.sleeper()); err != nil {
			return err
		}
		if r.TryPush(v) {
			return nil
		}
	}
}

// Pop removes and returns the oldest item, waiting while the ring is empty.
// It returns ErrRingClosed once the ring is closed and every item pushed
// before Close has been popped, or, if ctx ends first, ctx.Err(). If an
// item is there, it is returned even when ctx is already done. Only the
// consumer may call it.
func (r *Ring[T]) Pop(ctx context.Context) (T, error) {
	if ctx != nil {
		if v, ok := r.TryPop(); ok {
			return v, nil
		}
	}
	return r.popSlow(ctx)
}

//go:noinline
func (r *Ring[T]) popSlow(ctx context.Context) (T, error) {
	for {
		if err := r.waitItems(ctx, r.sleeper()); err != nil {
			var zero T
			return zero, err
		}
		if v, ok := r.TryPop(); ok {
			return v, nil
		}
	}
}

// PushSlice appends all of src, waiting for room as needed, and publishes
// the index once for each run of items that fits at once. It returns how
// many items it pushed: len(src) with a nil error, or fewer with
// ErrRingClosed or ctx.Err(). Only the producer may call it.
func (r *Ring[T]) PushSlice(ctx context.Context, src []T) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	n := r.TryPushSlice(src)
	for n < len(src) {
		if err := r.waitRoom(ctx, r.sleeper()); err != nil {
			return n, err
		}
		n += r.TryPushSlice(src[n:])
	}
	return n, nil
}

// PopSlice waits until the ring holds at least one item, then removes up to
// len(dst) of the oldest items into dst, releasing their slots with one
// store of the index, and returns how many (as io.Reader does: n ≥ 1 with a
// nil error). It returns 0 and ErrRingClosed once the ring is closed and
// drained, or 0 and ctx.Err() if ctx ends first. A dst of length 0 returns
// 0, nil. Only the consumer may call it.
func (r *Ring[T]) PopSlice(ctx context.Context, dst []T) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	if len(dst) == 0 {
		return 0, nil
	}
	for {
		if n := r.TryPopSlice(dst); n > 0 {
			return n, nil
		}
		if err := r.waitItems(ctx, r.sleeper()); err != nil {
			return 0, err
		}
	}
}

// Close ends the stream. Afterwards pushes fail (TryPush returns false,
// Push returns ErrRingClosed), blocked calls on both sides return, and the
// consumer pops the items that remain and then gets ErrRingClosed. Items
// pushed before Close are never lost. Close may be called by either side or
// any other goroutine, more than once; but a push that overlaps a Close
// called by another goroutine may succeed and still not be popped (the
// consumer may already have seen the ring closed and empty), so for an exact
// end of stream the producer calls Close after its last push. A consumer
// that calls Close tells the producer to stop.
func (r *Ring[T]) Close() { r.closeRing(r.sleeper()) }

// Closed reports whether Close has been called: after TryPush returns
// false, it tells a closed ring from a full one.
func (r *Ring[T]) Closed() bool { return r.closed() }
