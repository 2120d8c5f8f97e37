package torture

// The core torture kinds: the library's two mutexes, the standard library's
// as the reference, and none, the deliberately broken lock that proves the
// checks can fail.
//
// To add a kind, add a file kinds_<name>.go with an init function that
// calls register. A lock that is a sync.Locker needs only lockerKind and a
// constructor, as below; a lock with another shape (a reader-writer lock, a
// lock in shared memory driven by child processes) gives kind.run its own
// function, built on hammer where it can, and fills in a report.

import (
	"sync"

	"github.com/lockword/lockword"
)

// init registers the core kinds, in the order of the help and of all.
func init() {
	register(
		lockerKind("mutex", "lockword.Mutex: three-state futex mutex (Drepper), spins, then parks", true,
			func() lockerTarget {
				m := new(lockword.Mutex)
				m.SetName("lockword torture: mutex") // for the library's stuck reports
				m.EnableStats()
				return lockerTarget{lock: m, stats: m.Stats}
			}),
		lockerKind("spin", "lockword.SpinMutex: test-and-test-and-set with backoff, yields, then parks", true,
			func() lockerTarget {
				s := new(lockword.SpinMutex)
				s.SetName("lockword torture: spin")
				s.EnableStats()
				return lockerTarget{lock: s, stats: s.Stats}
			}),
		lockerKind("sync", "sync.Mutex from the standard library, the reference", true,
			func() lockerTarget {
				return lockerTarget{lock: new(sync.Mutex), noStats: "sync.Mutex keeps no statistics"}
			}),
		lockerKind("none", "no lock at all (Lock and Unlock do nothing): must FAIL", false,
			func() lockerTarget {
				return lockerTarget{lock: noLock{}, noStats: "no lock, nothing to measure", unprotected: true}
			}),
	)
}

// noLock is a sync.Locker that excludes nothing: the torture's broken lock,
// run to show that the checks catch a lock that does not work (the Linux
// kernel's locktorture ships lock_busted for the same reason).
type noLock struct{}

// Lock does nothing.
func (noLock) Lock() {}

// Unlock does nothing.
func (noLock) Unlock() {}
