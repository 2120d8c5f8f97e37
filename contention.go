package lockword

import (
	"time"

	"github.com/lockword/lockword/internal/contention"
)

// The contention profile: the lockword counterpart of the runtime's mutex
// profile (runtime.SetMutexProfileFraction), which sees sync.Mutex and
// sync.RWMutex only. internal/contention records it (and says why a wait
// is charged to the waiter's stack); package lockprof encodes it in the
// pprof format, so that the root package keeps its dependencies to x/sys.
// Two views of the same waits: the unlocker's stack, as the runtime
// charges its mutex profile, and the waiter's.

// SetContentionProfileRate sets the contention profile's sampling rate:
// on average one in rate contended acquisitions (those that reach a
// lock's slow path and acquire, or give up), of every lockword lock in
// process and of this process's waiters on shared ones, is recorded; 1
// records every one, 0 (the default) turns the profile off. A negative
// rate leaves the rate unchanged. It returns the previous rate, as
// runtime.SetMutexProfileFraction does. Off, a slow path pays one atomic
// load; the fast paths pay nothing.
func SetContentionProfileRate(rate int) int {
	if rate < 0 {
		return int(contention.Rate())
	}
	return int(contention.SetRate(int64(rate)))
}

// A ContentionView is the stack that a ContentionRecord charges.
type ContentionView uint8

const (
	// ContentionUnlocker charges a sampled wait to the stack that called
	// Unlock (or Release, RUnlock) and woke the waiter, with the time the
	// waiter slept: Go's mutex profile's convention, which names the
	// holders that make others wait. Waits on shared locks sleeping in
	// the kernel are not in it (their unlocker may be another process).
	ContentionUnlocker ContentionView = iota
	// ContentionWaiter charges a sampled contended acquisition (or
	// give-up) to the stack that called Lock, with its whole wait,
	// spinning included: who waited, and where; shared locks included.
	ContentionWaiter
)

// A ContentionRecord is the contention recorded at one stack, in one view.
type ContentionRecord struct {
	View ContentionView
	// Count is how many sampled acquisitions waited here; Delay is
	// their total wait. Neither is scaled by the rate (lockprof does
	// that, as the runtime's mutex profile is scaled).
	Count int64
	Delay time.Duration
	// Stack is the charged stack as program counters (runtime.Callers),
	// innermost first, starting inside lockword (the wake-up, or the
	// lock's slow path): lockprof drops the lockword frames, so that a
	// sample's leaf is the caller of Unlock, or of Lock.
	Stack []uintptr
}

// ContentionProfile returns a copy of the contention records collected
// since the rate was first set above 0, and the current rate.
func ContentionProfile() (records []ContentionRecord, rate int) {
	for _, r := range contention.Records() {
		records = append(records, ContentionRecord{View: ContentionView(r.View), Count: r.Count, Delay: r.Delay, Stack: r.Stack})
	}
	return records, int(contention.Rate())
}
