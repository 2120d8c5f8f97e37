package lockword

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// Helpers shared by the robust locks in regions (SharedMutex,
// SharedTicketMutex, SharedRWMutex): the statistics block and held-since
// stamp that every robust kind keeps at the same offsets of its first cache
// line (mutexObj*), stuck reports naming the holder process, and the repair
// step of the sync.Locker methods.

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

// repairAfterLocker finishes a sync.Locker-style acquisition (Lock, which
// cannot return an error) that returned err: on ErrOwnerDead it runs the
// repair function, holding the lock, and marks the lock consistent. With
// no repair function, or one that fails or panics, it gives the lock up
// unmarked with giveUp (so it becomes not recoverable, as POSIX has it: a
// caller that recovers the panic must not go on holding it with every
// waiter stuck) and panics; any other error (not recoverable: not held)
// panics as it is. See SharedMutex, "Owner death and sync.Locker".
func repairAfterLocker(err error, repair *atomic.Pointer[func() error], markConsistent func() error, giveUp func()) {
	if err == nil {
		return
	}
	if !errors.Is(err, ErrOwnerDead) {
		panic(err) // not recoverable: not held
	}
	repaired := false
	defer func() {
		if !repaired {
			giveUp()
		}
	}()
	const gaveUp = "; Lock released it unrepaired, so it is not recoverable now"
	fn := repair.Load()
	if fn == nil {
		panic(&lockerPanic{err.Error() + "; Lock has no repair function (use LockContext, or SetRepair)" + gaveUp,
			[]error{err, ErrNotRecoverable}})
	}
	if rerr := (*fn)(); rerr != nil {
		panic(&lockerPanic{err.Error() + "; the repair function failed: " + rerr.Error() + gaveUp,
			[]error{err, rerr, ErrNotRecoverable}})
	}
	if cerr := markConsistent(); cerr != nil {
		panic(cerr)
	}
	repaired = true
}

// lockerPanic is what Lock panics with when it gave up a lock taken from a
// dead owner: one message, and errors.Is with each of errs.
type lockerPanic struct {
	msg  string
	errs []error
}

func (e *lockerPanic) Error() string   { return e.msg }
func (e *lockerPanic) Unwrap() []error { return e.errs }

// setRepair stores fn for repairAfterLocker; nil removes it.
func setRepair(repair *atomic.Pointer[func() error], fn func() error) {
	if fn == nil {
		repair.Store(nil)
		return
	}
	repair.Store(&fn)
}
