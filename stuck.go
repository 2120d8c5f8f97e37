package lockword

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// The stuck watcher: one goroutine, running only while some waiter sleeps,
// that scans the waits in progress every stuckTick and logs a stuck report
// for each that has passed its lock's threshold. A waiter registers when it
// first sleeps and leaves when it acquires or gives up: a few dozen
// nanoseconds, where arming a timer per wait cost several hundred, which a
// fair lock, whose every handover under contention sleeps, cannot afford.

// stuckTick is how often the watcher looks: a report comes at most this
// late.
const stuckTick = 5 * time.Millisecond

const stuckShards = 16

// A stuckEntry is one wait in progress, with what its report needs.
type stuckEntry struct {
	kind, name string
	addr       any
	word       *atomic.Uint32 // for the count of sleeping waiters
	start      time.Time
	threshold  time.Duration
	reported   bool // guarded by shard.mu
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
// clock while the watcher runs (at most stuckTick behind), else the system
// clock.
func stuckNow() time.Time {
	if stuckWaits.running.Load() {
		if ns := stuckWaits.now.Load(); ns != 0 {
			return stuckEpoch.Add(time.Duration(ns))
		}
	}
	return time.Now()
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
	if !stuckWaits.running.Load() && stuckWaits.running.CompareAndSwap(false, true) {
		go stuckWatcher()
	}
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

// stuckReport is what the watcher copies out of an entry, so that it logs
// after releasing the shard and the waiter may leave meanwhile.
type stuckReport struct {
	kind, name string
	addr       any
	word       *atomic.Uint32
	start      time.Time
	threshold  time.Duration
}

func stuckWatcher() {
	var due []stuckReport
	for {
		time.Sleep(stuckTick)
		if stuckWaits.entries.Load() == 0 {
			// Nobody sleeps: stop, unless someone registered while we
			// stopped and found us still running.
			stuckWaits.now.Store(0) // stale from here on
			stuckWaits.running.Store(false)
			if stuckWaits.entries.Load() == 0 || !stuckWaits.running.CompareAndSwap(false, true) {
				return
			}
		}
		now := time.Now()
		stuckWaits.now.Store(int64(now.Sub(stuckEpoch)))
		due = due[:0]
		for i := range stuckWaits.shards {
			sh := &stuckWaits.shards[i]
			sh.mu.Lock()
			for e := sh.head; e != nil; e = e.next {
				// A start read from the coarse clock may be up to a
				// tick early: wait a tick more, so as never to report
				// before the threshold.
				if !e.reported && now.Sub(e.start) >= e.threshold+stuckTick {
					e.reported = true // one report per wait
					due = append(due, stuckReport{e.kind, e.name, e.addr, e.word, e.start, e.threshold})
				}
			}
			sh.mu.Unlock()
		}
		for _, r := range due {
			logStuck(r.kind, r.name, r.addr, r.start, r.threshold, wait.Parked(r.word))
		}
	}
}
