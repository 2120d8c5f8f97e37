// Package brokenqueue is the must-fail twin of lockword's Queue, shared by
// the queue checker's test in package lockword and the queue-broken
// torture kind: Vyukov's bounded MPMC queue of uint64 with one chosen bug.
// It is its own package, not part of locktest, so that the lockword
// command does not link package testing.
package brokenqueue

import (
	"context"
	"runtime"
	"sync/atomic"
)

// Bug is the defect a Queue carries.
type Bug int

const (
	// FreeBeforeRead: a consumer frees its slot before it reads the item,
	// so a producer can overwrite an item not yet read (yielding between
	// the two, as a consumer preempted there would).
	FreeBeforeRead Bug = iota
	// SplitClaim: a producer checks the slot at tail and then moves tail
	// past it, instead of one CAS from the position it checked, so two
	// producers can claim one slot and one item is overwritten (yielding
	// between the check and the move, as a descheduled producer would).
	SplitClaim
)

// Queue is the broken queue. Its words are atomics, so the race detector
// stays quiet and the checker under test must catch the bug itself. The
// blocking calls poll with runtime.Gosched and give up at ctx's end; the
// batched calls move one item at a time (the bugs are in the claims).
type Queue struct {
	bug        Bug
	closedErr  error
	tail, head atomic.Uint64
	closed     atomic.Bool
	seq, v     []atomic.Uint64
}

// New returns an empty Queue of capacity slots with bug, whose blocking
// calls return closedErr once it is closed (the caller's ErrQueueClosed:
// this package cannot import lockword, whose tests import it).
func New(capacity int, bug Bug, closedErr error) *Queue {
	b := &Queue{bug: bug, closedErr: closedErr,
		seq: make([]atomic.Uint64, capacity), v: make([]atomic.Uint64, capacity)}
	for i := range b.seq {
		b.seq[i].Store(uint64(i))
	}
	return b
}

// TryPush appends v unless the queue is full or closed.
func (b *Queue) TryPush(v uint64) bool {
	t := b.tail.Load()
	i := t % uint64(len(b.seq))
	if b.closed.Load() || b.seq[i].Load() != t {
		return false
	}
	if b.bug == SplitClaim {
		runtime.Gosched() // widen the window a descheduled producer opens
		// tail only ever grows, so the queue stays consistent and the
		// checker sees the lost item, not a stall.
		for cur := b.tail.Load(); cur < t+1 && !b.tail.CompareAndSwap(cur, t+1); cur = b.tail.Load() {
		}
	} else if !b.tail.CompareAndSwap(t, t+1) {
		return false
	}
	b.v[i].Store(v)
	b.seq[i].Store(t + 1)
	return true
}

// TryPop removes the oldest item, if it is published.
func (b *Queue) TryPop() (uint64, bool) {
	h := b.head.Load()
	i := h % uint64(len(b.seq))
	if b.seq[i].Load() != h+1 || !b.head.CompareAndSwap(h, h+1) {
		return 0, false
	}
	free := h + uint64(len(b.seq))
	if b.bug == FreeBeforeRead {
		b.seq[i].Store(free)
		if h%16 == 0 {
			runtime.Gosched()
		}
		return b.v[i].Load(), true
	}
	v := b.v[i].Load()
	b.seq[i].Store(free)
	return v, true
}

// Push appends v, polling while the queue is full.
func (b *Queue) Push(ctx context.Context, v uint64) error {
	for !b.TryPush(v) {
		if b.closed.Load() {
			return b.closedErr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

// Pop removes the oldest item, polling while the queue is empty.
func (b *Queue) Pop(ctx context.Context) (uint64, error) {
	for {
		if v, ok := b.TryPop(); ok {
			return v, nil
		}
		if b.closed.Load() && b.head.Load() >= b.tail.Load() {
			return 0, b.closedErr
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		runtime.Gosched()
	}
}

// PushSlice pushes the items of src one at a time and returns how many.
func (b *Queue) PushSlice(ctx context.Context, src []uint64) (int, error) {
	for i, v := range src {
		if err := b.Push(ctx, v); err != nil {
			return i, err
		}
	}
	return len(src), nil
}

// PopSlice pops one item into dst[0] (len(dst) must be at least 1).
func (b *Queue) PopSlice(ctx context.Context, dst []uint64) (int, error) {
	v, err := b.Pop(ctx)
	if err != nil {
		return 0, err
	}
	dst[0] = v
	return 1, nil
}

// Close ends the stream: pushes fail, pops drain what is left.
func (b *Queue) Close() { b.closed.Store(true) }
