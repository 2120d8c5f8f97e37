package lockword

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// detectionLatency is the one statement of how soon a dead holder is
// noticed, with the load each figure holds at (README's runs of
// lockword torture -procs 4 -kill). Every document that speaks of it says
// exactly this, so that the figures cannot drift apart again.
const detectionLatency = "A dead holder is noticed at a waiter's next liveness check, made every " +
	"10 ms whenever the waiter gets a CPU: about 10 ms after the death when CPUs are free, " +
	"later as the load grows (2 cores, p99: 12 ms at load 5-9, 28-92 ms at load 9-23, 1.2 s at load 24-32)"

// TestDetectionLatencyStatedOnce: README, the C header, the docs, the
// torture help and the shared locks' doc comments carry the same
// sentence on detection latency, and none promises another figure
// ("within 100 ms").
func TestDetectionLatencyStatedOnce(t *testing.T) {
	// Comment markers and line breaks are not part of the text.
	markers := regexp.MustCompile(`(?m)^\s*(//|\*|/\*)?\s*`)
	for _, f := range []string{"README.md", "c/lockword.h", "docs/when-to-lock.md", "shm/mutex.go", "shm/ticket.go",
		"cmd/lockword/internal/torture/help.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(markers.ReplaceAllString(string(b), "")), " ")
		if !strings.Contains(text, detectionLatency) {
			t.Errorf("%s does not state the detection latency as the others do", f)
		}
		if strings.Contains(text, "within 100 ms") {
			t.Errorf("%s promises detection within 100 ms", f)
		}
	}
}
