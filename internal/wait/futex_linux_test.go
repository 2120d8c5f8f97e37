package wait

import (
	"sync"
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
// still ends at the original deadline, neither earlier nor later. Each
// resumed timeout is checked against the clock read around the fake
// system calls, not the wall time of the whole wait, which on a loaded
// host any oversleep of the fake's own sleeps would stretch.
func TestFutexWaitEINTRResumesWithRemaining(t *testing.T) {
	const timeout = 100 * time.Millisecond
	saved := futexWaitRaw
	defer func() { futexWaitRaw = saved }()
	type call struct {
		timeout          time.Duration // the timeout FutexWait passed
		called, returned time.Duration // when the fake began and returned, from start
	}
	var calls []call
	var start time.Time
	futexWaitRaw = func(addr *atomic.Uint32, val uint32, op uintptr, ts *unix.Timespec, _ uint32) unix.Errno {
		c := call{timeout: time.Duration(ts.Nano()), called: time.Since(start)}
		defer func() { c.returned = time.Since(start); calls = append(calls, c) }()
		if c.timeout > 25*time.Millisecond && len(calls) < 20 {
			time.Sleep(20 * time.Millisecond) // interrupted part-way
			return unix.EINTR
		}
		time.Sleep(c.timeout)
		return unix.ETIMEDOUT
	}
	// FutexWait fixes its deadline after start and before the first call;
	// before each call it reads the clock after the previous one returned.
	// So call i may ask for at most timeout less the time from the first
	// call to the return of the one before, and at least timeout less the
	// time from start to its own beginning.
	check := func() {
		for i, c := range calls {
			most := timeout
			if i > 0 {
				most -= calls[i-1].returned - calls[0].called
			}
			least := timeout - c.called
			if c.timeout > most || c.timeout < least {
				t.Fatalf("call %d asked for %v, want between %v and %v (what was left): %+v", i, c.timeout, least, most, calls)
			}
		}
	}
	// Timing assumption: in one of five tries the fake's 20 ms sleeps
	// oversleep little enough for the wait to be interrupted at least
	// twice (at load 20 one slept 61 ms: one interruption).
	for try := 0; len(calls) < 3; try++ {
		if try == 5 {
			t.Fatalf("fewer than two interrupted waits in five tries (last: %+v)", calls)
		}
		calls = nil
		var w atomic.Uint32
		start = time.Now()
		err := FutexWait(&w, 0, timeout, Shared)
		elapsed := time.Since(start)
		if err != ErrTimeout {
			t.Fatalf("FutexWait = %v, want ErrTimeout", err)
		}
		if elapsed < timeout {
			t.Fatalf("wait took %v, want at least %v", elapsed, timeout)
		}
		check()
	}
}

// TestFutexWaitEAGAINAndSpuriousReturn: both return nil to the caller's loop.
func TestFutexWaitEAGAINAndSpuriousReturn(t *testing.T) {
	saved := futexWaitRaw
	defer func() { futexWaitRaw = saved }()
	for _, errno := range []unix.Errno{unix.EAGAIN, 0} {
		futexWaitRaw = func(*atomic.Uint32, uint32, uintptr, *unix.Timespec, uint32) unix.Errno { return errno }
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

// TestFutexBitsetWakesOnlyMatchingBits: two sleepers on one word with
// disjoint bitsets; a wake-up for one bit wakes only its sleeper, and a
// plain FutexWake matches every bit.
func TestFutexBitsetWakesOnlyMatchingBits(t *testing.T) {
	for _, scope := range []Scope{Shared, Private} {
		var w, stop atomic.Uint32
		returned := make(chan uint32, 100) // a sleeper's bit, each time it returns
		var done sync.WaitGroup
		for _, bit := range []uint32{1 << 3, 1 << 7} {
			done.Go(func() {
				for stop.Load() == 0 {
					FutexWaitBitset(&w, 0, bit, 10*time.Second, scope)
					returned <- bit
				}
			})
		}
		// Wake bit 7 until a sleeper was in the kernel to be woken; the
		// word stays 0, so woken sleepers go back to sleep.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := FutexWakeBitset(&w, 2, 1<<7, scope)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				if n != 1 {
					t.Fatalf("scope %d: a wake-up for bit 7 woke %d sleepers", scope, n)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the bit-7 sleeper never reached the kernel")
			}
			time.Sleep(time.Millisecond)
		}
		if got := <-returned; got != 1<<7 {
			t.Fatalf("scope %d: a wake-up for bit 7 woke the sleeper of %#x", scope, got)
		}
		select {
		case got := <-returned:
			t.Fatalf("scope %d: the sleeper of %#x returned without a matching wake-up", scope, got)
		case <-time.After(30 * time.Millisecond):
		}
		// A plain wake matches every bit: stop both.
		stop.Store(1)
		w.Store(1)
		FutexWake(&w, 2, scope)
		done.Wait()
	}
}

// TestFutexBitsetCheckerCatchesUnkeyedWake: the checks above must fail
// against a wake-up that ignores keys (FUTEX_BITSET_MATCH_ANY, what a plain
// FUTEX_WAKE does): it wakes the other bit's sleeper too.
func TestFutexBitsetCheckerCatchesUnkeyedWake(t *testing.T) {
	var w atomic.Uint32
	returned := make(chan uint32, 2)
	for _, bit := range []uint32{1 << 3, 1 << 7} {
		go func() {
			for FutexWaitBitset(&w, 0, bit, 10*time.Second, Shared) == nil && w.Load() == 0 {
			}
			returned <- bit
		}()
	}
	// Once both are in the kernel, one unkeyed wake wakes both, which the
	// keyed check ("n != 1") reports. (A sleeper woken alone goes back to
	// sleep: count one call's wake-ups, not a sum over calls.)
	most := 0
	for deadline := time.Now().Add(5 * time.Second); most < 2 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n, _ := FutexWakeBitset(&w, 2, ^uint32(0), Shared)
		most = max(most, n)
	}
	w.Store(1)
	FutexWake(&w, 2, Shared)
	<-returned
	<-returned
	if most != 2 {
		t.Fatalf("an unkeyed wake-up woke at most %d sleepers at once, want both: the check could not tell keyed from unkeyed", most)
	}
}

