package torture

// queue-broken's queue (kinds_queue.go): Vyukov's queue whose consumer
// frees each slot before it reads the item, so that a producer can
// overwrite an item not yet read. The queue checks must catch it.

import (
	"context"
	"runtime"
	"sync/atomic"

	"github.com/lockword/lockword"
)

// brokenQueue is the queue kind's "none". Its words are atomic, so the race
// detector stays quiet and the torture's own checks must catch it; it
// yields between freeing and reading, as a consumer preempted there would.
// Blocking calls poll with runtime.Gosched.
type brokenQueue struct {
	tail, head atomic.Uint64
	closed     atomic.Bool
	seq, v     []atomic.Uint64
}

func newBrokenQueue(capacity int) *brokenQueue {
	b := &brokenQueue{seq: make([]atomic.Uint64, capacity), v: make([]atomic.Uint64, capacity)}
	for i := range b.seq {
		b.seq[i].Store(uint64(i))
	}
	return b
}

func (b *brokenQueue) TryPush(v uint64) bool {
	t := b.tail.Load()
	i := t % uint64(len(b.seq))
	if b.closed.Load() || b.seq[i].Load() != t || !b.tail.CompareAndSwap(t, t+1) {
		return false
	}
	b.v[i].Store(v)
	b.seq[i].Store(t + 1)
	return true
}

func (b *brokenQueue) TryPop() (uint64, bool) {
	h := b.head.Load()
	i := h % uint64(len(b.seq))
	if b.seq[i].Load() != h+1 || !b.head.CompareAndSwap(h, h+1) {
		return 0, false
	}
	b.seq[i].Store(h + uint64(len(b.seq))) // BUG: freed before the item is read
	if h%16 == 0 {
		runtime.Gosched()
	}
	return b.v[i].Load(), true
}

func (b *brokenQueue) Push(ctx context.Context, v uint64) error {
	for !b.TryPush(v) {
		if b.closed.Load() {
			return lockword.ErrQueueClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

func (b *brokenQueue) Pop(ctx context.Context) (uint64, error) {
	for {
		if v, ok := b.TryPop(); ok {
			return v, nil
		}
		if b.closed.Load() && b.head.Load() >= b.tail.Load() {
			return 0, lockword.ErrQueueClosed
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		runtime.Gosched()
	}
}

func (b *brokenQueue) PushSlice(ctx context.Context, src []uint64) (int, error) {
	return pushEach(ctx, src, b.Push)
}

func (b *brokenQueue) PopSlice(ctx context.Context, dst []uint64) (int, error) {
	return popOne(ctx, dst, b.Pop)
}

func (b *brokenQueue) Close() { b.closed.Store(true) }
