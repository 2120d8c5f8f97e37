package torture

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

func TestTortureSemaphorePasses(t *testing.T) {
	n := lockfreeScale() / 5
	stdout, stderr, status := runCLI(t, "torture", "-lock", "semaphore", "-workers", "16", "-items", fmt.Sprint(n))
	wantExitOK(t, stdout, stderr, status)
	clitest.WantLines(t, stdout, []string{
		"Lock: semaphore",
		"Workers: 16",
		fmt.Sprintf("Acquisitions: %d (want %d)", n, n),
		"Over-grants: 0",
		"Free at the end: 4",
		"Result: PASS",
	})
}

// TestTortureSemaphoreBrokenFails: the twin that grants one permit too
// many must fail, so the checks of the real kind are known to be able to.
// On a loaded host the workers may run one after another and never
// overlap, so it tries up to five runs.
func TestTortureSemaphoreBrokenFails(t *testing.T) {
	n := lockfreeScale() / 5
	var stdout string
	for range 5 {
		var status int
		stdout, _, status = runCLI(t, "torture", "-lock", "semaphore-broken", "-workers", "16", "-items", fmt.Sprint(n))
		if status == 1 && strings.Contains(stdout, "Result: FAIL (") && strings.Contains(stdout, "over-grants") {
			return
		}
	}
	t.Fatalf("semaphore-broken passed 5 runs: the over-grant check cannot fail:\n%s", stdout)
}
