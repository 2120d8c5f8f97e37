// Package contention records lockword's contention profile: sampled
// waits of every lockword lock, in two views. The root package exports the
// rate and the records (lockword.SetContentionProfileRate,
// lockword.ContentionProfile); package lockprof encodes them in the pprof
// format.
//
// The unlocker view is Go's mutex profile's convention (runtime/sema.go's
// semrelease1): a sampled wait is charged, when a wake-up ends it, to the
// stack of the goroutine that woke it, the Unlock that made it wait; the
// delay is the time the waiter slept, from its park to that wake-up. A
// lock's slow path arms a sample (Arm, one wait in rate); the waiting
// layer (internal/wait) stamps the next park on that lock with Take and
// charges the wake-up with Woken, so the unlocker pays only when it wakes
// a sampled waiter. Waits that sleep in the kernel on a shared lock are in
// the waiter view only: their unlocker may be another process, which
// cannot know the wait.
//
// The waiter view charges each sampled slow-path acquisition (or give-up)
// to the waiter's own stack with its whole wait, spinning included: who
// waited, and where (Begin, End).
package contention

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname: cheaprand
)

// hot holds the words that every slow path reads while the profile is
// on, on a cache line of their own: the mutexes beside them in memory are
// written several times by each sample, and the slow paths that are not
// sampled (99 in 100) should not miss on their line.
var hot struct {
	_ [cacheLine]byte
	// rate is the sampling rate: 0 off, n one slow-path acquisition in n
	// on average.
	rate atomic.Int64
	// armed is len(armed.samples): a park loads it, and looks only if
	// not 0. Written twice a sample.
	armed atomic.Int32
	_     [cacheLine - 12]byte
}

const cacheLine = 64

// SetRate sets the sampling rate (0: off) and returns the previous one.
func SetRate(n int64) int64 { return hot.rate.Swap(n) }

// Rate returns the sampling rate. A slow path reads it before anything
// else, so that the profile costs one load when off.
func Rate() int64 { return hot.rate.Load() }

// A View is which stack a record charges: the unlocker's or the waiter's.
type View uint8

// The views, in the order lockprof lists them.
const (
	Unlocker View = iota
	Waiter
)

// A Record is the contention recorded at one stack, in one view.
type Record struct {
	View View
	// Count is how many sampled waits ended here; Delay is their total.
	// Neither is scaled by the rate (the encoder does that, as the
	// runtime scales its mutex profile).
	Count int64
	Delay time.Duration
	// Stack is the charged stack as program counters (as runtime.Callers
	// returns them: one per frame, inlined calls included), innermost
	// first, starting inside lockword (the waker's wake-up or the
	// waiter's slow path): lockprof drops the lockword frames, so that a
	// sample's leaf is the caller of Unlock or of Lock.
	Stack []uintptr
}

const depth = 32

type recordKey struct {
	view  View
	stack [depth]uintptr
}

var profile struct {
	mu       sync.Mutex
	records  map[recordKey]*Record
	boundary [1 << boundaryBits]boundaryEntry // atBoundary's answers, by return address
}

var epoch = time.Now()

// Records returns a copy of the records collected so far.
func Records() []Record {
	profile.mu.Lock()
	defer profile.mu.Unlock()
	var records []Record
	for _, r := range profile.records {
		c := *r
		c.Stack = logical(r.Stack)
		records = append(records, c)
	}
	return records
}

// Begin returns the start of a wait if it is sampled, else 0 (as when
// the profile is off). Callers call it only when Rate is not 0.
func Begin() int64 {
	n := hot.rate.Load()
	if n <= 0 || (n > 1 && !sampled(n)) {
		return 0
	}
	return max(int64(time.Since(epoch)), 1)
}

// sampled draws one in n (n > 1). Every contended slow path draws, and
// every hand-over of a FIFO lock is one, so the draw is the runtime's
// per-thread cheap generator, as the runtime's own mutex profile samples:
// a quarter to a third of rand.Int64N's time in a micro-benchmark (9-11
// ns against 26-40 at load 12 on 2 cores). Rates past 2^32 draw from
// math/rand/v2.
func sampled(n int64) bool {
	if n > math.MaxUint32 {
		return rand.Int64N(n) == 0
	}
	return uint64(cheaprand())*uint64(n)>>32 == 0 // in [0, n), Lemire's reduction
}

