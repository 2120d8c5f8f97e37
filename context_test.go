package lockword

import (
	"context"
	"errors"
	"testing"
	"time"
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
	for _, l := range []struct {
		name string
		lock interface {
			LockContext(context.Context) error
			TryLock() bool
		}
	}{
		{"Mutex", new(Mutex)},
		{"SpinMutex", new(SpinMutex)},
		{"TicketMutex", new(TicketMutex)},
	} {
		check(l.name+".LockContext", l.lock.LockContext(nilCtx))
		if !l.lock.TryLock() {
			t.Error(l.name + ".LockContext(nil) acquired the lock")
		}
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

// TestStatsCountGiveUps: a LockContext that waits and gives up is counted
// with its wait (it was invisible: SlowPath 0, Parks 1, WaitMax 0), and is
// not an acquisition. Two waits on a held lock: one that times out, one
// cancelled. The durations checked are what the code guarantees whatever
// the load: a wait is timed from the start of its slow path, which comes
// before its first park (Parks counts it), to its give-up; so the
// cancelled wait, cancelled timeout after its park was seen, counts at
// least timeout, and neither counts more than its call took. (A deadline
// set before the call says nothing: the call may start late.)
func TestStatsCountGiveUps(t *testing.T) {
	const timeout = 30 * time.Millisecond
	type lock interface {
		Lock()
		Unlock()
		EnableStats()
		Stats() Stats
	}
	var rwR RWMutex
	cases := []struct {
		name string
		l    lock
		wait func(context.Context) error
	}{
		{"Mutex", new(Mutex), nil},
		{"SpinMutex", new(SpinMutex), nil},
		{"TicketMutex", new(TicketMutex), nil},
		{"RWMutex", new(RWMutex), nil},
		{"RWMutex.RLockContext", &rwR, rwR.RLockContext},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wait := c.wait
			if wait == nil {
				wait = c.l.(interface {
					LockContext(context.Context) error
				}).LockContext
			}
			c.l.EnableStats()
			c.l.Lock()
			// timed runs wait with ctx and returns how long the call took.
			timed := func(ctx context.Context) (time.Duration, error) {
				start := time.Now()
				err := wait(ctx)
				return time.Since(start), err
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			took1, err := timed(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("LockContext on a held lock, timed out = %v", err)
			}
			parks := c.l.Stats().Parks
			ctx, cancel = context.WithCancel(context.Background())
			type result struct {
				took time.Duration
				err  error
			}
			res := make(chan result, 1)
			go func() {
				took, err := timed(ctx)
				res <- result{took, err}
			}()
			for c.l.Stats().Parks == parks {
				time.Sleep(time.Millisecond) // until it parks: its wait is timed from before
			}
			time.Sleep(timeout)
			cancel()
			r := <-res
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("LockContext on a held lock, cancelled = %v", r.err)
			}
			c.l.Unlock()
			s := c.l.Stats()
			if s.GiveUps != 2 || s.GiveUpWaitMax < timeout || s.GiveUpWaitTotal <= s.GiveUpWaitMax || s.GiveUpWaitTotal > took1+r.took {
				t.Errorf("after a wait timed out after %v and one cancelled %v after it parked (calls of %v and %v): %+v", timeout, timeout, took1, r.took, s)
			}
			if s.Acquisitions != 1 || s.SlowPath != 0 {
				t.Errorf("give-ups counted as acquisitions: %+v", s)
			}
		})
	}
}
