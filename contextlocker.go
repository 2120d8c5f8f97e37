package lockword

import "context"

// A ContextLocker is a lock whose acquisition can be cancelled and can
// report errors: Mutex, SpinMutex, TicketMutex, RWMutex's write side,
// shm.Mutex, shm.TicketMutex, and a shm.RWMutex's write side. shm.Cond.WaitContext re-locks one with
// LockContext so that an owner death is reported, not hidden.
type ContextLocker interface {
	LockContext(ctx context.Context) error
	Unlock()
}