// cheaprand is the runtime's per-thread non-cryptographic generator
// (wyrand), which the runtime keeps linkable for packages outside the
// standard library.
//
//go:linkname cheaprand runtime.cheaprand
func cheaprand() uint32

// End records a sampled wait that began at start (from Begin) at the
// caller's stack, in the waiter view.
//
//go:noinline
func End(start int64) {
	record(Waiter, int64(time.Since(epoch))-start)
}

// record adds one wait of delay ns to view, at the calling goroutine's
// stack (callers: from inside this package on).
func record(view View, delay int64) {
	k := recordKey{view: view}
	profile.mu.Lock()
	defer profile.mu.Unlock()
	n := callers(&k.stack)
	if profile.records == nil {
		profile.records = map[recordKey]*Record{}
	}
	r := profile.records[k]
	if r == nil {
		r = &Record{View: view, Stack: append([]uintptr(nil), k.stack[:n]...)}
		profile.records[k] = r
	}
	r.Count++
	r.Delay += time.Duration(delay)
}

// armed holds the armed samples of the unlocker view: keys of locks whose next park
// is to be stamped. A key is what the waiting layer knows of a park: the
// word it sleeps on, or its note (the lock) for noted waits. Any waiter's
// next park on that lock takes the sample, not necessarily the arming
// waiter's: one park in rate is still sampled, and nothing ties the
// waiting layer to goroutines.
var armed armedSet

type armedSet struct {
	mu   sync.Mutex
	last uint64 // the last sample's id
	// samples are the armed samples, oldest first.
	samples []armedSample
}

type armedSample struct {
	key any
	id  uint64
}

// maxArmed bounds the armed samples; more are dropped (a wait unsampled).
const maxArmed = 64

// Arm asks that the next park on key (a word or a note) be stamped for the
// unlocker view, and returns the sample's id for Disarm (0: dropped). It
// is called by a sampled slow path (Begin returned non-zero) before it
// first sleeps.
func Arm(key any) uint64 {
	armed.mu.Lock()
	defer armed.mu.Unlock()
	if len(armed.samples) >= maxArmed {
		return 0
	}
	armed.last++
	armed.samples = append(armed.samples, armedSample{key, armed.last})
	hot.armed.Add(1)
	return armed.last
}

// Disarm withdraws sample id (from Arm) if no park took it (its waiter
// acquired without sleeping again), so that it does not linger. It costs
// nothing for id 0.
func Disarm(id uint64) {
	if id == 0 {
		return
	}
	armed.mu.Lock()
	defer armed.mu.Unlock()
	for i, a := range armed.samples {
		if a.id == id {
			armed.drop(i)
			return
		}
	}
}

// drop removes sample i. The caller holds a.mu.
func (a *armedSet) drop(i int) {
	a.samples = append(a.samples[:i], a.samples[i+1:]...)
	hot.armed.Add(-1)
}

// Armed reports whether any sample is armed: the waiting layer's one load
// per park, 0 while the profile is off.
func Armed() bool { return hot.armed.Load() != 0 }

// Take returns the park's start stamp (on this package's clock) if a
// sample is armed for its word addr or its note, which it consumes; else
// 0. Call it only when Armed.
func Take(addr, note any) int64 {
	armed.mu.Lock()
	defer armed.mu.Unlock()
	for i, a := range armed.samples {
		if a.key == addr || (note != nil && a.key == note) {
			armed.drop(i)
			return max(int64(time.Since(epoch)), 1)
		}
	}
	return 0
}

// Woken records, in the unlocker view, a sampled park stamped parkedNs
// (Take) that the caller's caller (the wake-up in the waiting layer,
// called by an Unlock) has just ended, at that stack.
//
//go:noinline
func Woken(parkedNs int64) {
	record(Unlocker, int64(time.Since(epoch))-parkedNs)
}
