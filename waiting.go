package lockword

import (
	"context"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// A waitStrategy is how a lock protocol sleeps on its words and wakes
// them: the futex contract (sleep while the word holds this value, with
// spurious returns; wake up to n sleepers), plus keyed waiting for
// protocols that wake one chosen waiter. The protocols of TicketMutex,
// RWMutex and Cond are written against it and against words reached by
// pointer, so the same code can run on words in the Go heap (inProcess) or
// on words in memory shared between processes, where a strategy built on
// the shared kernel futex (FUTEX_WAIT_BITSET with a bit per key) would take
// its place.
//
// wait and waitKey return nil when woken or when the word no longer held
// val, and ctx.Err() only when ctx ended before any wake-up chose the
// waiter, so a cancelled waiter never swallows a wake-up.
type waitStrategy interface {
	wait(ctx context.Context, addr *atomic.Uint32, val uint32) error
	wake(addr *atomic.Uint32, n int) int
	waitKey(ctx context.Context, addr *atomic.Uint32, val, key uint32) error
	wakeKey(addr *atomic.Uint32, key uint32, n int) int
}

// inProcess waits by parking goroutines in internal/wait's parking lot: for
// words in this process's memory. Waiters hold no OS thread.
type inProcess struct{}

func (inProcess) wait(ctx context.Context, addr *atomic.Uint32, val uint32) error {
	return wait.Wait(ctx, addr, val)
}

func (inProcess) wake(addr *atomic.Uint32, n int) int { return wait.Wake(addr, n) }

func (inProcess) waitKey(ctx context.Context, addr *atomic.Uint32, val, key uint32) error {
	return wait.WaitKey(ctx, addr, val, key)
}

func (inProcess) wakeKey(addr *atomic.Uint32, key uint32, n int) int {
	return wait.WakeKey(addr, key, n)
}

// wakeAll is the n for "every waiter".
const wakeAll = 1<<31 - 1
