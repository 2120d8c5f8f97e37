package torture

import (
	"fmt"
	"io"
	"sync"

	"github.com/lockword/lockword"
)

// deadlockScopeNote is the line -deadlock prints first: what in-process
// detection sees and what it cannot.
const deadlockScopeNote = "lockword torture: note: -deadlock detects lock-order inversions and deadlocks among each process's goroutines; deadlock cycles across processes on shared locks are found by `lockword inspect REGION` (exit status 1, JSON field deadlocks)"

// deadlockWatch is -deadlock: deadlock detection on for the run, and its
// reports collected; any report fails the run (a torture kind takes one
// lock at a time, so every report would be a false one).
type deadlockWatch struct {
	mu      sync.Mutex
	reports []lockword.DeadlockReport
}

// startDeadlockWatch turns detection on. It fails in a binary built
// without the lockword_deadlock tag.
func startDeadlockWatch() (*deadlockWatch, error) {
	if err := lockword.SetDeadlockDetection(true); err != nil {
		return nil, err
	}
	w := new(deadlockWatch)
	lockword.SetDeadlockHandler(w.add)
	return w, nil
}

func (w *deadlockWatch) add(r lockword.DeadlockReport) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reports = append(w.reports, r)
}

// stop stops collecting, writes each report to stderr and reports whether
// there was any.
func (w *deadlockWatch) stop(stderr io.Writer) (failed bool) {
	lockword.SetDeadlockHandler(nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.reports {
		what := "lock-order inversion"
		if r.Cycle {
			what = "deadlock"
		}
		fmt.Fprintf(stderr, "lockword torture: -deadlock: %s reported:\n", what)
		for _, m := range r.Members {
			fmt.Fprintf(stderr, "  goroutine %d holds %v, wants %v\n", m.Goroutine, m.Held, m.Wanted)
		}
	}
	return len(w.reports) > 0
}
