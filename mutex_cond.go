package lockword

import "runtime"

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
	if new := m.state.Add(^uint32(0)); new != mutexUnlocked { // Unlock's decrement
		return m.release(new) > 0
	}
	return false
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
