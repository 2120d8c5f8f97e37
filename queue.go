package lockword

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// ErrQueueClosed is returned by the blocking calls of a Queue once it has
// been closed: by Push and PushSlice at once, by Pop and PopSlice when every
// item pushed before Close has been popped. It is not ErrRingClosed, so
// that a log line names the type that was closed.
var ErrQueueClosed = errors.New("lockword: queue closed")

// queueClosed is the bit of Queue.tail that Close sets. Positions count up
// from 0 below it (2^63 items: centuries at a billion a second).
const queueClosed = 1 << 63

// A Queue is a bounded, multi-producer multi-consumer (MPMC) FIFO queue of
// T: Dmitry Vyukov's bounded MPMC queue ("Bounded MPMC queue", 1024cores.net,
// 2010), a ring of slots, each with its own sequence number, and two
// free-running positions. Any number of goroutines may push and pop
// concurrently. For one producer and one consumer, Ring is faster.
//
// A producer claims position t = tail with a CAS of tail from t to t+1 and
// then owns slot t mod capacity until it publishes the item by storing the
// slot's sequence; a consumer claims position h = head the same way. The
// sequence of the slot of position p says who may move it next:
//
//	seq           state of the slot           who moves it, to what
//	p             free for the push of p      its producer, after the CAS of
//	                                          tail: writes the item, seq = p+1
//	p+1           holds the item of p         its consumer, after the CAS of
//	                                          head: reads it, seq = p+capacity
//	p+capacity    free for the push of        (the next lap's p)
//	              p+capacity
//
// So producers contend only on tail, consumers only on head, and a producer
// and a consumer meet only at a slot, never at a shared lock; each slot has
// 128 bytes of its own (two cache lines, aligned), so they do not meet at
// the next slot's lines either. Vyukov's
// design was chosen over a linked queue (Michael & Scott) because it is
// bounded and allocates nothing per item, and over a ring of two indices
// with a lock because a claim is one CAS; its one cost is that a producer
// descheduled between its claim and its publish holds up consumers of that
// slot (they see it not yet full), so the queue is not lock-free in the
// strict sense. The batched calls claim a run of consecutive slots with one
// CAS.
//
// Close sets a bit in tail itself, so every claim of a producer falls either
// before Close (its CAS saw no bit, and the item is counted in tail and
// will be popped) or after it (its CAS fails): items whose push returned
// true are never lost, however pushes and Close overlap, and consumers get
// ErrQueueClosed only once head has reached the final tail.
//
// TryPush and TryPop never wait for another goroutine's progress other than
// through failed CASes; TryPop reports false when the oldest claimed slot
// is not yet published. Push and Pop, when their CAS loses the position to
// another goroutine of the same side, yield the processor before they look
// again: with more goroutines than processors, retrying at once only
// fights the winner for tail's (head's) cache line, while the goroutine it
// waits for may be one that this processor would run (1.1-1.5x the
// throughput of retrying at once at 4-64 producers, 1 and 4 consumers, on
// 2 cores; see BENCHMARKS.md). Push, Pop, PushSlice and PopSlice wait when the
// queue is full (empty): they yield and spin briefly, as the Ring's do, then
// park on a wake word (internal/wait), using no CPU while idle. A side that
// frees a slot (publishes an item) wakes one parked producer (consumer) per
// slot, but only if one is announced and not already woken, so a busy queue
// makes no wake calls and a sleep costs one wake call (QueueStats counts
// both). The announcement, a count of parked goroutines, and the
// slot's sequence form a Dekker pair, as in Ring, so no wake-up is lost.
//
// In the terminology of the Go memory model, a push of an item synchronizes
// before the pop that returns it, and a pop that frees a slot synchronizes
// before the push that reuses it. A producer's items reach any one consumer
// in the order they were pushed (positions are claimed in order, and each
// consumer claims increasing positions).
//
// A Queue must be created with NewQueue and must not be copied: it is a
// ring of slots allocated up front, so its zero value could hold nothing;
// pushing to or popping from one panics with a message saying so.
type Queue[T any] struct {
	_    noCopy
	_    [falseSharingRange]byte
	tail atomic.Uint64 // next position a push claims; queueClosed once closed
	_    [falseSharingRange - 8]byte
	head atomic.Uint64 // next position a pop claims
	_    [falseSharingRange - 8]byte
	// pushers are the producers parked on a full queue; consumers read
	// pushers.state after each release. poppers likewise.
	pushers queueWaiters
	_       [falseSharingRange]byte
	poppers queueWaiters
	_       [falseSharingRange]byte

	// Read-only after NewQueue.
	slots  unsafe.Pointer // slot 0 (see newQueueSlots); nil in a zero Queue
	stride uintptr        // bytes from one slot to the next, a multiple of queueSlotAlign
	mask   uint64         // capacity-1
	clear  bool           // T holds pointers: zero popped slots so the GC can free what they held

	// closed is set by Close after tail's closed bit, for waiting
	// consumers (hasItems): it shares the read-only fields' line, written
	// once, where tail's line is written by every push.
	closed atomic.Bool
}

