package wait

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSleepThreadReleasesP: a goroutine sleeping in SleepThread holds no
// P. With GOMAXPROCS=1, a goroutine that yields to a sleeper runs again
// as soon as the sleeper is in the kernel, where an ordinary blocking
// clock_nanosleep (SleepThread before) keeps the only P until the
// runtime's monitor takes it back: that monitor, once it has found
// nothing to do for a while, looks only every 10 ms. Each trial first
// runs 30 ms on the P (so the monitor backs off, as under a lock's steady
// contention), then yields to a sleeper; trials alternate the two sleeps.
// The median time to run again after SleepThread must be under a quarter
// of the ordinary sleep's. Assumption: both pay the same OS scheduling
// delays on a loaded host (hundreds of microseconds), and only the
// ordinary one waits for the monitor (milliseconds); a SleepThread that
// keeps its P waits as long as the ordinary sleep, and fails.
func TestSleepThreadReleasesP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ordinary := func(d time.Duration) {
		ts := unix.NsecToTimespec(MonotonicNs() + int64(d))
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
		}
	}
	// back reports how long this goroutine waited to run again after
	// yielding to one that sleeps 50 ms with sleep.
	back := func(sleep func(time.Duration)) time.Duration {
		for t0 := time.Now(); time.Since(t0) < 30*time.Millisecond; {
		}
		done := make(chan struct{})
		asleep := make(chan time.Time, 1)
		go func() {
			asleep <- time.Now()
			sleep(50 * time.Millisecond)
			close(done)
		}()
		for len(asleep) == 0 {
			runtime.Gosched() // the sleeper runs, and sleeps
		}
		d := time.Since(<-asleep)
		<-done
		return d
	}
	var ours, theirs []time.Duration
	for range 9 {
		ours = append(ours, back(SleepThread))
		theirs = append(theirs, back(ordinary))
	}
	slices.Sort(ours)
	slices.Sort(theirs)
	if ours[4] >= theirs[4]/4 {
		t.Errorf("with GOMAXPROCS=1, a goroutine ran again a median %v after yielding to a SleepThread sleeper, %v after an ordinary sleeper: want under a quarter (all: %v, %v)",
			ours[4], theirs[4], ours, theirs)
	}
	t.Logf("median time to run again: after SleepThread %v, after an ordinary sleep %v", ours[4], theirs[4])
}
