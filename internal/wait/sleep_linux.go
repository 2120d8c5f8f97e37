package wait

import (
	"time"

	"golang.org/x/sys/unix"
)

// SleepThread sleeps for d in the kernel (clock_nanosleep on
// CLOCK_MONOTONIC to an absolute deadline, a blocking system call) rather
// than on a runtime timer, for a goroutine that wakes periodically for as
// long as others contend (the stuck watcher). While any runtime timer is
// pending, every schedule() on the P that holds it, and every steal from
// that P, reads the clock ((*timers).check): under contention on a fair
// lock, where each handover parks one goroutine and readies another, the
// stuck watcher's time.Sleep cost TicketMutex 11-14% of its CPU time per
// acquisition (BENCHMARKS.md, "What stuck reports cost"). The goroutine holds an OS
// thread while it sleeps and the runtime hands its P to others. A signal
// (EINTR) resumes the sleep to the same deadline.
func SleepThread(d time.Duration) {
	if d <= 0 {
		return
	}
	deadline := unix.NsecToTimespec(MonotonicNs() + int64(d))
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &deadline, nil) == unix.EINTR {
	}
}
