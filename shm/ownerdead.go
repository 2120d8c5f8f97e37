package shm

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/lockword/lockword"
)

// The repair step of the sync.Locker methods of the robust locks (Lock
// cannot return an error). ErrOwnerDead, ErrNotRecoverable and
// OwnerDeadError are the root package's: etcdlock returns them too.

// pidText formats a holder's PID for messages: "unknown" for 0.
func pidText(pid uint32) string {
	if pid == 0 {
		return "unknown"
	}
	return fmt.Sprint(pid)
}

// repairAfterLocker finishes a sync.Locker-style acquisition (Lock, which
// cannot return an error) that returned err: on ErrOwnerDead it runs the
// repair function, holding the lock, and marks the lock consistent. With
// no repair function, or one that fails or panics, it gives the lock up
// unmarked with giveUp (so it becomes not recoverable, as POSIX has it: a
// caller that recovers the panic must not go on holding it with every
// waiter stuck) and panics; any other error (not recoverable: not held)
// panics as it is. See Mutex, "Owner death and sync.Locker".
func repairAfterLocker(err error, repair *atomic.Pointer[func() error], markConsistent func() error, giveUp func()) {
	if err == nil {
		return
	}
	if !errors.Is(err, lockword.ErrOwnerDead) {
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
			[]error{err, lockword.ErrNotRecoverable}})
	}
	if rerr := (*fn)(); rerr != nil {
		panic(&lockerPanic{err.Error() + "; the repair function failed: " + rerr.Error() + gaveUp,
			[]error{err, rerr, lockword.ErrNotRecoverable}})
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
