//go:build linux

package shm

import (
	"testing"
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
		a, b := wakeRegions(t)
		ma, errA := a.Mutex("m")
		mb, errB := b.Mutex("m")
		wakeMust(t, errA, errB)
		return wakeCase{Lock: ma.Lock, Unlock: ma.Unlock, Wait: mb.LockContext, WaitUnlock: mb.Unlock}
	}},
	wakeKind{Name: "SharedTicketMutex", Bound: ownerCheckInterval / 10, New: func(t *testing.T) wakeCase {
		a, b := wakeRegions(t)
		ma, errA := a.TicketMutex("m")
		mb, errB := b.TicketMutex("m")
		wakeMust(t, errA, errB)
		return wakeCase{Lock: ma.Lock, Unlock: ma.Unlock, Wait: mb.LockContext, WaitUnlock: mb.Unlock}
	}},
	wakeKind{Name: "SharedRWMutexWriter", Bound: ownerCheckInterval / 10, New: func(t *testing.T) wakeCase {
		a, b := wakeRegions(t)
		ma, errA := a.RWMutex("m")
		mb, errB := b.RWMutex("m")
		wakeMust(t, errA, errB)
		return wakeCase{Lock: ma.Lock, Unlock: ma.Unlock, Wait: mb.LockContext, WaitUnlock: mb.Unlock}
	}},
	wakeKind{Name: "SharedRWMutexReader", Bound: ownerCheckInterval / 10, New: func(t *testing.T) wakeCase {
		a, b := wakeRegions(t)
		ma, errA := a.RWMutex("m")
		mb, errB := b.RWMutex("m")
		wakeMust(t, errA, errB)
		return wakeCase{Lock: ma.Lock, Unlock: ma.Unlock, Wait: mb.RLockContext, WaitUnlock: mb.RUnlock}
	}},
}

// wakeRegions returns two handles on a new region.
func wakeRegions(t *testing.T) (*Region, *Region) {
	path := tempRegionPath(t)
	a := mustCreate(t, path, 0)
	b, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

func wakeMust(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
