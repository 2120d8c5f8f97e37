package torture

// ring-broken's ring (kinds_lockfree.go): a ring that publishes each item
// before writing it, so that the consumer can read a slot not yet written.
// The ring checks must catch it.

import (
	"context"
	"runtime"
	"sync/atomic"

	"github.com/lockword/lockword"
)

// brokenRing is the ring kinds' "none": an SPSC ring that publishes each
// item (advances tail) before it writes the item into its slot, the classic
// ring bug, so that the consumer reads a slot that still holds an old item.
// Its words are atomic, so the race detector stays quiet and the torture's
// own checks must catch it; it yields between publishing and writing, as a
// producer preempted there would, so that it fails even on one core.
// Blocking calls poll with runtime.Gosched.
type brokenRing struct {
	head, tail atomic.Uint64
	closed     atomic.Bool
	slots      []atomic.Uint64
}

func newBrokenRing(capacity int) *brokenRing {
	return &brokenRing{slots: make([]atomic.Uint64, capacity)}
}

func (b *brokenRing) tryPush(v uint64) bool {
	t := b.tail.Load()
	if t-b.head.Load() >= uint64(len(b.slots)) {
		return false
	}
	b.tail.Store(t + 1) // BUG: published before the item is written
	if t%64 == 0 {
		runtime.Gosched()
	}
	b.slots[t%uint64(len(b.slots))].Store(v)
	return true
}

func (b *brokenRing) Push(ctx context.Context, v uint64) error {
	for !b.tryPush(v) {
		if b.closed.Load() {
			return lockword.ErrRingClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

func (b *brokenRing) Pop(ctx context.Context) (uint64, error) {
	for {
		h := b.head.Load()
		if h != b.tail.Load() {
			v := b.slots[h%uint64(len(b.slots))].Load()
			b.head.Store(h + 1)
			return v, nil
		}
		if b.closed.Load() && h == b.tail.Load() {
			return 0, lockword.ErrRingClosed
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		runtime.Gosched()
	}
}

func (b *brokenRing) PushSlice(ctx context.Context, src []uint64) (int, error) {
	return pushEach(ctx, src, b.Push)
}

func (b *brokenRing) PopSlice(ctx context.Context, dst []uint64) (int, error) {
	return popOne(ctx, dst, b.Pop)
}

// pushEach is the broken twins' PushSlice: src pushed one at a time.
func pushEach(ctx context.Context, src []uint64, push func(context.Context, uint64) error) (int, error) {
	for i, v := range src {
		if err := push(ctx, v); err != nil {
			return i, err
		}
	}
	return len(src), nil
}

// popOne is the broken twins' PopSlice: one item at a time.
func popOne(ctx context.Context, dst []uint64, pop func(context.Context) (uint64, error)) (int, error) {
	v, err := pop(ctx)
	if err != nil {
		return 0, err
	}
	dst[0] = v
	return 1, nil
}

func (b *brokenRing) Close() { b.closed.Store(true) }

// ---- seqlock ----