// QueueStats counts how often the blocking calls of a Queue parked and were
// woken. A busy queue, where nobody waits for long, parks rarely and makes
// no wake calls.
type QueueStats struct {
	// PushSleeps and PopSleeps count the times Push or PushSlice found
	// the queue full (Pop or PopSlice found it empty) for longer than the
	// spin and went to park (a call whose context had already ended
	// counts too: it got that far before the wait returned).
	PushSleeps, PopSleeps uint64
	// Wakes counts wake-up calls: those made by a side that found
	// goroutines of the other side announced as parked, and the two
	// that Close makes (one per side, whether or not anybody waits).
	Wakes uint64
}

// NewQueue returns an empty Queue with room for capacity items. capacity
// must be a power of two from 2 to MaxRingCapacity (Vyukov's sequences need
// two slots to tell "full" from "free for the next lap"); otherwise NewQueue
// returns an error. The queue allocates capacity slots up front, each the
// item and its 8-byte sequence rounded up to a multiple of 128 bytes (128
// for items up to 120 bytes: a pad against false sharing, see Queue), and
// two more as guards; the allocator rounds the block up (136 KiB for 1024
// slots of 128 bytes). It also returns an error, instead of letting the
// allocation panic or the runtime die out of memory, when those slots would
// take more than 128 TiB (2 GiB on 32-bit platforms). Below that bound
// the slots are allocated at once: a capacity the machine cannot hold
// (1<<39 slots of 128 bytes, 64 TiB, say) ends the process with a fatal
// runtime error,
// "out of memory" ("too many address space collisions for -race mode"
// under the race detector), which no recover catches. Size the queue for
// the memory you have.
func NewQueue[T any](capacity int) (*Queue[T], error) {
	if capacity < 2 || capacity > MaxRingCapacity || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("lockword: NewQueue capacity %d: must be a power of two from 2 to %d (try %d)",
			capacity, MaxRingCapacity, max(2, ringRoundUp(capacity)))
	}
	stride := queueSlotStride[T]()
	if hi, lo := bits.Mul64(uint64(capacity+queueGuardSlots), uint64(stride)); hi != 0 || lo > maxRingBytes {
		return nil, fmt.Errorf("lockword: NewQueue capacity %d of %d-byte slots: they would take more than %d bytes",
			capacity, stride, uint64(maxRingBytes))
	}
	q := &Queue[T]{mask: uint64(capacity - 1)}
	q.slots, q.stride = newQueueSlots[T](capacity)
	for i := range uint64(capacity) {
		q.slot(i).seq.Store(i) // free for the push of position i
	}
	q.clear = holdsPointers(reflect.TypeFor[T]())
	return q, nil
}

// queueNotMade panics for a Queue used without NewQueue: its zero value
// has no slots (kept out of line, so the check costs the hot paths a
// compare).
//
//go:noinline
func queueNotMade() {
	panic("lockword: Queue used without NewQueue (the zero Queue has no slots)")
}

