package wait

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex(2) operations. x/sys/unix has SYS_FUTEX but not these.
const (
	futexWait        = 0
	futexWake        = 1
	futexPrivateFlag = 128
)

// futexWaitRaw performs one FUTEX_WAIT. It is a variable so that tests can
// feed FutexWait the EINTR and EAGAIN returns that are hard to provoke.
var futexWaitRaw = func(addr *atomic.Uint32, val uint32, op uintptr, ts *unix.Timespec) unix.Errno {
	// Syscall6, not RawSyscall6: the wait may block for long, and the Go
	// scheduler must be told so that it can hand this thread's P to
	// another goroutine. A raw blocking futex wait starves the scheduler.
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), op,
		uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
	return errno
}

func opFor(op uintptr, scope Scope) uintptr {
	if scope == Private {
		return op | futexPrivateFlag
	}
	return op
}

// FutexWait sleeps in the kernel while *addr == val, for at most timeout
// (a negative timeout waits without limit). It returns nil when woken, when
// *addr did not hold val (EAGAIN), or spuriously; ErrTimeout when the
// timeout elapsed. Callers loop and re-check the word.
//
// The timeout is measured on the monotonic clock (the kernel's FUTEX_WAIT
// timeout is relative and monotonic; our remaining-time arithmetic uses Go's
// monotonic reading), so setting the wall clock neither shortens nor
// lengthens a wait. A signal (EINTR) resumes the wait with the time that
// remains, not the whole timeout again.
//
// The calling goroutine occupies an OS thread while it sleeps.
func FutexWait(addr *atomic.Uint32, val uint32, timeout time.Duration, scope Scope) error {
	op := opFor(futexWait, scope)
	if timeout < 0 {
		for {
			switch futexWaitRaw(addr, val, op, nil) {
			case unix.EINTR:
				// Resume: an untimed wait has no remaining time to lose.
				if addr.Load() != val {
					return nil
				}
			default:
				// 0 (woken), EAGAIN (value changed) or anything else: the
				// caller re-checks the word.
				return nil
			}
		}
	}
	deadline := time.Now().Add(timeout)
	remaining := timeout
	for {
		if remaining <= 0 {
			return ErrTimeout
		}
		ts := unix.NsecToTimespec(int64(remaining))
		switch futexWaitRaw(addr, val, op, &ts) {
		case unix.ETIMEDOUT:
			return ErrTimeout
		case unix.EINTR:
			if addr.Load() != val {
				return nil
			}
			remaining = time.Until(deadline) // monotonic
		default:
			return nil
		}
	}
}

// FutexWake wakes up to n kernel waiters on addr and returns how many it
// woke.
func FutexWake(addr *atomic.Uint32, n int, scope Scope) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	if n > 1<<31-1 {
		n = 1<<31 - 1
	}
	// RawSyscall6 is fine here: FUTEX_WAKE never blocks.
	r, _, errno := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)),
		opFor(futexWake, scope), uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
