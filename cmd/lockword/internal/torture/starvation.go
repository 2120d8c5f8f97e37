package torture

// The starvation check of the fairness block (fairness.go): a goroutine that
// hogs the lock against one that waits for it.

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A starvation is the outcome of the starvation check.
type starvation struct {
	what         string
	maxWait      time.Duration // the longest wait of the last attempt
	overtakes    int           // the hog's acquisitions completed during that wait
	acquisitions int           // the victim's, in the last attempt
	limit        time.Duration // 0: information only
	// counted is the longest wait of the last attempt less the time the
	// two goroutines' threads spent runnable without a CPU meanwhile
	// (schedDelay of it): what the lock, not the host, made the waiter
	// wait. It equals maxWait where the kernel reports no such time.
	counted, schedDelay time.Duration
	// earlier holds the counted longest waits of attempts that reached
	// the limit before the last one.
	earlier []time.Duration
}

// starvationAttempts is how many times the check runs when a wait reaches
// the limit. On a loaded host a thread can be off the CPU for longer than
// 10 ms at any moment (measured here under the race detector with other
// jobs running: 10.1 ms, during which the re-locking goroutine made 7664
// acquisitions, so the waiter had not even taken its ticket yet), and no
// check from outside the lock can tell that from starvation; such a stall
// is rare and does not repeat, while a lock that starves its waiters does
// so in every attempt.
const starvationAttempts = 3

func (s *starvation) passed() bool { return s.limit <= 0 || s.counted < s.limit }

// starvationCheck runs hog (one acquisition and release) in a tight loop
// on one goroutine for starvationRun while another runs victim (one
// acquisition and release) with a short pause between attempts, and
// measures the victim's longest wait. The hog stops at the end, so a
// victim starved throughout still gets in, having waited about the whole
// run. With a limit, an attempt whose longest wait reaches it is run
// again, up to starvationAttempts in all; the last attempt decides, and
// the earlier ones are reported.
func starvationCheck(what string, limit time.Duration, hog, victim func()) *starvation {
	s := &starvation{what: what, limit: limit}
	for attempt := 1; ; attempt++ {
		starvationAttempt(s, hog, victim)
		if s.passed() || attempt == starvationAttempts {
			return s
		}
		s.earlier = append(s.earlier, s.counted)
	}
}

// starvationAttempt is one run of the starvation check; it sets s's
// figures for the run.
//
// A wait can be long because the lock made the waiter wait or because the
// host did not run the threads: on a 2-core machine with other jobs, a
// runnable thread can wait over 10 ms for a CPU, and the lock cannot be
// blamed for that. Each goroutine therefore runs on a thread of its own
// (LockOSThread), and every wait is counted less the time both threads
// spent runnable without a CPU during it, which the kernel reports per
// thread (schedstat). The waiter's share is the host's; the re-locker's
// is subtracted too, since a FIFO lock's waiter waits out the holder's
// time off the CPU. A lock that makes its waiter wait keeps it asleep,
// not runnable: that time is counted in full.
func starvationAttempt(s *starvation, hog, victim func()) {
	var stop atomic.Bool
	var hogs atomic.Int64 // the hog's completed acquisitions
	var hogTid atomic.Int64
	hogDone := make(chan struct{})
	go func() {
		defer close(hogDone)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		hogTid.Store(int64(gettid()))
		for !stop.Load() {
			hog()
			hogs.Add(1)
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me := gettid()
	for hogTid.Load() == 0 {
		runtime.Gosched()
	}
	other := int(hogTid.Load())
	runqueue := func() int64 {
		a, ok1 := threadRunqueueNs(me)
		b, ok2 := threadRunqueueNs(other)
		if !ok1 || !ok2 {
			return 0
		}
		return a + b
	}
	s.maxWait, s.overtakes, s.acquisitions, s.counted, s.schedDelay = 0, 0, 0, 0, 0
	deadline := time.Now().Add(starvationRun)
	for time.Now().Before(deadline) {
		h0 := hogs.Load()
		q0 := runqueue()
		t0 := time.Now()
		victim()
		wait := time.Since(t0)
		delay := time.Duration(max(runqueue()-q0, 0))
		if wait > s.maxWait {
			s.maxWait, s.overtakes = wait, int(hogs.Load()-h0)
		}
		if c := max(wait-delay, 0); c > s.counted {
			s.counted, s.schedDelay = c, min(delay, wait)
		}
		s.acquisitions++
		time.Sleep(starvationPause)
	}
	stop.Store(true)
	<-hogDone
}

// lockerStarvation is the starvation check of a plain lock.
func lockerStarvation(l interface {
	Lock()
	Unlock()
}, limit time.Duration) *starvation {
	once := func() { l.Lock(); l.Unlock() }
	return starvationCheck("one goroutine re-locking in a tight loop while another locks", limit, once, once)
}