// Cap returns the number of slots.
func (q *Queue[T]) Cap() int {
	if q.slots == nil {
		return 0
	}
	return int(q.mask + 1)
}

// Len returns the number of items pushed and not yet popped (claims in
// progress included): a snapshot that may be out of date when it returns.
func (q *Queue[T]) Len() int {
	h := q.head.Load()
	t := q.tail.Load() &^ queueClosed
	if h >= t {
		return 0
	}
	return int(t - h)
}

// Stats returns counts of sleeps and wake-ups so far.
func (q *Queue[T]) Stats() QueueStats {
	return QueueStats{
		PushSleeps: q.pushers.sleeps.Load(),
		PopSleeps:  q.poppers.sleeps.Load(),
		Wakes:      q.pushers.wakes.Load() + q.poppers.wakes.Load(),
	}
}

// Closed reports whether Close has been called: after TryPush returns
// false, it tells a closed queue from a full one.
func (q *Queue[T]) Closed() bool { return q.tail.Load()&queueClosed != 0 }

// TryPush appends v to the queue, unless it is full or closed, and reports
// whether it did. It never parks.
func (q *Queue[T]) TryPush(v T) bool {
	for {
		switch q.pushOnce(v) {
		case queueDone:
			return true
		case queueRefused:
			return false
		}
		// Another producer claimed the position first: look again.
	}
}

// The outcomes of one attempt to claim a position (pushOnce, popOnce).
const (
	queueDone    = iota // claimed and moved the item
	queueRefused        // full (empty) or closed: waiting may help
	queueLost           // another goroutine of the same side claimed it first
)

// pushOnce makes one attempt to push v: one look at tail and its slot and,
// if the slot is free, one CAS. A lost CAS is reported, not retried, so
// that Push can yield the processor to the goroutine that won (or to a
// consumer) before it retries, as a goroutine of the other side usually
// waits for exactly that; retrying at once only fights for the tail's
// cache line with the winner.
func (q *Queue[T]) pushOnce(v T) int {
	if q.slots == nil {
		queueNotMade()
	}
	t := q.tail.Load()
	if t&queueClosed != 0 {
		return queueRefused
	}
	s := q.slot(t)
	switch d := int64(s.seq.Load() - t); {
	case d == 0: // free for position t: claim it
		if !q.tail.CompareAndSwap(t, t+1) {
			return queueLost
		}
		s.v = v
		// Publish: the item is written before the sequence says so,
		// and the consumer loads the sequence before it reads the
		// item. Then look for parked consumers (the Dekker pair: see
		// publishIndex).
		s.seq.Swap(t + 1)
		q.wakePoppers(1)
		return queueDone
	case d < 0: // still holds the item of position t-capacity: full
		return queueRefused
	}
	return queueLost // another producer claimed t since the load
}

// TryPop removes and returns the oldest item, if there is one. It never
// parks. It reports false when the queue is empty, and also when the oldest
// item's producer has claimed its slot and not yet written it. Items pushed
// before Close are still returned after it.
func (q *Queue[T]) TryPop() (v T, ok bool) {
	for {
		switch v, r := q.popOnce(); r {
		case queueDone:
			return v, true
		case queueRefused:
			return v, false
		}
		// Another consumer claimed the position first: look again.
	}
}

// popOnce makes one attempt to pop an item, as pushOnce does to push one.
func (q *Queue[T]) popOnce() (v T, r int) {
	if q.slots == nil {
		queueNotMade()
	}
	h := q.head.Load()
	s := q.slot(h)
	switch d := int64(s.seq.Load() - (h + 1)); {
	case d == 0: // holds the item of position h: claim it
		if !q.head.CompareAndSwap(h, h+1) {
			return v, queueLost
		}
		v = s.v
		if q.clear {
			var zero T
			s.v = zero
		}
		// Free the slot for the next lap's producer; our read above
		// happens before its write.
		s.seq.Swap(h + q.mask + 1)
		q.pushers.wake(1)
		return v, queueDone
	case d < 0: // not yet published: empty (or a push in progress)
		return v, queueRefused
	}
	return v, queueLost // another consumer claimed h since the load
}

