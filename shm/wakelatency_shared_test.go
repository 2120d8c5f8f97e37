//go:build linux

package shm

import (
	"testing"

	"github.com/lockword/lockword/internal/locktest"
)

// The shared kinds hand over between two Region handles on one file, as
// between two processes: each handle has its own owner token and its own
// process-local gate, so the waiter sleeps in the kernel on the shared
// word and only Unlock's FUTEX_WAKE (or its slice) ends the sleep. One
// handle would hand over through the gate, which is in-process waiting.
//
// The bounds sit far below the slice a lost wake-up falls back to.
// Mutex's waiter wakes every sharedStarveNs (1 ms) to file a hand-off
// request, so its bound is a quarter of that, and its hand-off requests
// are turned off here, so that every hand-over goes through the release
// and its FUTEX_WAKE (the grant path has its own tests). The others sleep
// in slices of ownerCheckInterval (10 ms): a tenth of it.
var wakeKinds = []wakeKind{
	wakeKind{Name: "SharedMutex", Bound: sharedStarveNs / 4, New: func(t *testing.T) wakeCase {
		old := sharedHandoffHook
		sharedHandoffHook = func() bool { return false }
		t.Cleanup(func() { sharedHandoffHook = old })
		ma, mb := wakePair(t, (*Region).Mutex)
		return locktest.ExclusiveWake(ma, mb)
	}},
	wakeKind{Name: "SharedTicketMutex", Bound: ownerCheckInterval / 10, New: func(t *testing.T) wakeCase {
		ma, mb := wakePair(t, (*Region).TicketMutex)
		return locktest.ExclusiveWake(ma, mb)
	}},
	wakeKind{Name: "SharedRWMutexWriter", Bound: ownerCheckInterval / 10, New: func(t *testing.T) wakeCase {
		ma, mb := wakePair(t, (*Region).RWMutex)
		return locktest.ExclusiveWake(ma, mb)
	}},
	wakeKind{Name: "SharedRWMutexReader", Bound: ownerCheckInterval / 10, New: func(t *testing.T) wakeCase {
		ma, mb := wakePair(t, (*Region).RWMutex)
		return wakeCase{Lock: ma.Lock, Unlock: ma.Unlock, Wait: mb.RLockContext, WaitUnlock: mb.RUnlock}
	}},
}

// wakePair opens the object "m" through two handles on a new region.
func wakePair[L any](t *testing.T, open func(*Region, string) (L, error)) (L, L) {
	t.Helper()
	path := tempRegionPath(t)
	a := mustCreate(t, path, 0)
	b, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ma, err := open(a, "m")
	if err != nil {
		t.Fatal(err)
	}
	mb, err := open(b, "m")
	if err != nil {
		t.Fatal(err)
	}
	return ma, mb
}
