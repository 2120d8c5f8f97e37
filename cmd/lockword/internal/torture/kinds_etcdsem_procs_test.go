//go:build linux

package torture

import (
	"os"
	"strings"
	"testing"
)

// TestTortureEtcdSemaphoreProcs: workers in processes, some SIGKILLed
// holding permits: the permits their hold records showed come back by
// ErrOwnerDead exactly once (the run's own check, from etcd's history),
// with no over-grant. With LOCKWORD_LONG=1
// also the broken twin (a permit too many), which must FAIL across
// processes too (three runs: whether it over-grants depends on the
// schedule).
func TestTortureEtcdSemaphoreProcs(t *testing.T) {
	t.Parallel()
	args := []string{"-procs", "2", "-workers", "6", "-kill", "-kills", "6"}
	stdout, stderr, status := runCLI(t, append([]string{"torture", "-lock", "etcd-semaphore"}, args...)...)
	if status != exitOK || !strings.Contains(stdout, "Processes: 2; SIGKILLed: 6") || !strings.Contains(stdout, "Over-grants: 0") {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	if os.Getenv("LOCKWORD_LONG") != "1" {
		return // the twin costs up to three runs more: nightly
	}
	wantCaughtIn3(t, runCLI, "over-grants", "the broken semaphore across processes", "an over-grant", append([]string{"torture", "-lock", "etcd-semaphore-broken"}, args...)...)
}
