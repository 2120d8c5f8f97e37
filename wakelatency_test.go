package lockword

import (
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// Wake latency: a waiter asleep on a held lock must run soon after Unlock,
// not at the end of a sleep slice or never. A lost wake-up in an
// in-process lock hangs (the waiter parks with no timeout), and in a shared
// lock it hides as latency behind the waiter's sleep slice (1 ms for
// SharedMutex, 10 ms for the ticket queue and the RW lock), so no
// correctness test sees it; only the median hand-over time does, fast.
//
// Each hand-over: the test holds the lock, a waiter calls its lock with a
// context, the test waits locktest.WakeHold for it to fall asleep, notes the time
// and unlocks; the waiter notes the time it got the lock. A waiter not
// running within locktest.WakeSampleCap counts as that cap (its context is
// cancelled, so a lost wake-up costs one cap, not a hang).
//
// The timing assumption, for a loaded host: a woken waiter usually runs
// within its bound (tens of microseconds on an idle machine: an in-process
// waiter is readied onto the unlocking goroutine's P, which then blocks; a
// kernel sleeper is a futex wake-up, which the scheduler favours). A loaded
// host delays some hand-overs by whole scheduler slices, but not most of
// them, so the median, unlike the maximum, stays far below the slice that
// a lost wake-up falls back to. A failed median is measured again, up to
// locktest.WakeAttempts times: the measurement is retried, never the bound.
// wakeCase and wakeKind are locktest's, with positional literals.
type (
	wakeCase = locktest.WakeCase
	wakeKind = locktest.WakeKind
)

// wakeKinds are the in-process locks; Linux appends the shared ones
// (wakelatency_shared_test.go).
var wakeKinds = []wakeKind{
	{Name: "Mutex", Bound: time.Millisecond, New: func(*testing.T) wakeCase {
		m := new(Mutex)
		return locktest.ExclusiveWake(m, m)
	}},
	{Name: "SpinMutex", Bound: time.Millisecond, New: func(*testing.T) wakeCase {
		m := new(SpinMutex)
		return locktest.ExclusiveWake(m, m)
	}},
	{Name: "TicketMutex", Bound: time.Millisecond, New: func(*testing.T) wakeCase {
		m := new(TicketMutex)
		return locktest.ExclusiveWake(m, m)
	}},
	{Name: "RWMutexWriter", Bound: time.Millisecond, New: func(*testing.T) wakeCase {
		m := new(RWMutex)
		return locktest.ExclusiveWake(m, m)
	}},
	{Name: "RWMutexReader", Bound: time.Millisecond, New: func(*testing.T) wakeCase {
		m := new(RWMutex)
		return wakeCase{Lock: m.Lock, Unlock: m.Unlock, Wait: m.RLockContext, WaitUnlock: m.RUnlock}
	}},
}

func TestWakeLatency(t *testing.T) { locktest.CheckWakeLatency(t, wakeKinds) }