// TryPushSlice appends as many leading items of src as there are free
// slots, claiming them with one CAS, and returns how many it appended: 0
// if the queue is full or closed. It never parks.
func (q *Queue[T]) TryPushSlice(src []T) int {
	if q.slots == nil {
		queueNotMade()
	}
	t := q.tail.Load()
	for len(src) > 0 && t&queueClosed == 0 {
		// Count the free slots from t on: each must be free for its own
		// position, since consumers free slots out of order.
		n := uint64(0)
		for n < uint64(len(src)) && q.slot(t+n).seq.Load() == t+n {
			n++
		}
		if n == 0 && int64(q.slot(t).seq.Load()-t) < 0 {
			return 0 // full
		}
		if n > 0 && q.tail.CompareAndSwap(t, t+n) {
			// The slots stay free until we publish them: only the
			// producer of their position may move them.
			for i := range n {
				s := q.slot(t + i)
				s.v = src[i]
				s.seq.Swap(t + i + 1)
			}
			q.wakePoppers(int(n))
			return int(n)
		}
		t = q.tail.Load()
	}
	return 0
}

// TryPopSlice removes up to len(dst) of the oldest items into dst, claiming
// them with one CAS, and returns how many it removed: those published in a
// run from the oldest on. It never parks.
func (q *Queue[T]) TryPopSlice(dst []T) int {
	if q.slots == nil {
		queueNotMade()
	}
	h := q.head.Load()
	for len(dst) > 0 {
		n := uint64(0)
		for n < uint64(len(dst)) && q.slot(h+n).seq.Load() == h+n+1 {
			n++
		}
		if n == 0 && int64(q.slot(h).seq.Load()-(h+1)) < 0 {
			return 0 // empty, or the oldest push is in progress
		}
		if n > 0 && q.head.CompareAndSwap(h, h+n) {
			lap := q.mask + 1
			for i := range n {
				s := q.slot(h + i)
				dst[i] = s.v
				if q.clear {
					var zero T
					s.v = zero
				}
				s.seq.Swap(h + i + lap)
			}
			q.pushers.wake(int(n))
			return int(n)
		}
		h = q.head.Load()
	}
	return 0
}

// Push appends v to the queue, waiting while it is full. It returns nil once
// v is in the queue, ErrQueueClosed (without pushing) if the queue is
// closed, ErrNilContext for a nil ctx, or, if ctx ends first, ctx.Err()
// with v not pushed. If there is room, v is pushed even when ctx is already
// done.
func (q *Queue[T]) Push(ctx context.Context, v T) error {
	if ctx != nil {
		for {
			r := q.pushOnce(v)
			if r == queueDone {
				return nil
			}
			if r == queueRefused {
				break
			}
			runtime.Gosched() // lost the claim: let the winner run
		}
	}
	return q.pushSlow(ctx, v)
}

//go:noinline
func (q *Queue[T]) pushSlow(ctx context.Context, v T) error {
	for {
		if err := q.await(ctx, &q.pushers, q.hasRoom); err != nil {
			return err
		}
		if q.TryPush(v) {
			return nil
		}
	}
}

// Pop removes and returns the oldest item, waiting while the queue is
// empty. It returns ErrQueueClosed once the queue is closed and every item
// pushed before Close has been popped, ErrNilContext for a nil ctx, or, if
// ctx ends first, ctx.Err(). If an item is there, it is returned even when
// ctx is already done.
func (q *Queue[T]) Pop(ctx context.Context) (T, error) {
	if ctx != nil {
		for {
			v, r := q.popOnce()
			if r == queueDone {
				return v, nil
			}
			if r == queueRefused {
				break
			}
			runtime.Gosched() // lost the claim: let the winner run
		}
	}
	return q.popSlow(ctx)
}

//go:noinline
func (q *Queue[T]) popSlow(ctx context.Context) (T, error) {
	for {
		if err := q.await(ctx, &q.poppers, q.hasItems); err != nil {
			var zero T
			return zero, err
		}
		if v, ok := q.TryPop(); ok {
			return v, nil
		}
	}
}

