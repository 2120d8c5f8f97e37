//go:build linux

package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestProcsKinds runs each cross-process kind in 3 processes (this test
// binary re-executed) for 30 ms: each must exclude (the shared counter is
// checked) and report every process's acquisitions and waits. About 0.5 s.
func TestProcsKinds(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range procsSubjects(exe) {
		sample, err := s.run(context.Background(), Params{Goroutines: 3, Duration: 30 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if len(sample.PerWorker) != 3 || sample.Ops == 0 || sample.Waits.N < uint64(sample.Ops)/waitSampleEvery || sample.Elapsed < 30*time.Millisecond {
			t.Errorf("%s: %d ops in %v, per process %v, %d waits", s.Name, sample.Ops, sample.Elapsed, sample.PerWorker, sample.Waits.N)
		}
	}
}

// TestProcsCounterCheck runs 2 processes that take no lock and wants the
// counter check to catch their lost updates. Assumption: in 100 ms the
// two overlap at least once in the 1 us between a read and a write of the
// counter, certain when they run on two cores, likely when they share
// one; a run where they never did is retried (3 tries at most).
func TestProcsCounterCheck(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err = runProcs(context.Background(), exe, noLockKind, Params{Goroutines: 2, Duration: 100 * time.Millisecond,
			Section: Section{Inside: time.Microsecond}, StepsPerNs: calibrate()})
		if err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "did not exclude") {
		t.Fatalf("an unprotected counter in 2 processes: %v, want a counter mismatch", err)
	}
}