func TestFutexBitsetTimeoutAndErrors(t *testing.T) {
	var w atomic.Uint32
	start := time.Now()
	if err := FutexWaitBitset(&w, 0, 1, 30*time.Millisecond, Shared); err != ErrTimeout {
		t.Fatalf("FutexWaitBitset = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 2*time.Second {
		t.Fatalf("timed out after %v, want about 30ms", d)
	}
	if err := FutexWaitBitset(&w, 1, 1, time.Second, Shared); err != nil {
		t.Fatalf("value mismatch: %v, want nil", err)
	}
	if err := FutexWaitBitset(&w, 0, 0, time.Second, Shared); err != ErrZeroBitset {
		t.Fatalf("bitset 0: %v", err)
	}
	if _, err := FutexWakeBitset(&w, 1, 0, Shared); err != ErrZeroBitset {
		t.Fatalf("wake bitset 0: %v", err)
	}
	if n, err := FutexWakeBitset(&w, 1, 1, Shared); n != 0 || err != nil {
		t.Fatalf("wake with no sleepers: %d, %v", n, err)
	}
}

// TestFutexBitsetEINTRKeepsDeadline: interrupted bitset waits resume with
// the same absolute deadline, so the whole wait ends on time.
func TestFutexBitsetEINTRKeepsDeadline(t *testing.T) {
	saved := futexWaitRaw
	defer func() { futexWaitRaw = saved }()
	var deadlines []int64
	futexWaitRaw = func(addr *atomic.Uint32, val uint32, op uintptr, ts *unix.Timespec, bitset uint32) unix.Errno {
		if op&^futexPrivateFlag != futexWaitBitset || bitset != 1<<5 {
			t.Errorf("op %d bitset %#x", op, bitset)
		}
		deadlines = append(deadlines, ts.Nano())
		if len(deadlines) < 3 {
			return unix.EINTR
		}
		return unix.ETIMEDOUT
	}
	var w atomic.Uint32
	before := MonotonicNs()
	if err := FutexWaitBitset(&w, 0, 1<<5, 100*time.Millisecond, Shared); err != ErrTimeout {
		t.Fatalf("FutexWaitBitset = %v", err)
	}
	if len(deadlines) != 3 || deadlines[0] != deadlines[2] || deadlines[0] < before+int64(100*time.Millisecond) {
		t.Fatalf("deadlines %v (started at %d): want one absolute deadline 100ms on", deadlines, before)
	}
}

// TestMonotonicNsIsTheKernelClock: the cached reading tracks
// CLOCK_MONOTONIC, which the kernel compares bitset deadlines against.
func TestMonotonicNsIsTheKernelClock(t *testing.T) {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	if d := MonotonicNs() - ts.Nano(); d < -int64(50*time.Millisecond) || d > int64(50*time.Millisecond) {
		t.Fatalf("MonotonicNs is %v away from CLOCK_MONOTONIC", time.Duration(d))
	}
}
