package lockword

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/contention"
)

// DefaultStuckThreshold is how long a waiter waits before it logs a stuck
// report, unless the lock's SetStuckThreshold says otherwise.
const DefaultStuckThreshold = 2 * time.Second

// Stats are a lock's contention statistics, collected only after
// EnableStats. Times are wall durations on the monotonic clock.
type Stats struct {
	// Acquisitions counts successful Lock, LockContext and TryLock calls
	// made after EnableStats returned (calls racing with EnableStats
	// itself may be missed).
	Acquisitions uint64
	// SlowPath counts acquisitions that found the lock held, so that the
	// one-CAS fast path failed and the caller spun, yielded or slept.
	SlowPath uint64
	// Parks counts the times a waiter went to sleep (parked its goroutine).
	Parks uint64
	// WaitTotal is the time spent in the slow path by all acquisitions;
	// WaitMax the longest single such wait.
	WaitTotal, WaitMax time.Duration
	// GiveUps counts LockContext (and RLockContext) calls that waited and
	// returned their context's error without the lock: timed out or
	// cancelled. They are not acquisitions and are in no field above but
	// Parks. GiveUpWaitTotal is the time they waited, GiveUpWaitMax the
	// longest such wait. The shared locks count them too, summed over
	// their processes (the Go side; the C library does not count them),
	// except that a SharedMutex, whose 64-byte object has no room left,
	// keeps no GiveUpWaitTotal (it stays 0) and its GiveUpWaitMax to the
	// microsecond.
	GiveUps                        uint64
	GiveUpWaitTotal, GiveUpWaitMax time.Duration
}

// SlowPathFraction is SlowPath/Acquisitions, or 0 with no acquisitions.
func (s Stats) SlowPathFraction() float64 {
	if s.Acquisitions == 0 {
		return 0
	}
	return float64(s.SlowPath) / float64(s.Acquisitions)
}

// statsFlag is a bit that a lock with statistics enabled keeps set in its
// lock word. The fast paths compare the whole word against the plain
// states (CAS 0→1 to lock, 1→0 to unlock), so the flag makes them fail and
// every acquisition reaches the slow path, where it is counted. Locks
// without statistics pay nothing, not even a load.
const statsFlag = 1 << 31

// diag carries a lock's optional diagnostics: a name, a stuck threshold and
// contention statistics. Only slow paths read it. Once allocated, info
// never changes, so readers need no further synchronization.
type diag struct {
	info atomic.Pointer[lockInfo]
}

type lockInfo struct {
	name      atomic.Pointer[string]
	stuckNs   atomic.Int64 // 0: DefaultStuckThreshold; <0: never report
	statsOn   atomic.Bool
	acquired  atomic.Uint64
	slow      atomic.Uint64
	parks     atomic.Uint64
	waitNs    atomic.Int64
	waitMax   atomic.Int64
	giveUps   atomic.Uint64 // LockContext calls that gave up
	giveUpNs  atomic.Int64
	giveUpMax atomic.Int64
	skips     ticketSkips // ticket locks: tickets given up, to skip (ticket.go)
}

func (d *diag) getInfo() *lockInfo {
	if p := d.info.Load(); p != nil {
		return p
	}
	d.info.CompareAndSwap(nil, new(lockInfo))
	return d.info.Load()
}

// SetName names the lock in stuck reports and in Stats users' output.
// It may be called at any time, concurrently with use of the lock.
func (d *diag) SetName(name string) { d.getInfo().name.Store(&name) }

// Name returns the name given by SetName, or "".
func (d *diag) Name() string {
	if p := d.info.Load(); p != nil {
		if n := p.name.Load(); n != nil {
			return *n
		}
	}
	return ""
}

// SetStuckThreshold sets how long a waiter waits before the lock's stuck
// report (a log/slog warning, one line for all its waiters, with their
// number and the longest wait) is logged; the waiters keep waiting. The
// line is repeated only when the longest wait doubles, or the number of
// waiters doubles a threshold or more after the last line. Zero restores
// DefaultStuckThreshold; a negative duration disables reports for this lock.
func (d *diag) SetStuckThreshold(threshold time.Duration) {
	lowerStuckMin(threshold) // the watcher looks often enough for it
	d.getInfo().stuckNs.Store(int64(threshold))
}

// enableStats turns counting on; the lock then sets statsFlag in its word.
func (d *diag) enableStats() { d.getInfo().statsOn.Store(true) }

// Stats returns a snapshot of the statistics collected since EnableStats;
// all zero if it was never called.
func (d *diag) Stats() Stats {
	p := d.info.Load()
	if p == nil {
		return Stats{}
	}
	return Stats{
		Acquisitions: p.acquired.Load(),
		SlowPath:     p.slow.Load(),
		Parks:        p.parks.Load(),
		WaitTotal:    time.Duration(p.waitNs.Load()),
		WaitMax:      time.Duration(p.waitMax.Load()),

		GiveUps:         p.giveUps.Load(),
		GiveUpWaitTotal: time.Duration(p.giveUpNs.Load()),
		GiveUpWaitMax:   time.Duration(p.giveUpMax.Load()),
	}
}

