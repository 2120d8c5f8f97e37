package lockword

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// What the robust locks in regions (SharedMutex, SharedTicketMutex,
// SharedRWMutex) report about themselves: the statistics block that every
// robust kind keeps at SharedMutex's offsets of its first cache line
// (mutexObj*), summed over all processes, and stuck reports naming the
// holder process. The in-process kinds' counterparts are diag.go and
// stuck.go.

func mutexObjStats(obj []byte) Stats {
	return Stats{
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
	for mx, i := word64(obj, mutexObjWaitMaxNs), 0; i < retryLimit; i++ { // statistics only: give up on a word that keeps moving
		old := mx.Load()
		if ns <= old || mx.CompareAndSwap(old, ns) {
			return
		}
	}
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
	return DefaultStuckThreshold, true
}

// logSharedStuck is the stuck report of a robust lock: a goroutine has
// waited past the threshold for a lock whose holder is another process (or
// this one), which is never robbed while it lives.
func logSharedStuck(kind, name, path string, holderPID uint32, alive bool, waited, threshold time.Duration, extra ...any) {
	args := []any{
		"lock", name,
		"kind", kind,
		"region", path,
		"holder_pid", holderPID,
		"holder_alive", alive,
		"waited", waited.Round(time.Millisecond),
		"threshold", threshold,
	}
	args = append(args, extra...)
	args = append(args, "hint", "run `lockword inspect "+path+"` to see every lock's holder; `kill -QUIT <holder_pid>` dumps a Go holder's goroutines")
	slog.Warn("lockword: goroutine still waiting for a shared lock past the stuck threshold; the holder process may be stopped, deadlocked, or slow (a live holder is never robbed)", args...)
}
