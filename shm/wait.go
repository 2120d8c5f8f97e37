package shm

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// How every shared kind (Mutex, TicketMutex, RWMutex,
// Cond, the shared rings, and the region's own initialisation word)
// sleeps on a word in shared memory. The word's waker may be another
// process, so the sleep is the kernel futex without the private flag
// (wait.Shared); in-process kinds park goroutines instead (internal/wait's
// Wait and Wake). This file is the only one that calls internal/wait's
// futex functions.
//
// A kernel sleep cannot watch a channel, so a sleep that a context must be
// able to end registers a wake-up of the word's sleepers for when the
// context ends, and every sleep is bounded by the context's deadline and by
// the caller's slice (the interval at which it checks a holder's or peer's
// liveness). Callers loop: a sleep returns when woken, when the word no
// longer holds the value, spuriously, when the context ends, or when the
// slice elapses, and says nothing about which.

// unboundedSlice is the slice of a sleep that only a wake-up or the
// context ends.
const unboundedSlice = time.Duration(-1)

// sleepShared sleeps in the kernel on word while it holds val, for at most
// slice (unboundedSlice: without limit) and never past ctx's deadline. If
// ctx can end, its end wakes every sleeper on word (the others see a
// spurious wake-up and sleep again).
func sleepShared(ctx context.Context, word *atomic.Uint32, val uint32, slice time.Duration) {
	defer wakeOnDone(ctx, func() { wakeShared(word, wakeAll) })()
	wait.FutexWait(word, val, clampToDeadline(ctx, slice), wait.Shared)
}

// sleepSharedBits is sleepShared for a sleeper that FUTEX_WAIT_BITSET
// files under bits: only a wake-up whose bitset meets bits wakes it, and
// ctx's end wakes the sleepers of bits.
func sleepSharedBits(ctx context.Context, word *atomic.Uint32, val, bits uint32, slice time.Duration) {
	defer wakeOnDone(ctx, func() { wakeSharedBits(word, wakeAll, bits) })()
	wait.FutexWaitBitset(word, val, bits, clampToDeadline(ctx, slice), wait.Shared)
}

// wakeShared wakes up to n kernel sleepers on word, in any process
// (n = wakeAll: every one).
func wakeShared(word *atomic.Uint32, n int) { wait.FutexWake(word, n, wait.Shared) }

// wakeSharedBits wakes up to n kernel sleepers on word whose bitset meets
// bits.
func wakeSharedBits(word *atomic.Uint32, n int, bits uint32) {
	wait.FutexWakeBitset(word, n, bits, wait.Shared)
}

// clampToDeadline returns slice, shortened to the time left before ctx's
// deadline (0 if it has passed). A negative slice (unboundedSlice) has no
// limit of its own.
func clampToDeadline(ctx context.Context, slice time.Duration) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return slice
	}
	left := max(time.Until(dl), 0)
	if slice < 0 {
		return left
	}
	return min(slice, left)
}

// wakeOnDone arranges for wake to run when ctx ends, so that a goroutine
// asleep in the kernel (which no channel can interrupt) returns at once
// rather than at its next liveness check. The returned stop must be called.
func wakeOnDone(ctx context.Context, wake func()) (stop func() bool) {
	if ctx == nil || ctx.Done() == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(ctx, wake)
}

// kernelSleeper lets one goroutine of this process at a time sleep in the
// kernel on a shared word; the process's other waiters on that word park
// as goroutines until it wakes. So a thousand waiting goroutines cost one
// OS thread. It lives in process memory (the Go value of the shared
// object), never in the region.
//
// sleeping  meaning
// 0         no goroutine of ours sleeps in the kernel on the word
// 1         one does; the others park on woke, which it bumps on waking
type kernelSleeper struct {
	sleeping atomic.Uint32
	woke     atomic.Uint32
}

// enter reports whether the caller is now the process's kernel sleeper,
// which must call leave after its sleep. Otherwise enter parked the caller
// until the sleeper woke (or ctx ended), unless changed, asked after the
// caller read woke, says the word moved on already; the caller then looks
// at the word again.
func (k *kernelSleeper) enter(ctx context.Context, changed func() bool) bool {
	if k.sleeping.CompareAndSwap(0, 1) {
		return true
	}
	// Read woke, look once more, then park while woke is unchanged: a
	// sleeper that wakes after the look bumps it.
	v := k.woke.Load()
	if k.sleeping.Load() == 0 || changed() {
		return false
	}
	wait.Wait(ctx, &k.woke, v)
	return false
}

// leave ends the caller's turn as kernel sleeper and wakes the goroutines
// parked behind it, so that they look at the word again.
func (k *kernelSleeper) leave() {
	k.sleeping.Store(0)
	k.woke.Add(1)
	wait.Wake(&k.woke, wakeAll)
}
