package shm

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
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
