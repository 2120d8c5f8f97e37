//go:build !race

package main

import "testing"

// TestInstrumentedSectionCatchesBrokenLock runs the real kinds' critical
// section, section, with no lock at all, as TestTortureNoneFails does for
// sectionUnprotected: its checks, too, must be able to fail. Without -race
// only, since the race detector would rightly report the unprotected
// accesses.
func TestInstrumentedSectionCatchesBrokenLock(t *testing.T) {
	workers, iters := testScale()
	cfg := &config{workers: workers, iters: int64(iters), value: 5}
	a := new(arena)
	h := hammer(cfg, "test", func(id, steps int) { a.section(id, cfg.value, steps, true) })
	total := int64(workers) * int64(iters)
	if h.perWorker == nil || a.counter >= 5*total {
		t.Errorf("no lost updates: counter %d, want less than %d", a.counter, 5*total)
	}
	if a.violations.Load() == 0 {
		t.Error("no owner-slot violations")
	}
}
