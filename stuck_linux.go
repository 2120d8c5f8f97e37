package lockword

import (
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// stuckSleepWord is the word the stuck watcher sleeps on: always 0, and
// nobody wakes it, so each sleep ends at its timeout.
var stuckSleepWord atomic.Uint32

// stuckSleep sleeps for d in the kernel (a private futex wait with a
// timeout, a blocking system call) rather than on a runtime timer. While
// any runtime timer is pending, every schedule() on the P that holds it
// reads the clock ((*timers).check), and so does every steal from that P:
// under contention on a fair lock, where each handover parks and wakes a
// goroutine, the watcher's time.Sleep cost 9% of the profile in nanotime
// (BENCHMARKS.md, issue 11.3). A goroutine in a blocking system call
// holds an OS thread (one, for the one watcher) and the runtime hands
// its P to others meanwhile, so the sleep costs the scheduler nothing
// between ticks. A wake-up before d (a spurious return) sleeps again for
// what remains.
func stuckSleep(d time.Duration) {
	deadline := time.Now().Add(d)
	for rem := d; rem > 0; rem = time.Until(deadline) {
		if wait.FutexWait(&stuckSleepWord, 0, rem, wait.Private) == wait.ErrTimeout {
			return
		}
	}
}
