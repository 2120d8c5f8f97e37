package wait

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex(2) operations. x/sys/unix has SYS_FUTEX but not these.
const (
	futexWait        = 0
	futexWake        = 1
	futexWaitBitset  = 9
	futexWakeBitset  = 10
	futexPrivateFlag = 128
)

// futexWaitRaw performs one FUTEX_WAIT or FUTEX_WAIT_BITSET (bitset is the
// syscall's val3, which FUTEX_WAIT ignores). It is a variable so that tests
// can feed the wait functions the EINTR and EAGAIN returns that are hard to
// provoke.
var futexWaitRaw = func(addr *atomic.Uint32, val uint32, op uintptr, ts *unix.Timespec, bitset uint32) unix.Errno {
	// Syscall6, not RawSyscall6: the wait may block for long, and the Go
	// scheduler must be told so that it can hand this thread's P to
	// another goroutine. A raw blocking futex wait starves the scheduler.
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), op,
		uintptr(val), uintptr(unsafe.Pointer(ts)), 0, uintptr(bitset))
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
			switch futexWaitRaw(addr, val, op, nil, 0) {
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
		switch futexWaitRaw(addr, val, op, &ts, 0) {
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

// FutexWaitBitset is FutexWait for a waiter that only wakes whose bitset
// shares a bit with its own: it sleeps while *addr == val, for at most
// timeout (negative: without limit), and FutexWakeBitset(addr, n, b) wakes
// it only if b&bitset != 0 (FUTEX_WAIT_BITSET). A lock keys its sleepers by
// a bit, as a ticket lock does with 1<<(ticket%32), so that a wake-up goes
// to the sleeper it is for rather than to every sleeper of the word; a
// plain FutexWake wakes bitset sleepers too (it matches every bit). It
// returns as FutexWait does, and ErrZeroBitset for a bitset of 0, which
// could never be woken.
//
// The kernel takes an absolute CLOCK_MONOTONIC deadline for this
// operation, computed once: a signal (EINTR) resumes the wait with the same
// deadline.
func FutexWaitBitset(addr *atomic.Uint32, val, bitset uint32, timeout time.Duration, scope Scope) error {
	if bitset == 0 {
		return ErrZeroBitset
	}
	op := opFor(futexWaitBitset, scope)
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(MonotonicNs() + int64(timeout))
		ts = &t
	}
	for {
		switch futexWaitRaw(addr, val, op, ts, bitset) {
		case unix.ETIMEDOUT:
			return ErrTimeout
		case unix.EINTR:
			if addr.Load() != val {
				return nil
			}
		default:
			return nil
		}
	}
}

// FutexWakeBitset wakes up to n kernel waiters on addr whose bitset shares
// a bit with bitset (FUTEX_WAKE_BITSET) and returns how many it woke.
// Waiters of plain FutexWait match every bit.
func FutexWakeBitset(addr *atomic.Uint32, n int, bitset uint32, scope Scope) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	if bitset == 0 {
		return 0, ErrZeroBitset
	}
	n = min(n, 1<<31-1)
	r, _, errno := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)),
		opFor(futexWakeBitset, scope), uintptr(n), 0, 0, uintptr(bitset))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// MonotonicNs reads CLOCK_MONOTONIC in ns: the clock of FUTEX_WAIT_BITSET
// deadlines, and one that every process on the machine shares. The
// clock_gettime system call costs microseconds on some hosts (x/sys/unix
// does not go through the vDSO), so it is read once and Go's monotonic
// clock, which is the same CLOCK_MONOTONIC read through the vDSO, advances
// it.
func MonotonicNs() int64 {
	monoBase.once.Do(func() {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		monoBase.at, monoBase.ns = time.Now(), ts.Nano()
	})
	return monoBase.ns + int64(time.Since(monoBase.at))
}

var monoBase struct {
	once sync.Once
	at   time.Time
	ns   int64
}
