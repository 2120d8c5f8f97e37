//go:build !race

package torture

import (
	"sync"
	"testing"
)

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

// readersIgnoreWriters is a reader-writer lock whose readers take nothing.
type readersIgnoreWriters struct{ sync.Mutex }

func (*readersIgnoreWriters) RLock()   {}
func (*readersIgnoreWriters) RUnlock() {}

// TestTortureRWCatchesBrokenLock runs the rw kinds' experiment on a lock
// whose readers do not exclude writers: the overlap check must fail the
// run. Without -race only: the race detector would report the overlap
// itself.
func TestTortureRWCatchesBrokenLock(t *testing.T) {
	workers, iters := testScale()
	cfg := &config{workers: workers, iters: int64(iters), value: 5, work: 50}
	r := tortureRWLock(cfg, "rw-broken", 2, new(readersIgnoreWriters), nil, true)
	if r.passed() || r.fair == nil || len(r.fair.failures) == 0 {
		t.Fatalf("a reader-writer lock whose readers ignore writers passed: %v", r.failures())
	}
}
