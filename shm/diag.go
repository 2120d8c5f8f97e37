package shm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/contention"
	"github.com/lockword/lockword/internal/stuckrule"
)

// What the robust locks in regions (Mutex, TicketMutex,
// RWMutex) report about themselves: the statistics block that every
// robust kind keeps at Mutex's offsets of its first cache line
// (mutexObj*), summed over all processes, and stuck reports naming the
// holder process. The in-process kinds' counterparts are diag.go and
// stuck.go.

func mutexObjStats(obj []byte) lockword.Stats {
	return lockword.Stats{
		Acquisitions: word64(obj, mutexObjAcquired).Load(),
		SlowPath:     word64(obj, mutexObjSlow).Load(),
		Parks:        word64(obj, mutexObjParks).Load(),
		WaitTotal:    time.Duration(word64(obj, mutexObjWaitNs).Load()),
		WaitMax:      time.Duration(word64(obj, mutexObjWaitMaxNs).Load()),
	}
}

// countSlowAcquisition adds one slow-path acquisition that waited since
// start to the statistics block of obj, which all processes share.
func countSlowAcquisition(obj []byte, start time.Time) {
	word64(obj, mutexObjAcquired).Add(1)
	word64(obj, mutexObjSlow).Add(1)
	ns := uint64(time.Since(start))
	word64(obj, mutexObjWaitNs).Add(ns)
	raiseMax(word64(obj, mutexObjWaitMaxNs), ns)
}

// raiseMax raises *mx to v if v is larger.
func raiseMax[T uint32 | uint64](mx interface {
	Load() T
	CompareAndSwap(old, new T) bool
}, v T) {
	for i := 0; i < retryLimit; i++ { // statistics only: give up on a word that keeps moving
		old := mx.Load()
		if v <= old || mx.CompareAndSwap(old, v) {
			return
		}
	}
}

// Give-ups: LockContext (and RLockContext) calls that waited and returned
// their context's error, counted as the in-process locks count them
// (Stats.GiveUps). A Mutex object has 8 spare bytes: the count
// (uint32, wrapping) and the longest wait in µs (uint32, saturating), no
// total; a ticket queue (TicketMutex, RWMutex) keeps all
// three as uint64 in its reserved line.

// isContextErr reports whether err is a context's error: a give-up.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// countMutexGiveUp counts a Mutex give-up that waited since start.
func countMutexGiveUp(obj []byte, start time.Time) {
	word32(obj, mutexObjGiveUps).Add(1)
	us := uint64(time.Since(start) / time.Microsecond)
	raiseMax(word32(obj, mutexObjGiveUpMaxUs), uint32(min(us, math.MaxUint32)))
}

// countQueueGiveUp counts a ticket queue's give-up that waited since start.
func countQueueGiveUp(obj []byte, start time.Time) {
	word64(obj, ticketObjGiveUps).Add(1)
	ns := uint64(time.Since(start))
	word64(obj, ticketObjGiveUpNs).Add(ns)
	raiseMax(word64(obj, ticketObjGiveUpMaxNs), ns)
}

// sharedMutexStats is a Mutex's statistics, give-ups included.
func sharedMutexStats(obj []byte) lockword.Stats {
	s := mutexObjStats(obj)
	s.GiveUps = uint64(word32(obj, mutexObjGiveUps).Load())
	s.GiveUpWaitMax = time.Duration(word32(obj, mutexObjGiveUpMaxUs).Load()) * time.Microsecond
	return s
}

// queueObjStats is a ticket queue's statistics, give-ups included.
func queueObjStats(obj []byte) lockword.Stats {
	s := mutexObjStats(obj)
	s.GiveUps = word64(obj, ticketObjGiveUps).Load()
	s.GiveUpWaitTotal = time.Duration(word64(obj, ticketObjGiveUpNs).Load())
	s.GiveUpWaitMax = time.Duration(word64(obj, ticketObjGiveUpMaxNs).Load())
	return s
}

// stuckThreshold turns a SetStuckThreshold value into a threshold, or
// reports that stuck reports are off.
func stuckThreshold(stuckNs *atomic.Int64) (time.Duration, bool) {
	switch ns := stuckNs.Load(); {
	case ns < 0:
		return 0, false
	case ns > 0:
		return time.Duration(ns), true
	}
	return lockword.DefaultStuckThreshold, true
}

// profileBegin starts a wait for the contention profile: its start if
// sampled, else 0 (one load when the profile is off). The waiter defers
// profileEnd with it, which records the wait at the waiter's stack. A
// waiter that first queued at its process's gate (an in-process lock)
// has that wait recorded as the gate's: it samples only the rest, so a
// wait is never counted twice in the delay, though it may count as two
// contentions.
func profileBegin() int64 {
	if contention.Rate() == 0 {
		return 0
	}
	return contention.Begin()
}

