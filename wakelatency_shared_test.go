//go:build linux

package lockword

import (
	"testing"
	"time"
)

// The shared kinds' bounds sit far below the slice a lost wake-up falls
// back to. SharedMutex's waiter wakes every sharedStarveNs (1 ms) to file a
// hand-off request, so its bound is a quarter of that, and its hand-off
// requests are turned off here, so that every hand-over goes through the
// release and its FUTEX_WAKE (the grant path has its own tests). The
// others sleep in slices of ownerCheckInterval (10 ms).
func init() {
	wakeKinds = append(wakeKinds,
		wakeKind{"SharedMutex", sharedStarveNs / 4, func(t *testing.T) wakeCase {
			old := sharedHandoffHook
			sharedHandoffHook = func() bool { return false }
			t.Cleanup(func() { sharedHandoffHook = old })
			m, err := mustCreate(t, tempRegionPath(t), 0).Mutex("m")
			if err != nil {
				t.Fatal(err)
			}
			return wakeCase{m.Lock, m.Unlock, m.LockContext, m.Unlock}
		}},
		wakeKind{"SharedTicketMutex", time.Millisecond, func(t *testing.T) wakeCase {
			m, err := mustCreate(t, tempRegionPath(t), 0).TicketMutex("m")
			if err != nil {
				t.Fatal(err)
			}
			return wakeCase{m.Lock, m.Unlock, m.LockContext, m.Unlock}
		}},
		wakeKind{"SharedRWMutex/writer", time.Millisecond, func(t *testing.T) wakeCase {
			m, err := mustCreate(t, tempRegionPath(t), 0).RWMutex("m")
			if err != nil {
				t.Fatal(err)
			}
			return wakeCase{m.Lock, m.Unlock, m.LockContext, m.Unlock}
		}},
		wakeKind{"SharedRWMutex/reader", time.Millisecond, func(t *testing.T) wakeCase {
			m, err := mustCreate(t, tempRegionPath(t), 0).RWMutex("m")
			if err != nil {
				t.Fatal(err)
			}
			return wakeCase{m.Lock, m.Unlock, m.RLockContext, m.RUnlock}
		}},
	)
}
