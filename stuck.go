package lockword

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/stuckrule"
	"github.com/lockword/lockword/internal/wait"
)

// The stuck watcher: one goroutine, running only while some waiter sleeps,
// that looks at the waits in progress every tick (stuckTickFor) and logs one
// stuck report per lock whose waits have passed its threshold, with their
// number and the longest wait, repeated only as internal/stuckrule's
// Episode says (when the longest wait or the number of waiters doubles).
// It finds the waits in two ways:
//
//   - TicketMutex and RWMutex waiters sleep with a note in internal/wait's
//     parking lot (wait.WaitNoted: the lock and the wait's start), and the
//     watcher samples the parking lot (wait.Noted). A wait registers
//     nothing and leaves nothing to undo: a fair lock, whose every
//     handover under contention sleeps, cannot afford even the few dozen
//     nanoseconds of a registration (BENCHMARKS.md, "What stuck reports cost").
//   - The other locks register a wait when it first sleeps and unregister
//     it when it ends (watchStuck, done): a few dozen nanoseconds, where
//     arming a timer per wait cost several hundred.
//
// The watcher runs while either kind of wait exists, and stops after
// stuckIdleTicks looks that found none. A noted waiter starts it if it is
// not running (wait.OnNotedPark, called under the bucket lock after the
// waiter is queued): the watcher, before it stops, clears running and
// samples once more, so a waiter queued before that last sample is seen
// and one queued after it sees running clear and starts a new watcher.
//
// Between looks the watcher sleeps in wait.SleepThread, on Linux a
// blocking clock_nanosleep, not a runtime timer: a pending timer makes
// every schedule() on its P read the clock, and under contention the
// watcher is always sleeping (BENCHMARKS.md, "What stuck reports cost").

// stuckTick is how often the watcher looks at the least: a report comes
// at most two ticks late (the coarse clock it reads a wait's start from
// lags by up to one). It looks less often while every threshold in the
// process is long (stuckTickFor), so that at the default threshold of 2 s
// it wakes every 50 ms: each look costs a scan of the parking lot.
const stuckTick = 5 * time.Millisecond

// stuckTickMax is the longest tick: 2 ticks are 5% of the default
// threshold.
const stuckTickMax = 50 * time.Millisecond

// stuckMinNs is the shortest stuck threshold any lock of the process has
// been given (SetStuckThreshold), or 0 for none but the default.
var stuckMinNs atomic.Int64

// lowerStuckMin records a lock's threshold in stuckMinNs.
func lowerStuckMin(threshold time.Duration) {
	for {
		old := stuckMinNs.Load()
		if threshold <= 0 || (old != 0 && old <= int64(threshold)) || stuckMinNs.CompareAndSwap(old, int64(threshold)) {
			return
		}
	}
}

// stuckTickFor is the tick for the shortest threshold in use: a fortieth
// of it (two ticks are 5% of it), between stuckTick and stuckTickMax.
func stuckTickFor() time.Duration {
	th := DefaultStuckThreshold
	if ns := stuckMinNs.Load(); ns != 0 {
		th = min(th, time.Duration(ns))
	}
	return min(max(th/40, stuckTick), stuckTickMax)
}

const stuckShards = 16

// stuckIdleTicks is how many looks that find no wait the watcher makes
// before it stops: under contention waits come and go all the time, and
// the watcher should not stop and start between them.
const stuckIdleTicks = 20

func init() { wait.OnNotedPark = startStuckWatcher }

// startStuckWatcher starts the watcher if it is not running.
func startStuckWatcher() {
	if !stuckWaits.running.Load() && stuckWaits.running.CompareAndSwap(false, true) {
		go stuckWatcher()
	}
}

// A stuckEntry is one wait in progress, with what its report needs.
type stuckEntry struct {
	kind, name string
	addr       any
	word       *atomic.Uint32 // for the count of sleeping waiters
	start      time.Time
	threshold  time.Duration
	prev, next *stuckEntry
	shard      *stuckShard
}

type stuckShard struct {
	mu   sync.Mutex
	head *stuckEntry
	_    [64 - 16]byte // one shard per 64-byte cache line
}

var stuckWaits struct {
	shards  [stuckShards]stuckShard
	entries atomic.Int64
	running atomic.Bool
	// now is a coarse clock: the watcher's last look, as nanoseconds since
	// stuckEpoch. While it runs, a new wait reads its start from here, one
	// atomic load, instead of the system clock.
	now atomic.Int64
}

var stuckEpoch = time.Now()

// stuckNow is the start time of a wait for the stuck report: the coarse
// clock while the watcher runs (at most a tick behind), else the system
// clock.
func stuckNow() time.Time { return stuckEpoch.Add(time.Duration(stuckClockNs())) }

// stuckClockNs is stuckNow as nanoseconds since stuckEpoch (never 0).
func stuckClockNs() int64 {
	if stuckWaits.running.Load() {
		if ns := stuckWaits.now.Load(); ns != 0 {
			return ns
		}
	}
	return max(int64(time.Since(stuckEpoch)), 1)
}

var stuckPool = sync.Pool{New: func() any { return new(stuckEntry) }}

