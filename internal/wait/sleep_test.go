package wait

import (
	"testing"
	"time"
)

// TestSleepThreadSleeps: SleepThread sleeps at least d (a version that
// returned at once, or slept a fraction, fails the lower bound) and ends
// (an upper bound loose enough for a loaded 2-core host); a zero or
// negative d returns at once.
func TestSleepThreadSleeps(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
		t0 := time.Now()
		SleepThread(d)
		if got := time.Since(t0); got < d || got > d+time.Second {
			t.Errorf("SleepThread(%v) slept %v", d, got)
		}
	}
	// Timing assumption: in one of five tries the host runs this thread
	// for the two calls within 100 ms; a sleep of any length (the 1 s
	// asked for, say) fails every try.
	var took []time.Duration
	for len(took) < 5 {
		t0 := time.Now()
		SleepThread(0)
		SleepThread(-time.Second)
		if took = append(took, time.Since(t0)); took[len(took)-1] <= 100*time.Millisecond {
			return
		}
	}
	t.Errorf("SleepThread(0) and SleepThread(-1s) took %v in five tries, want one within 100ms", took)
}
