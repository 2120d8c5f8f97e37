package torture

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/lockword/lockword"
)

// TestTortureDeadlockFlag: -deadlock runs a kind with detection on and
// passes, in a binary built with -tags lockword_deadlock; in one built
// without, it is a usage error that names the tag.
func TestTortureDeadlockFlag(t *testing.T) {
	stdout, stderr, status := runCLI(t, "torture", "-deadlock", "-lock", "mutex,ticket", "-workers", "4", "-iters", "200")
	if errors.Is(lockword.SetDeadlockDetection(true), lockword.ErrDeadlockDetectionNotBuilt) {
		if status != exitUsage || !strings.Contains(stderr, "-tags lockword_deadlock") {
			t.Fatalf("without the tag: exit status %d, stderr %q: want %d and the tag named", status, stderr, exitUsage)
		}
		return
	}
	wantExitOK(t, stdout, stderr, status)
	if !strings.Contains(stderr, deadlockScopeNote) {
		t.Fatalf("stderr %q: want the note that cross-process cycles are inspect's", stderr)
	}
}

// TestDeadlockWatchFailsOnReport: the -deadlock check fails a run that got
// a report, printing it, and passes one that got none.
func TestDeadlockWatchFailsOnReport(t *testing.T) {
	var w deadlockWatch
	var out bytes.Buffer
	if w.stop(&out) {
		t.Fatalf("a run without reports failed: %q", out.String())
	}
	w.add(lockword.DeadlockReport{Cycle: true, Members: []lockword.DeadlockMember{{Goroutine: 7, Held: lockword.LockID{Kind: "Mutex", Name: "a"}}}})
	if !w.stop(&out) || !strings.Contains(out.String(), `goroutine 7 holds Mutex "a"`) {
		t.Fatalf("a run with a report passed, or did not print it: %q", out.String())
	}
}