// uncontended records an acquisition that found the lock free but came
// through the slow path because statistics are on.
func (d *diag) uncontended() {
	if p := d.info.Load(); p != nil && p.statsOn.Load() {
		p.acquired.Add(1)
	}
}

// waitTrack follows one acquisition of a Mutex or SpinMutex through the
// slow path: it times the wait for Stats and registers it with the stuck
// watcher (stuck.go) when the waiter first sleeps. (TicketMutex and
// RWMutex use noteTrack.)
type waitTrack struct {
	info   *lockInfo
	kind   string
	addr   any
	start  time.Time
	stuck  *stuckEntry
	profNs int64  // a wait sampled for the contention profile: its start (internal/contention)
	profID uint64 // its sample armed for the unlocker view (contention.Arm), 0 if none
}

// A stuckOwner is a lock whose waiters sleep with a note in the parking
// lot (wait.WaitNoted) instead of registering with the stuck watcher: the
// watcher reads the lock's kind and diagnostics through it.
type stuckOwner interface {
	stuckInfo() (kind string, d *diag)
}

// noteTrack follows one acquisition of a TicketMutex or RWMutex through
// the slow path: it times the wait for Stats and gives each sleep the
// note by which the stuck watcher, sampling the parking lot, finds the
// wait (sleeping). Nothing is registered and nothing undone: a waiter
// that sleeps for a microsecond pays two loads for the stuck report it
// will never need. It is small, as it is built on every slow path.
type noteTrack struct {
	info    *lockInfo
	owner   stuckOwner
	startNs int64  // Stats: the wait's start on the stuck clock; 0: untimed
	sinceNs int64  // the first sleep's start on the stuck clock; 0: none yet
	profNs  int64  // a wait sampled for the contention profile: its start (internal/contention)
	profID  uint64 // its sample armed for the unlocker view (contention.Arm), 0 if none
}

// trackNoted starts a noteTrack for owner, whose diagnostics d are.
// It inlines: a lock without diagnostics pays one load.
func (d *diag) trackNoted(owner stuckOwner) (t noteTrack) {
	t.info, t.owner = d.info.Load(), owner
	if t.info != nil {
		t.timeIfStats()
	}
	if contention.Rate() != 0 {
		t.profNs = contention.Begin()
	}
	return
}

// timeIfStats starts timing the wait if statistics are on.
//
//go:noinline
func (t *noteTrack) timeIfStats() {
	if t.info.statsOn.Load() {
		t.startNs = int64(time.Since(stuckEpoch))
	}
}

// sleeping is called before each sleep. It counts the park for Stats and
// returns the note and the start to sleep with (wait.WaitNoted); a nil
// note (stuck reports off for the lock) is a plain sleep. A wait sampled
// for the contention profile keeps its note even then: the note is the
// key by which the wake-up finds the armed sample (the stuck watcher
// skips it, its threshold being off).
func (t *noteTrack) sleeping() (note any, sinceNs int64) {
	if t.info != nil {
		if t.info.statsOn.Load() {
			t.info.parks.Add(1)
		}
		if t.info.stuckNs.Load() < 0 && t.profNs == 0 {
			return nil, 0
		}
	}
	if t.sinceNs == 0 {
		t.sinceNs = stuckClockNs()
		if t.profNs != 0 {
			t.profID = contention.Arm(t.owner) // the note: the park's key
		}
	}
	return t.owner, t.sinceNs
}

// acquired ends a slow-path acquisition. It inlines.
func (t *noteTrack) acquired() {
	if t.info != nil {
		t.countAcquired()
	}
	if t.profNs != 0 {
		t.profEnd()
	}
}

// profEnd records a sampled wait in the waiter view and withdraws its
// unlocker-view sample if no park took it.
//
//go:noinline
func (t *noteTrack) profEnd() {
	contention.Disarm(t.profID)
	contention.End(t.profNs)
}

//go:noinline
func (t *noteTrack) countAcquired() {
	if t.info.statsOn.Load() {
		t.info.acquired.Add(1)
		t.info.slow.Add(1)
		t.addWait(&t.info.waitNs, &t.info.waitMax)
	}
}

// abandoned ends a slow-path attempt that gave up (context done).
func (t *noteTrack) abandoned() {
	if t.profNs != 0 {
		t.profEnd()
	}
	if t.info != nil && t.info.statsOn.Load() {
		t.info.giveUps.Add(1)
		t.addWait(&t.info.giveUpNs, &t.info.giveUpMax)
	}
}

