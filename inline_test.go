package lockword

import (
	"testing"

	"github.com/lockword/lockword/internal/locktest"
)

// TestFastPathsInline asserts that the fast paths stay inlinable
// (locktest.CheckInlinable).
func TestFastPathsInline(t *testing.T) { locktest.CheckInlinable(t, fastPaths) }

// fastPaths lists every fast path of this package.
var fastPaths = []string{
	"(*Mutex).Lock", "(*Mutex).Unlock", "(*Mutex).TryLock", "(*Mutex).LockContext",
	"(*SpinMutex).Lock", "(*SpinMutex).Unlock", "(*SpinMutex).TryLock", "(*SpinMutex).LockContext",
	// TicketMutex.Lock needs two atomics and a ticket passed to its slow
	// path, which does not fit the inliner's budget; Unlock does.
	"(*TicketMutex).Unlock",
	"(*RWMutex).RLock", "(*RWMutex).RUnlock",
	// Semaphore's Acquire, TryAcquire and Release load the word, check a
	// weight against it and CAS: a load, a compare and a call with a
	// weight already cost 81 against the inliner's budget of 80. They
	// stay one call each, with no lock and no allocation.
}
