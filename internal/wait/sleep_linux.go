package wait

import (
	"syscall"
	"time"
	"unsafe" // for go:linkname, and the deadline's address for the system call

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
// acquisition (BENCHMARKS.md, "What stuck reports cost").
//
// The goroutine holds an OS thread while it sleeps, but not a P: it
// enters the system call as one known to block (the runtime's
// entersyscallblock, which hands the P to another thread at once). An
// ordinary system call keeps its P until the runtime's monitor takes it
// back, and the monitor, idle, looks only every 10 ms: with GOMAXPROCS=2
// a sleeping watcher left one P for the lock's goroutines for up to that
// long, and a woken Mutex waiter queued behind a holder that kept
// relocking on the fast path waited 10-20 ms (BENCHMARKS.md, "Mutex and
// SpinMutex"). A signal (EINTR) resumes the sleep to the same deadline.
func SleepThread(d time.Duration) {
	if d <= 0 {
		return
	}
	deadline := unix.NsecToTimespec(MonotonicNs() + int64(d))
	for sleepUntil(&deadline) == syscall.EINTR {
	}
}

// sleepUntil is one clock_nanosleep to the absolute deadline, made as a
// blocking system call. Between entersyscallblock and exitsyscall the
// goroutine must not grow its stack or be instrumented: nosplit and
// norace, as the syscall package's own Syscall.
//
//go:nosplit
//go:norace
func sleepUntil(deadline *unix.Timespec) syscall.Errno {
	entersyscallblock()
	_, _, errno := syscall.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME,
		uintptr(unsafe.Pointer(deadline)), 0, 0, 0)
	exitsyscall()
	return errno
}

// The runtime's entry to and exit from a blocking system call: it keeps
// both linkable from outside packages (their doc comments list the users
// and ask that they stay; go.dev/issue/67401).
//
//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()
