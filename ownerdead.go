package lockword

import (
	"errors"
	"fmt"
)

// Owner death, as every robust lock reports it, in a shared-memory region
// (package shm) and on etcd (package etcdlock): ErrOwnerDead and
// ErrNotRecoverable, and OwnerDeadError. They live here, in the root
// package, because both halves return them.

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
	// the data by other means, then shm.Mutex.Reinitialize (or use a new
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
