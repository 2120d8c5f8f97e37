package lockword

import (
	"runtime"

	"github.com/lockword/lockword/internal/wait"
)

// unlockToPark is Unlock for a Cond waiter that parks as soon as it has
// released m (Cond.Wait): it does not yield its processor after waking a
// waiter of m, as Unlock does (yieldIfWoke), because the park that follows
// gives the processor up anyway, and the woken goroutine, readied on this
// processor (runnext), runs at once. The yield would instead put the
// waiter on the global run queue and make it wait there before it can
// park: in a Broadcast's stampede every re-lock of L that wakes a
// sleeper paid a Gosched and a trip through the scheduler for nothing.
// It reports whether it woke a waiter, so that a caller which does not
// park after all (its ticket was notified meanwhile) yields as Unlock
// would. Everything else (misuse panic, hand-off to a starving waiter,
// deadlock tracking) is Unlock's.
func (m *Mutex) unlockToPark() (woke bool) {
	if deadlockBuilt && lockTracking.Load() != 0 {
		trackRelease(m) // before the release: see trackRelease
	}
	new := m.state.Add(^uint32(0)) // Unlock's decrement (Drepper's mutex #3)
	if new == mutexUnlocked {
		return false
	}
	if (new+1)&mutexStateMask != mutexContended {
		m.unlockSlow(new) // misuse, or a flag kept the word nonzero: nothing to wake
		return false
	}
	// Now 1, as in unlockSlow: hand over to a starving waiter or release
	// and wake one sleeper, the same CASes, without the yield.
	for old := new; ; old = m.state.Load() {
		if old&mutexStarverMask != 0 {
			if m.state.CompareAndSwap(old, old&^mutexStateMask|mutexContended|mutexHandoff) {
				return wait.WakeKey(&m.state, mutexStarveKey, 1) != 0
			}
			continue
		}
		if m.state.CompareAndSwap(old, old&^mutexStateMask) {
			return wait.Wake(&m.state, 1) != 0
		}
	}
}

// yieldUnlessParking yields the processor (as Unlock does after a
// wake-up) when unlockToPark woke a waiter but the caller will not park:
// its notify-list ticket t was already notified, so runtimeNotifyListWait
// returns at once.
func (c *Cond) yieldUnlessParking(woke bool, t uint32) {
	if woke && condBefore(t, c.notified()) {
		runtime.Gosched()
	}
}