// PushSlice appends all of src in order, waiting for room as needed and
// claiming each run of free slots with one CAS. It returns how many items it
// pushed: len(src) with a nil error, or fewer with ErrQueueClosed,
// ErrNilContext or ctx.Err(). Other producers' items may fall between
// the runs.
func (q *Queue[T]) PushSlice(ctx context.Context, src []T) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	n := q.TryPushSlice(src)
	for n < len(src) {
		if err := q.await(ctx, &q.pushers, q.hasRoom); err != nil {
			return n, err
		}
		n += q.TryPushSlice(src[n:])
	}
	return n, nil
}

// PopSlice waits until the queue holds at least one item, then removes up to
// len(dst) of the oldest items into dst with one CAS and returns how many
// (as io.Reader does: n ≥ 1 with a nil error). It returns 0 and
// ErrQueueClosed once the queue is closed and drained, 0 and ErrNilContext
// for a nil ctx, or 0 and ctx.Err() if ctx ends first. A dst of length 0
// returns 0, nil (after the ctx check).
func (q *Queue[T]) PopSlice(ctx context.Context, dst []T) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	if len(dst) == 0 {
		return 0, nil
	}
	for {
		if n := q.TryPopSlice(dst); n > 0 {
			return n, nil
		}
		if err := q.await(ctx, &q.poppers, q.hasItems); err != nil {
			return 0, err
		}
	}
}

// Close ends the stream: afterwards pushes fail (TryPush returns false,
// Push returns ErrQueueClosed), parked calls return, and consumers pop the
// items that remain and then get ErrQueueClosed. A push that returned true
// (or nil) before, or concurrently with, Close is never lost (see Queue).
// Close may be called by any goroutine, more than once.
func (q *Queue[T]) Close() {
	if q.tail.Or(queueClosed)&queueClosed != 0 {
		return
	}
	q.closed.Store(true)
	q.pushers.wakeAll()
	q.poppers.wakeAll()
}

// queueLookHook, nil outside tests, runs in hasRoom and hasItems between
// the load of the position and the load of its slot's sequence: where
// another goroutine's claim makes the position stale.
var queueLookHook func()

// queueAnnounceHook, nil outside tests, runs in await just after the
// goroutine announced itself: where a release may count it woken.
var queueAnnounceHook func()

// hasRoom reports whether a push may succeed now: the slot at tail is free,
// or the queue is closed (the caller then sees it). A slot already
// published for tail means another producer claimed tail since the load:
// it looks again at the new tail, since the room it waits for may be
// there, freed before the caller announced itself, and no release would
// wake it.
func (q *Queue[T]) hasRoom() (ready bool, err error) {
	t := q.tail.Load()
	for {
		if t&queueClosed != 0 {
			return true, ErrQueueClosed
		}
		if queueLookHook != nil {
			queueLookHook()
		}
		d := int64(q.slot(t).seq.Load() - t)
		if d <= 0 {
			return d == 0, nil
		}
		t = q.tail.Load()
	}
}

// hasItems reports whether a pop may succeed now: the slot at head holds
// its item, or the queue is closed and every claimed position popped. A
// slot already freed for the next lap means another consumer claimed head
// since the load: it looks again, as hasRoom does (the item it waits for,
// or the end of a closed queue, may be past it).
func (q *Queue[T]) hasItems() (ready bool, err error) {
	h := q.head.Load()
	for {
		if queueLookHook != nil {
			queueLookHook()
		}
		d := int64(q.slot(h).seq.Load() - (h + 1))
		if d == 0 {
			return true, nil
		}
		if d < 0 {
			break
		}
		h = q.head.Load()
	}
	// Empty. Tail is the producers' busiest line, so it is read only
	// once closed is set (Close sets it after tail's bit): then tail's
	// value is final, and h at or past it means every item was popped.
	if q.closed.Load() {
		if t := q.tail.Load(); h >= t&^queueClosed {
			return true, ErrQueueClosed
		}
	}
	return false, nil
}