// watchStuck registers a wait that began at start and starts the watcher
// if it is not running.
func watchStuck(kind, name string, addr any, word *atomic.Uint32, start time.Time, threshold time.Duration) *stuckEntry {
	e := stuckPool.Get().(*stuckEntry)
	sh := &stuckWaits.shards[rand.Uint32()%stuckShards] // spread unrelated locks' waiters
	*e = stuckEntry{kind: kind, name: name, addr: addr, word: word, start: start, threshold: threshold, shard: sh}
	sh.mu.Lock()
	e.next = sh.head
	if sh.head != nil {
		sh.head.prev = e
	}
	sh.head = e
	sh.mu.Unlock()
	stuckWaits.entries.Add(1)
	startStuckWatcher()
	return e
}

// done unregisters the wait.
func (e *stuckEntry) done() {
	sh := e.shard
	sh.mu.Lock()
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		sh.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	sh.mu.Unlock()
	stuckWaits.entries.Add(-1)
	*e = stuckEntry{}
	stuckPool.Put(e)
}

// A stuckGroup gathers, for one look of the watcher, the sleeping waits
// on one lock: the report is one line per lock, not one per waiter.
type stuckGroup struct {
	kind, name string
	addr       any
	threshold  time.Duration
	waiters    int       // sleeping waits on the lock
	oldest     time.Time // the start of the longest of them
	due        bool      // at least one is past the threshold
}

// stuckLooks is the watcher's state between looks: the waits of the look
// in progress, grouped by lock (the lock's pointer), and each stuck
// lock's episode (stuckrule.Episode: when to report it again). Only the
// watcher goroutine touches it.
type stuckLooks struct {
	groups   map[any]stuckGroup
	episodes map[any]*stuckrule.Episode
}

// add counts one sleeping wait on the lock key, begun at start, past its
// threshold if due.
func (l *stuckLooks) add(key any, g stuckGroup, start time.Time, due bool) {
	if old, ok := l.groups[key]; ok {
		g = old
	}
	g.waiters++
	if g.oldest.IsZero() || start.Before(g.oldest) {
		g.oldest = start
	}
	g.due = g.due || due
	l.groups[key] = g
}

// reports ends the look at now: it returns the locks to report (each
// lock's episode decides) and ends the episodes of locks no longer stuck.
func (l *stuckLooks) reports(due []stuckGroup, now time.Time) []stuckGroup {
	for key, g := range l.groups {
		if !g.due {
			continue
		}
		ep := l.episodes[key]
		if ep == nil {
			ep = new(stuckrule.Episode)
			l.episodes[key] = ep
		}
		if ep.Due(g.waiters, now.Sub(g.oldest), g.threshold, now) {
			due = append(due, g)
		}
	}
	for key := range l.episodes {
		if !l.groups[key].due {
			delete(l.episodes, key) // no wait past the threshold: the episode is over
		}
	}
	clear(l.groups)
	return due
}

func stuckWatcher() {
	var due []stuckGroup
	looks := stuckLooks{groups: map[any]stuckGroup{}, episodes: map[any]*stuckrule.Episode{}}
	idle := 0
	for {
		// margin is how far the coarse clock may lag: the tick before
		// this look (ticks only shorten: stuckMinNs only falls).
		margin := stuckTickFor()
		wait.SleepThread(margin) // no runtime timer pending meanwhile, on Linux
		now := time.Now()
		nowNs := int64(now.Sub(stuckEpoch))
		stuckWaits.now.Store(nowNs)
		for i := range stuckWaits.shards {
			sh := &stuckWaits.shards[i]
			sh.mu.Lock()
			for e := sh.head; e != nil; e = e.next {
				// A start read from the coarse clock may be up to a
				// tick early: wait a tick more, so as never to report
				// before the threshold.
				g := stuckGroup{kind: e.kind, name: e.name, addr: e.addr, threshold: e.threshold}
				looks.add(e.addr, g, e.start, now.Sub(e.start) >= e.threshold+margin)
			}
			sh.mu.Unlock()
		}
		noted := wait.Noted(func(_ *atomic.Uint32, note any, sinceNs int64, marked bool) bool {
			o, ok := note.(stuckOwner)
			if !ok {
				return marked
			}
			kind, d := o.stuckInfo()
			threshold, name := d.stuckThreshold()
			if threshold < 0 {
				return false
			}
			g := stuckGroup{kind: kind, name: name, addr: note, threshold: threshold}
			looks.add(note, g, stuckEpoch.Add(time.Duration(sinceNs)), time.Duration(nowNs-sinceNs) >= threshold+margin)
			return false
		})
		due = looks.reports(due[:0], now)
		for _, g := range due {
			logStuck(g.kind, g.name, g.addr, now.Sub(g.oldest), g.threshold, g.waiters)
			if lockTracking.Load() != 0 {
				checkDeadlock(g.addr) // a wait past its threshold: walk the waits-for graph
			}
		}
		if noted != 0 || stuckWaits.entries.Load() != 0 {
			idle = 0
			continue
		}
		if idle++; idle < stuckIdleTicks {
			continue
		}
		// Nobody sleeps: stop, unless a wait came while we stopped and
		// found us still running (see the top of the file).
		stuckWaits.now.Store(0) // stale from here on
		stuckWaits.running.Store(false)
		if stuckWaits.entries.Load() == 0 && wait.Noted(func(_ *atomic.Uint32, _ any, _ int64, marked bool) bool { return marked }) == 0 {
			return
		}
		if !stuckWaits.running.CompareAndSwap(false, true) {
			return // a new watcher took over
		}
		idle = 0
	}
}