// profileEnd records a wait that profileBegin sampled (began != 0).
func profileEnd(began int64) {
	if began != 0 {
		contention.End(began)
	}
}

// A stuckEpisode is a shared lock's stuck reports in this process: one
// line for all this process's waits past the threshold, repeated only as
// stuckrule.Episode says. It lives in process memory (the Go value of the
// lock), so each process logs its own line.
type stuckEpisode struct {
	mu      sync.Mutex
	past    int           // this process's waits past the threshold
	longest time.Duration // the longest wait seen in the episode
	ep      stuckrule.Episode
}

// A stuckWait is one wait's part in its lock's stuckEpisode.
type stuckWait struct{ joined bool }

// due is called by a waiter, whose wait has lasted waited, at each of its
// checks; others is how many waits of this process the caller knows of
// beside the episode's own count (0: none). It reports whether to log a
// line now, for how many waiters and the longest wait.
func (e *stuckEpisode) due(w *stuckWait, waited, threshold time.Duration, others int) (ok bool, waiters int, longest time.Duration) {
	if waited < threshold {
		return false, 0, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !w.joined {
		w.joined = true
		e.past++
	}
	e.longest = max(e.longest, waited)
	waiters = max(e.past, others)
	return e.ep.Due(waiters, e.longest, threshold, time.Now()), waiters, e.longest
}

// check is due for a wait that began at start, against the threshold that
// stuckNs (the lock's SetStuckThreshold value) sets, which it returns for
// the report; ok is false while stuck reports are off.
func (e *stuckEpisode) check(stuckNs *atomic.Int64, w *stuckWait, start time.Time, others int) (ok bool, waiters int, longest, threshold time.Duration) {
	threshold, on := stuckThreshold(stuckNs)
	if !on {
		return false, 0, 0, 0
	}
	ok, waiters, longest = e.due(w, time.Since(start), threshold, others)
	return ok, waiters, longest, threshold
}

// leave ends the wait's part (deferred by every waiter): the last wait
// past the threshold to leave ends the episode.
func (e *stuckEpisode) leave(w *stuckWait) {
	if !w.joined {
		return
	}
	e.mu.Lock()
	if e.past--; e.past == 0 {
		e.ep.End()
		e.longest = 0
	}
	e.mu.Unlock()
}

// heldFor is how long the hold of obj has lasted, from its held-since
// stamp, if timed says the stamp describes this hold.
func heldFor(obj []byte, timed bool) any {
	if since := word64(obj, mutexObjHeldSince).Load(); timed && since != 0 {
		return time.Duration(max(monoNowNs()-int64(since), 0)).Round(time.Millisecond)
	}
	return "unknown (a fast-path hold: lockword inspect stamps it)"
}

// A sharedStuck is the stuck report of a robust lock, for logSharedStuck.
type sharedStuck struct {
	kind, name, path string
	holderPID        uint32
	alive            bool
	heldFor          any // a duration, or why it is unknown; nil: not shown
	waiters          int // this process's waiters
	waited           time.Duration
	threshold        time.Duration
}

// logSharedStuck is the stuck report of a robust lock: goroutines have
// waited past the threshold for a lock whose holder is another process (or
// this one), which is never robbed while it lives. A stopped holder
// (kill -STOP, a debugger) is named as such: it would wait forever.
func logSharedStuck(r sharedStuck, extra ...any) {
	args := []any{
		"lock", r.name,
		"kind", r.kind,
		"region", r.path,
		"holder_pid", r.holderPID,
		"holder_alive", r.alive,
	}
	if r.alive && r.holderPID != 0 {
		switch sysProcState(int(r.holderPID)) {
		case 'T':
			args = append(args, "holder_state", "stopped")
		case 't':
			args = append(args, "holder_state", "tracing stop")
		}
	}
	if r.heldFor != nil {
		args = append(args, "held_for", r.heldFor)
	}
	args = append(args,
		"waiters", r.waiters,
		"waited", r.waited.Round(time.Millisecond),
		"threshold", r.threshold)
	args = append(args, extra...)
	hint := "run `lockword inspect " + r.path + "` to see every lock's holder"
	if r.holderPID != 0 {
		// Not for 0 (readers, or a holder unknown): kill -QUIT 0 would
		// signal this process's whole group.
		hint += fmt.Sprintf("; `kill -QUIT %d` dumps a Go holder's goroutines", r.holderPID)
	}
	args = append(args, "hint", hint)
	slog.Warn("lockword: goroutines still waiting for a shared lock past the stuck threshold; the holder process may be stopped, deadlocked, or slow (a live holder is never robbed)", args...)
}
