package lockword

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Owner death, as every robust lock in a region (SharedMutex,
// SharedTicketMutex, SharedRWMutex, a region SeqLock's writers) reports
// it: ErrOwnerDead and ErrNotRecoverable, OwnerDeadError, and the repair
// step of the sync.Locker methods (Lock cannot return an error).

var (
	// ErrOwnerDead is returned, together with the lock, when the previous
	// holder process died while holding it (POSIX EOWNERDEAD). The caller
	// holds the lock, must bring the protected data back to a consistent
	// state, then call MarkConsistent before Unlock. Unlocking without
	// MarkConsistent makes the lock not recoverable.
	ErrOwnerDead = errors.New("lockword: previous holder of the shared lock died while holding it; repair the data, then call MarkConsistent")
	// ErrNotRecoverable is returned by every acquisition of a lock whose
	// holder, after an owner death, unlocked it without calling
	// MarkConsistent (POSIX ENOTRECOVERABLE). The caller does not hold the
	// lock; the data it protects cannot be trusted. The way out: restore
	// the data by other means, then SharedMutex.Reinitialize (or use a new
	// object name, or a new region).
	ErrNotRecoverable = errors.New("lockword: shared lock is not recoverable: after an owner death it was unlocked without MarkConsistent (or Lock had no repair function)")
)

// OwnerDeadError is the error LockContext returns, with the lock held,
// when the previous holder died holding it. errors.Is(err, ErrOwnerDead)
// holds for it; errors.As gives the dead holder's PID.
type OwnerDeadError struct {
	Lock, Region string // the lock's name and its region's path
	// PID is the dead holder's process ID, or 0 if it is unknown: the
	// holder's process-table slot was reclaimed by another process
	// before the death was noticed, and its identity went with it.
	PID int
}

// Error names the lock, its region and the dead holder.
func (e *OwnerDeadError) Error() string {
	return fmt.Sprintf("%v (lock %q in %s; previous holder PID %s)", ErrOwnerDead, e.Lock, e.Region, pidText(uint32(e.PID)))
}

// pidText formats a holder's PID for messages: "unknown" for 0.
func pidText(pid uint32) string {
	if pid == 0 {
		return "unknown"
	}
	return fmt.Sprint(pid)
}

// Is reports whether target is ErrOwnerDead.
func (e *OwnerDeadError) Is(target error) bool { return target == ErrOwnerDead }

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
