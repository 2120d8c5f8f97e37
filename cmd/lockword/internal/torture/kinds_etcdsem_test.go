package torture

import (
	"strings"
	"testing"
)

// TestTortureEtcdSemaphore: the etcd semaphore passes, exact, with holders
// that die and whose permits come back once; the broken twin (a permit too
// many) must FAIL. Whether the twin over-grants depends on the schedule,
// so it gets three runs; the correct kind's checks are exact whatever the
// load.
func TestTortureEtcdSemaphore(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runCLI(t, "torture", "-lock", "etcd-semaphore", "-workers", "5", "-iters", "6")
	if status != exitOK || !strings.Contains(stdout, "Acquisitions: 30 (want 30)") || !strings.Contains(stdout, "Over-grants: 0") {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	wantCaughtIn3(t, runCLI, "over-grants", "the broken semaphore", "an over-grant", "torture", "-lock", "etcd-semaphore-broken", "-workers", "5", "-iters", "6")
}
