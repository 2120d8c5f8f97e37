package wait

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestFutexWaitValueMismatch(t *testing.T) {
	for _, scope := range []Scope{Shared, Private} {
		var w atomic.Uint32
		w.Store(7)
		if err := FutexWait(&w, 0, time.Second, scope); err != nil {
			t.Fatalf("scope %d: FutexWait on changed word = %v, want nil (EAGAIN)", scope, err)
		}
	}
}

func TestFutexWaitTimeout(t *testing.T) {
	for _, scope := range []Scope{Shared, Private} {
		var w atomic.Uint32
		start := time.Now()
		err := FutexWait(&w, 0, 30*time.Millisecond, scope)
		d := time.Since(start)
		if err != ErrTimeout {
			t.Fatalf("scope %d: FutexWait = %v, want ErrTimeout", scope, err)
		}
		if d < 30*time.Millisecond || d > 2*time.Second {
			t.Fatalf("scope %d: timed out after %v, want about 30ms", scope, d)
		}
	}
}

func TestFutexWake(t *testing.T) {
	for _, scope := range []Scope{Shared, Private} {
		var w atomic.Uint32
		done := make(chan error)
		go func() {
			for w.Load() == 0 {
				if err := FutexWait(&w, 0, 10*time.Second, scope); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		// Wake until the waiter has been seen by the kernel and woken.
		time.Sleep(10 * time.Millisecond)
		w.Store(1)
		n, err := FutexWake(&w, 1, scope)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("scope %d: waiter: %v (woke %d)", scope, err, n)
		}
	}
}

func TestFutexWakeNoWaiters(t *testing.T) {
	var w atomic.Uint32
	if n, err := FutexWake(&w, 3, Shared); n != 0 || err != nil {
		t.Fatalf("FutexWake = %d, %v", n, err)
	}
	if n, err := FutexWake(&w, 0, Shared); n != 0 || err != nil {
		t.Fatalf("FutexWake(0) = %d, %v", n, err)
	}
}

// TestFutexWaitEINTRResumesWithRemaining feeds FutexWait interrupted waits:
// each EINTR must resume with the time that remains, so the whole wait
// still ends at the original deadline, neither earlier nor much later.
func TestFutexWaitEINTRResumesWithRemaining(t *testing.T) {
	saved := futexWaitRaw
	defer func() { futexWaitRaw = saved }()
	var timeouts []time.Duration
	futexWaitRaw = func(addr *atomic.Uint32, val uint32, op uintptr, ts *unix.Timespec) unix.Errno {
		d := time.Duration(ts.Nano())
		timeouts = append(timeouts, d)
		if d > 25*time.Millisecond {
			time.Sleep(20 * time.Millisecond) // interrupted part-way
			return unix.EINTR
		}
		time.Sleep(d)
		return unix.ETIMEDOUT
	}
	var w atomic.Uint32
	start := time.Now()
	err := FutexWait(&w, 0, 100*time.Millisecond, Shared)
	elapsed := time.Since(start)
	if err != ErrTimeout {
		t.Fatalf("FutexWait = %v, want ErrTimeout", err)
	}
	if elapsed < 100*time.Millisecond || elapsed > 200*time.Millisecond {
		t.Fatalf("wait took %v, want about 100ms", elapsed)
	}
	for i := 1; i < len(timeouts); i++ {
		if timeouts[i] >= timeouts[i-1] {
			t.Fatalf("after EINTR the timeout did not shrink: %v", timeouts)
		}
	}
	if len(timeouts) < 3 {
		t.Fatalf("expected several interrupted waits, got %v", timeouts)
	}
}

// TestFutexWaitEAGAINAndSpuriousReturn: both return nil to the caller's loop.
func TestFutexWaitEAGAINAndSpuriousReturn(t *testing.T) {
	saved := futexWaitRaw
	defer func() { futexWaitRaw = saved }()
	for _, errno := range []unix.Errno{unix.EAGAIN, 0} {
		futexWaitRaw = func(*atomic.Uint32, uint32, uintptr, *unix.Timespec) unix.Errno { return errno }
		var w atomic.Uint32
		if err := FutexWait(&w, 0, time.Second, Shared); err != nil {
			t.Fatalf("errno %v: FutexWait = %v, want nil", errno, err)
		}
		if err := FutexWait(&w, 0, -1, Private); err != nil {
			t.Fatalf("errno %v: untimed FutexWait = %v, want nil", errno, err)
		}
	}
}

// TestFutexWaitUnderSignals waits in the real kernel while signals rain on
// the process; the wait must end at its deadline, not restart from scratch.
func TestFutexWaitUnderSignals(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				syscall.Kill(syscall.Getpid(), syscall.SIGURG) // Go ignores SIGURG
				time.Sleep(500 * time.Microsecond)
			}
		}
	}()
	var w atomic.Uint32
	start := time.Now()
	err := FutexWait(&w, 0, 150*time.Millisecond, Shared)
	elapsed := time.Since(start)
	if err != ErrTimeout {
		t.Fatalf("FutexWait = %v, want ErrTimeout", err)
	}
	if elapsed < 150*time.Millisecond || elapsed > 1500*time.Millisecond {
		t.Fatalf("wait under signals took %v, want about 150ms", elapsed)
	}
}
