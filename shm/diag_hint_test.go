//go:build linux

package shm

import (
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// TestStuckHintNamesTheHolder: the stuck report's hint suggests kill -QUIT
// with the holder's PID, and says nothing of it when there is no single
// holder (a writer waiting for readers reports holder_pid 0): run as
// written, `kill -QUIT 0` would signal the whole process group.
func TestStuckHintNamesTheHolder(t *testing.T) {
	logs := locktest.CaptureSlog(t)
	logSharedStuck(sharedStuck{kind: "shm.RWMutex", name: "drain", path: "/r", alive: true, waiters: 1, waited: time.Second, threshold: time.Second})
	logSharedStuck(sharedStuck{kind: "shm.Mutex", name: "held", path: "/r", holderPID: 4242, alive: true, waiters: 1, waited: time.Second, threshold: time.Second})
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 stuck reports, got:\n%s", logs)
	}
	if strings.Contains(lines[0], "kill -QUIT") {
		t.Errorf("a report with no holder PID suggests kill -QUIT: %s", lines[0])
	}
	if !strings.Contains(lines[1], "kill -QUIT 4242") {
		t.Errorf("a report naming PID 4242 does not suggest kill -QUIT 4242: %s", lines[1])
	}
}
