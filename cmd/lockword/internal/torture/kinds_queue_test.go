package torture

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

func TestTortureQueuePasses(t *testing.T) {
	n := lockfreeScale()
	stdout, stderr, status := runCLI(t, "torture", "-lock", "queue", "-workers", "8", "-items", fmt.Sprint(n))
	wantExitOK(t, stdout, stderr, status)
	clitest.WantLines(t, stdout, []string{
		"Lock: queue",
		"Producers: 8",
		"Consumers: 4",
		fmt.Sprintf("Items: %d", n),
		fmt.Sprintf("Received: %d", n),
		"Out of order: 0",
		"Duplicates: 0",
		"Lost: 0",
		"Mismatched producers: 0",
		"Result: PASS",
	})
	if !strings.Contains(stdout, "\nSleeps: producers ") {
		t.Errorf("report lacks the queue's sleeps:\n%s", stdout)
	}
}

// TestTortureQueueBrokenFails: a queue that frees a slot before reading its
// item must fail the checks.
func TestTortureQueueBrokenFails(t *testing.T) {
	stdout, _, status := runCLI(t, "torture", "-lock", "queue-broken", "-workers", "8", "-items", fmt.Sprint(lockfreeScale()))
	if status != exitFail || !strings.Contains(stdout, "Result: FAIL") {
		t.Fatalf("exit status %d, want 1 with FAIL:\n%s", status, stdout)
	}
	t.Logf("caught:\n%s", stdout)
}

func TestTortureQueueStallFails(t *testing.T) {
	saved := stallTimeout
	stallTimeout = 200 * time.Millisecond
	defer func() { stallTimeout = saved }()
	r := tortureQueue(&config{workers: 2, items: 1000}, "stuck", stuckMPMC{new(stuckQueue)})
	if why := strings.Join(r.failures(), "; "); !strings.Contains(why, "stalled") {
		t.Fatalf("failures %q, want stalled", why)
	}
}

// stuckMPMC is a stuckQueue whose try calls never succeed.
type stuckMPMC struct{ *stuckQueue }

func (stuckMPMC) TryPush(uint64) bool    { return false }
func (stuckMPMC) TryPop() (uint64, bool) { return 0, false }

func TestTortureQueueDurationAndJSON(t *testing.T) {
	stdout, stderr, status := runCLI(t, "torture", "-json", "-lock", "queue", "-workers", "4", "-duration", "150ms")
	if status != exitOK {
		t.Fatalf("exit status %d\n%s\n%s", status, stdout, stderr)
	}
	var j map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &j); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lock", "producers", "consumers", "items", "received", "out_of_order", "duplicates",
		"lost", "mismatched_producers", "throughput_mitems_s", "push_sleeps", "pop_sleeps", "wake_calls", "result"} {
		if _, ok := j[f]; !ok {
			t.Errorf("queue JSON lacks %q: %s", f, stdout)
		}
	}
	if j["result"] != "PASS" || j["received"] != j["items"] {
		t.Errorf("queue JSON: %s", stdout)
	}
}
