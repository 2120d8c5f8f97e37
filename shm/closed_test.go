//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// TestUseAfterClose: every exported method that reads shared memory, of
// every kind of handle (locks, condition variable, seqlock, semaphore,
// ring ends, MPSC ends), fails on a closed region with ErrRegionClosed
// naming the call (a panic for the calls that return no error or a bool,
// an error for the others) instead of faulting on the unmapped words. A
// fault is turned into a panic (SetPanicOnFault) so that the table names
// every call that faults, not just the first; under -race a fault in the
// race runtime's atomics still kills the binary (see
// TestInspectSurvivesTruncation), which fails the test too.
func TestUseAfterClose(t *testing.T) {
	r := mustCreate(t, tempRegionPath(t), 0)
	m, _ := r.Mutex("m")
	rw, _ := r.RWMutex("rw")
	tk, _ := r.TicketMutex("tk")
	c, _ := r.Cond("c")
	s, err := r.Semaphore("s", 3)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := NewSeqLock[int64](r, "sl")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := r.RingProducer("ring", MinSharedRingCapacity)
	if err != nil {
		t.Fatal(err)
	}
	co, err := r.RingConsumer("ring", MinSharedRingCapacity)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := r.MPSCProducer("mpsc", MinMPSCCapacity)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := r.MPSCConsumer("mpsc", MinMPSCCapacity)
	if err != nil {
		t.Fatal(err)
	}
	m.Lock() // the fast paths ran on the mapping before the Close
	m.Unlock()
	rw.RLock()
	rw.RUnlock()
	if err := s.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	s.Release(1)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var l sync.Mutex
	l.Lock()
	panics := map[string]func(){
		`Mutex "m".Lock`: m.Lock, `Mutex "m".Unlock`: m.Unlock, `Mutex "m".TryLock`: func() { m.TryLock() },
		`Mutex "m".EnableStats`: m.EnableStats, `Mutex "m".Stats`: func() { m.Stats() },
		`RWMutex "rw".Lock`: rw.Lock, `RWMutex "rw".Unlock`: rw.Unlock, `RWMutex "rw".TryLock`: func() { rw.TryLock() },
		`RWMutex "rw".RLock`: rw.RLock, `RWMutex "rw".RUnlock`: rw.RUnlock, `RWMutex "rw".TryRLock`: func() { rw.TryRLock() },
		`RWMutex "rw".EnableStats`: rw.EnableStats, `RWMutex "rw".Stats`: func() { rw.Stats() },
		`TicketMutex "tk".Lock`: tk.Lock, `TicketMutex "tk".Unlock`: tk.Unlock, `TicketMutex "tk".TryLock`: func() { tk.TryLock() },
		`TicketMutex "tk".EnableStats`: tk.EnableStats, `TicketMutex "tk".Stats`: func() { tk.Stats() },
		`SeqLock "sl".Store`: func() { sl.Store(1) }, `SeqLock "sl".Load`: func() { sl.Load() },
		`Semaphore "s".TryAcquire`: func() { s.TryAcquire(1) }, `Semaphore "s".Release`: func() { s.Release(1) },
		`Semaphore "s".Capacity`: func() { s.Capacity() }, `Semaphore "s".Held`: func() { s.Held() },
		`RingProducer "ring".Stats`: func() { pr.Stats() }, `RingConsumer "ring".Stats`: func() { co.Stats() },
		`RingProducer "ring".Close`: pr.Close, `RingProducer "ring".Detach`: pr.Detach,
		`RingConsumer "ring".Close`: co.Close, `RingConsumer "ring".Detach`: co.Detach,
		`MPSCProducer "mpsc".Close`: mp.Close, `MPSCConsumer "mpsc".Close`: mc.Close, `MPSCConsumer "mpsc".Detach`: mc.Detach,
		`Cond "c".Signal`: c.Signal, `Cond "c".Broadcast`: c.Broadcast, `Cond "c".Wait`: func() { c.Wait(&l) },
	}
	errs := map[string]func() error{
		`Mutex "m".LockContext`: func() error { return m.LockContext(ctx) }, `Mutex "m".MarkConsistent`: m.MarkConsistent,
		`Mutex "m".Reinitialize`: m.Reinitialize, `RWMutex "rw".LockContext`: func() error { return rw.LockContext(ctx) },
		`RWMutex "rw".RLockContext`: func() error { return rw.RLockContext(ctx) }, `RWMutex "rw".MarkConsistent`: rw.MarkConsistent,
		`TicketMutex "tk".LockContext`: func() error { return tk.LockContext(ctx) }, `TicketMutex "tk".MarkConsistent`: tk.MarkConsistent,
		`Cond "c".WaitContext`:                func() error { return c.WaitContext(ctx, m) },
		`SeqLock "sl".LoadContext`:            func() error { _, err := sl.LoadContext(ctx); return err },
		`Semaphore "s".Acquire`:               func() error { return s.Acquire(ctx, 1) },
		`Semaphore "s".AcquireNow`:            func() error { _, err := s.AcquireNow(1); return err },
		`RingProducer "ring".Send`:            func() error { return pr.Send(ctx, []byte("x")) },
		`RingConsumer "ring".Receive`:         func() error { _, err := co.Receive(ctx, nil); return err },
		`MPSCProducer "mpsc".Send`:            func() error { return mp.Send(ctx, []byte("x")) },
		`MPSCProducer "mpsc".TrySend`:         func() error { _, err := mp.TrySend([]byte("x")); return err },
		`MPSCConsumer "mpsc".Receive`:         func() error { _, err := mc.Receive(ctx, nil); return err },
		`MPSCConsumer "mpsc".TryReceive`:      func() error { _, _, err := mc.TryReceive(nil); return err },
		`MPSCConsumer "mpsc".Lost`:            func() error { _, err := mc.Lost(); return err },
		`MPSCConsumer "mpsc".ClaimsRecovered`: func() error { _, err := mc.ClaimsRecovered(); return err },
	}
	// Race builds do not detach (see (*Region).close): the Mutex's and
	// RWMutex's fast paths would fault on the unmapped words.
	raceFaults := func(call string) bool {
		return raceEnabled && (strings.HasPrefix(call, "Mutex ") || strings.HasPrefix(call, "RWMutex "))
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	for call, f := range panics {
		if raceFaults(call) {
			continue
		}
		if got := callAfterClose(func() error { f(); return nil }); !got.panicked || !errors.Is(got.err, ErrRegionClosed) || !strings.Contains(got.err.Error(), call) {
			t.Errorf("%s after Close: %s, want a panic with ErrRegionClosed naming the call", call, got)
		}
	}
	for call, f := range errs {
		if raceFaults(call) {
			continue
		}
		if got := callAfterClose(f); got.panicked || !errors.Is(got.err, ErrRegionClosed) || !strings.Contains(got.err.Error(), call) {
			t.Errorf("%s after Close: %s, want ErrRegionClosed naming the call", call, got)
		}
	}
}

// closedCall is what a call on a closed region did: returned err, or
// panicked with it (a fault, turned into a panic, included).
type closedCall struct {
	panicked bool
	err      error
}

func (c closedCall) String() string {
	if c.panicked {
		return fmt.Sprintf("panicked with %v", c.err)
	}
	return fmt.Sprintf("returned %v", c.err)
}

func callAfterClose(f func() error) (c closedCall) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked = true
			if c.err, _ = p.(error); c.err == nil {
				c.err = fmt.Errorf("%v", p)
			}
		}
	}()
	return closedCall{err: f()}
}
