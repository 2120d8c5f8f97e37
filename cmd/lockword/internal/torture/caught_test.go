package torture

import (
	"strings"
	"testing"
)

// wantCaughtIn3 runs the torture args with run (runEtcd or runCLI) up to
// 3 times, a broken or unfenced twin, and fails t unless a run exits
// exitFail with mark in its report. A run may harm nothing (a pause or
// deposition that lands outside the critical section, a schedule without
// an overlap), so one miss is no failure; three are. kind names the twin
// and what the harm, for the failure.
func wantCaughtIn3(t *testing.T, run func(*testing.T, ...string) (string, string, int), mark, kind, what string, args ...string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		stdout, _, status := run(t, args...)
		if status == exitFail && strings.Contains(stdout, mark) {
			return
		}
		if attempt == 3 {
			t.Fatalf("%s passed 3 runs; the checker does not see %s:\n%s", kind, what, stdout)
		}
	}
}
