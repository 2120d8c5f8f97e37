package lockword

import (
	"context"
	"errors"
	"testing"
)

// TestNilContext: every method that takes a context rejects a nil one with
// ErrNilContext, whether or not it would have had to wait, and acquires
// nothing, so that a nil-context bug shows up in the first test and not
// only under load.
func TestNilContext(t *testing.T) {
	var nilCtx context.Context
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ErrNilContext) {
			t.Errorf("%s(nil) = %v, want ErrNilContext", name, err)
		}
	}
	var m Mutex
	check("Mutex.LockContext", m.LockContext(nilCtx))
	if !m.TryLock() {
		t.Error("Mutex.LockContext(nil) acquired the lock")
	}
	var s SpinMutex
	check("SpinMutex.LockContext", s.LockContext(nilCtx))
	if !s.TryLock() {
		t.Error("SpinMutex.LockContext(nil) acquired the lock")
	}
	var tm TicketMutex
	check("TicketMutex.LockContext", tm.LockContext(nilCtx))
	if !tm.TryLock() {
		t.Error("TicketMutex.LockContext(nil) acquired the lock")
	}
	var rw RWMutex
	check("RWMutex.RLockContext", rw.RLockContext(nilCtx))
	check("RWMutex.LockContext", rw.LockContext(nilCtx))
	if !rw.TryLock() {
		t.Error("RWMutex context calls with nil acquired the lock")
	}
	var cm Mutex
	c := NewCond(&cm)
	cm.Lock()
	check("Cond.WaitContext", c.WaitContext(nilCtx))
	cm.Unlock()

	r, err := NewRing[int](4)
	if err != nil {
		t.Fatal(err)
	}
	check("Ring.Push", r.Push(nilCtx, 1))
	if _, err := r.PushSlice(nilCtx, []int{1}); !errors.Is(err, ErrNilContext) {
		t.Errorf("Ring.PushSlice(nil) = %v", err)
	}
	if r.Len() != 0 {
		t.Error("a push with a nil context pushed")
	}
	r.TryPush(7)
	if _, err := r.Pop(nilCtx); !errors.Is(err, ErrNilContext) {
		t.Errorf("Ring.Pop(nil) = %v", err)
	}
	if _, err := r.PopSlice(nilCtx, make([]int, 1)); !errors.Is(err, ErrNilContext) {
		t.Errorf("Ring.PopSlice(nil) = %v", err)
	}
	if r.Len() != 1 {
		t.Error("a pop with a nil context popped")
	}
}
