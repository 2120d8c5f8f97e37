// Package contention records lockword's contention profile: sampled
// waits of every lockword lock, in process and shared (this process's
// waiters), keyed by the waiter's stack. The root package exports the
// rate and the records (lockword.SetContentionProfileRate,
// lockword.ContentionProfile); package lockprof encodes them in the pprof
// format.
//
// Go's mutex profile charges a wait to the stack of the Unlock that ended
// it (the holder that made others wait); this one charges it to the
// waiter's stack (who waited, and where). The waiter's view needs no work
// on the Unlock path, which every acquisition crosses, and only a start
// time on the slow path; the unlocker's view is not recorded yet.
package contention

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// rate is the sampling rate: 0 off, n one slow-path acquisition in n on
// average.
var rate atomic.Int64

// SetRate sets the sampling rate (0: off) and returns the previous one.
func SetRate(n int64) int64 { return rate.Swap(n) }

// Rate returns the sampling rate. A slow path reads it before anything
// else, so that the profile costs one load when off.
func Rate() int64 { return rate.Load() }

// A Record is the contention recorded at one stack.
type Record struct {
	// Count is how many sampled waits ended here; Delay is their total.
	// Neither is scaled by the rate (the encoder does that, as the
	// runtime scales its mutex profile).
	Count int64
	Delay time.Duration
	// Stack is the waiter's stack as program counters (runtime.Callers),
	// innermost first, starting in the lock's slow path: lockprof drops
	// the lockword frames, so that a sample's leaf is the caller of Lock.
	Stack []uintptr
}

const depth = 32

var profile struct {
	mu      sync.Mutex
	records map[[depth]uintptr]*Record
}

var epoch = time.Now()

// Records returns a copy of the records collected so far.
func Records() []Record {
	profile.mu.Lock()
	defer profile.mu.Unlock()
	var records []Record
	for _, r := range profile.records {
		c := *r
		c.Stack = append([]uintptr(nil), r.Stack...)
		records = append(records, c)
	}
	return records
}

// Begin returns the start of a wait if it is sampled, else 0 (as when
// the profile is off). Callers call it only when Rate is not 0.
func Begin() int64 {
	n := rate.Load()
	if n <= 0 || (n > 1 && rand.Int64N(n) != 0) {
		return 0
	}
	return max(int64(time.Since(epoch)), 1)
}

// End records a sampled wait that began at start (from Begin) at the
// caller's stack.
//
//go:noinline
func End(start int64) {
	delay := int64(time.Since(epoch)) - start
	var key [depth]uintptr
	n := runtime.Callers(2, key[:])
	profile.mu.Lock()
	defer profile.mu.Unlock()
	if profile.records == nil {
		profile.records = map[[depth]uintptr]*Record{}
	}
	r := profile.records[key]
	if r == nil {
		r = &Record{Stack: append([]uintptr(nil), key[:n]...)}
		profile.records[key] = r
	}
	r.Count++
	r.Delay += time.Duration(delay)
}
