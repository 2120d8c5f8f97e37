package lockword

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The contention profile: the in-process locks' counterpart of the
// runtime's mutex profile (runtime.SetMutexProfileFraction), which sees
// sync.Mutex and sync.RWMutex only. A sampled slow-path acquisition (one in
// rate on average) records its wait, keyed by the waiter's stack: the
// code that called Lock and waited. This package only records; package
// lockprof encodes the records in the pprof format, so that the root
// package keeps its dependencies to x/sys.
//
// Go's mutex profile charges a wait to the stack of the Unlock that ended
// it (the holder that made others wait); this one charges it to the
// waiter's stack (who waited, and where). The waiter's view needs no work
// on the Unlock path, which every acquisition crosses, and only a start
// time on the slow path; the unlocker's view is not recorded yet.

// contentionRate is the sampling rate: 0 off, n one slow-path
// acquisition in n on average.
var contentionRate atomic.Int64

// SetContentionProfileRate sets the contention profile's sampling rate:
// on average one in rate contended acquisitions (those that reach a
// lock's slow path and acquire, or give up) is recorded; 1 records every
// one, 0 (the default) turns the profile off. A negative rate leaves the
// rate unchanged. It returns the previous rate, as
// runtime.SetMutexProfileFraction does. Off, a slow path pays one atomic
// load; the fast paths pay nothing.
func SetContentionProfileRate(rate int) int {
	if rate < 0 {
		return int(contentionRate.Load())
	}
	return int(contentionRate.Swap(int64(rate)))
}

// A ContentionRecord is the contention recorded at one stack.
type ContentionRecord struct {
	// Count is how many sampled acquisitions waited here; Delay is
	// their total wait. Neither is scaled by the rate (the encoder
	// does that, as the runtime's mutex profile does).
	Count int64
	Delay time.Duration
	// Stack is the waiter's stack as program counters (runtime.Callers),
	// innermost first, starting in the lock's slow path: lockprof drops
	// the lockword frames, so that a sample's leaf is the caller of Lock.
	Stack []uintptr
}

const contentionDepth = 32

var contention struct {
	mu      sync.Mutex
	records map[[contentionDepth]uintptr]*ContentionRecord
}

// ContentionProfile returns a copy of the contention records collected
// since the rate was first set above 0, and the current rate.
func ContentionProfile() (records []ContentionRecord, rate int) {
	contention.mu.Lock()
	defer contention.mu.Unlock()
	for _, r := range contention.records {
		c := *r
		c.Stack = append([]uintptr(nil), r.Stack...)
		records = append(records, c)
	}
	return records, int(contentionRate.Load())
}

// sampleContention returns the start of a sampled wait on the stuck clock,
// or 0 if this wait is not sampled (or the profile is off).
func sampleContention() int64 {
	rate := contentionRate.Load()
	if rate <= 0 || (rate > 1 && rand.Int64N(rate) != 0) {
		return 0
	}
	return max(int64(time.Since(stuckEpoch)), 1)
}

// recordContention records a sampled wait that began at startNs (stuck
// clock) at the caller's stack.
//
//go:noinline
func recordContention(startNs int64) {
	delay := int64(time.Since(stuckEpoch)) - startNs
	var key [contentionDepth]uintptr
	n := runtime.Callers(2, key[:])
	contention.mu.Lock()
	defer contention.mu.Unlock()
	if contention.records == nil {
		contention.records = map[[contentionDepth]uintptr]*ContentionRecord{}
	}
	r := contention.records[key]
	if r == nil {
		r = &ContentionRecord{Stack: append([]uintptr(nil), key[:n]...)}
		contention.records[key] = r
	}
	r.Count++
	r.Delay += time.Duration(delay)
}