// addWait adds the wait, if it was timed, to total and max.
func (t *noteTrack) addWait(total, max *atomic.Int64) {
	if t.startNs == 0 {
		return
	}
	ns := int64(time.Since(stuckEpoch)) - t.startNs
	total.Add(ns)
	storeMax(max, ns)
}

// stuckThreshold is the lock's stuck threshold (negative: reports off)
// and its name, for the stuck watcher.
func (d *diag) stuckThreshold() (time.Duration, string) {
	p := d.info.Load()
	if p == nil {
		return DefaultStuckThreshold, ""
	}
	threshold := DefaultStuckThreshold
	if ns := p.stuckNs.Load(); ns != 0 {
		threshold = time.Duration(ns)
	}
	name := ""
	if n := p.name.Load(); n != nil {
		name = *n
	}
	return threshold, name
}

func (d *diag) track(kind string, addr any) waitTrack {
	t := waitTrack{info: d.info.Load(), kind: kind, addr: addr}
	if t.info != nil && t.info.statsOn.Load() {
		t.start = time.Now()
	}
	if contention.Rate() != 0 {
		t.profNs = contention.Begin()
	}
	return t
}

// parking is called before each sleep. The first one registers the wait
// for the stuck report: watching only sleeps keeps the spinning fast path
// free of clock reads, and a waiter stuck for seconds is asleep anyway.
func (t *waitTrack) parking(word *atomic.Uint32) {
	if t.info != nil && t.info.statsOn.Load() {
		t.info.parks.Add(1)
	}
	if t.profNs != 0 && t.profID == 0 {
		t.profID = contention.Arm(word) // the word: the park's key
	}
	if t.stuck != nil {
		return
	}
	threshold := DefaultStuckThreshold
	name := ""
	if t.info != nil {
		if ns := t.info.stuckNs.Load(); ns < 0 {
			return
		} else if ns > 0 {
			threshold = time.Duration(ns)
		}
		if n := t.info.name.Load(); n != nil {
			name = *n
		}
	}
	if t.start.IsZero() {
		t.start = stuckNow()
	}
	t.stuck = watchStuck(t.kind, name, t.addr, word, t.start, threshold)
}

// logStuck is the stuck report of a lock: waiters goroutines sleep on it,
// the longest for waited, past its threshold (one line for them all).
func logStuck(kind, name string, addr any, waited, threshold time.Duration, waiters int) {
	if name == "" {
		name = "(unnamed: call SetName to name it)"
	}
	attrs := []any{
		"lock", name,
		"kind", kind,
		"addr", fmt.Sprintf("%p", addr),
		"waiters", waiters,
		"waited", waited.Round(time.Millisecond),
		"threshold", threshold,
	}
	if holders := holderAttrs(addr); holders != nil {
		attrs = append(attrs, holders...) // deadlock detection is on (deadlock.go)
	} else {
		attrs = append(attrs, "hint", "send SIGQUIT (or set GOTRACEBACK=all and panic) to dump every goroutine and find the holder, or turn on lockword.SetDeadlockDetection")
	}
	slog.Warn("lockword: goroutines still waiting for a lock past the stuck threshold; the holder may be blocked, deadlocked, or may never call Unlock", attrs...)
}

// acquired ends a slow-path acquisition.
func (t *waitTrack) acquired() {
	if t.profNs != 0 {
		t.profEnd()
	}
	if t.end() {
		t.info.acquired.Add(1)
		t.info.slow.Add(1)
		t.addWait(&t.info.waitNs, &t.info.waitMax)
	}
}

// abandoned ends a slow-path attempt that gave up (context done).
func (t *waitTrack) abandoned() {
	if t.profNs != 0 {
		t.profEnd()
	}
	if t.end() {
		t.info.giveUps.Add(1)
		t.addWait(&t.info.giveUpNs, &t.info.giveUpMax)
	}
}

// profEnd records a sampled wait in the waiter view and withdraws its
// unlocker-view sample if no park took it.
//
//go:noinline
func (t *waitTrack) profEnd() {
	contention.Disarm(t.profID)
	contention.End(t.profNs)
}

// end leaves the stuck watcher and reports whether statistics are on.
func (t *waitTrack) end() bool {
	if t.stuck != nil {
		t.stuck.done()
		t.stuck = nil
	}
	return t.info != nil && t.info.statsOn.Load()
}

// addWait adds the wait, if it was timed, to total and max.
func (t *waitTrack) addWait(total, max *atomic.Int64) {
	if t.start.IsZero() {
		return
	}
	ns := int64(time.Since(t.start))
	total.Add(ns)
	storeMax(max, ns)
}

// storeMax raises m to ns if ns is larger. It retries only while other
// waiters raise m meanwhile, each time to a larger value.
func storeMax(m *atomic.Int64, ns int64) {
	for {
		old := m.Load()
		if ns <= old || m.CompareAndSwap(old, ns) {
			return
		}
	}
}
