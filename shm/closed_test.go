//go:build linux

package shm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestUseAfterClose: every call on a lock, condition variable, seqlock or
// ring end handle of
// a closed region fails with ErrRegionClosed and the call's name (a panic
// for the calls that return no error, an error for the others) instead of
// faulting on the unmapped words.
func TestUseAfterClose(t *testing.T) {
	r := mustCreate(t, tempRegionPath(t), 0)
	m, _ := r.Mutex("m")
	rw, _ := r.RWMutex("rw")
	tk, _ := r.TicketMutex("tk")
	c, _ := r.Cond("c")
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
	m.Lock() // the fast paths ran on the mapping before the Close
	m.Unlock()
	rw.RLock()
	rw.RUnlock()
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
		`TicketMutex "tk".Lock`: tk.Lock, `TicketMutex "tk".Unlock`: tk.Unlock, `TicketMutex "tk".TryLock`: func() { tk.TryLock() },
		`SeqLock "sl".Store`: func() { sl.Store(1) }, `SeqLock "sl".Load`: func() { sl.Load() },
		`RingProducer "ring".Close`: pr.Close, `RingConsumer "ring".Detach`: co.Detach,
		`Cond "c".Signal`: c.Signal, `Cond "c".Broadcast`: c.Broadcast, `Cond "c".Wait`: func() { c.Wait(&l) },
	}
	if raceEnabled {
		// Race builds do not detach (see (*Region).close): the Mutex's and
		// RWMutex's fast paths would fault on the unmapped words.
		for call := range panics {
			if strings.HasPrefix(call, "Mutex ") || strings.HasPrefix(call, "RWMutex ") {
				delete(panics, call)
			}
		}
	}
	for call, f := range panics {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ErrRegionClosed) || !strings.Contains(err.Error(), call) {
					t.Errorf("%s after Close panicked with %v, want ErrRegionClosed naming the call", call, err)
				}
			}()
			f()
		}()
	}
	errs := map[string]func() error{
		`Mutex "m".LockContext`: func() error { return m.LockContext(ctx) }, `Mutex "m".MarkConsistent`: m.MarkConsistent,
		`Mutex "m".Reinitialize`: m.Reinitialize, `RWMutex "rw".LockContext`: func() error { return rw.LockContext(ctx) },
		`RWMutex "rw".RLockContext`: func() error { return rw.RLockContext(ctx) }, `RWMutex "rw".MarkConsistent`: rw.MarkConsistent,
		`TicketMutex "tk".LockContext`: func() error { return tk.LockContext(ctx) }, `TicketMutex "tk".MarkConsistent`: tk.MarkConsistent,
		`Cond "c".WaitContext`:        func() error { return c.WaitContext(ctx, m) },
		`SeqLock "sl".LoadContext`:    func() error { _, err := sl.LoadContext(ctx); return err },
		`RingProducer "ring".Send`:    func() error { return pr.Send(ctx, []byte("x")) },
		`RingConsumer "ring".Receive`: func() error { _, err := co.Receive(ctx, nil); return err },
	}
	for call, f := range errs {
		if raceEnabled && (strings.HasPrefix(call, "Mutex ") || strings.HasPrefix(call, "RWMutex ")) {
			continue
		}
		if err := f(); !errors.Is(err, ErrRegionClosed) || !strings.Contains(err.Error(), call) {
			t.Errorf("%s after Close = %v, want ErrRegionClosed naming the call", call, err)
		}
	}
}
