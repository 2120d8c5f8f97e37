package locktest

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a log sink safe for the timer goroutine that logs.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CaptureSlog sends slog's default logger to a SyncBuffer until t ends.
func CaptureSlog(t *testing.T) *SyncBuffer {
	var buf SyncBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}

// AwaitLogs waits until logs holds n occurrences of substr, or 10 s have
// passed, and returns what it holds. A stuck report needs its waiter to
// start, park and pass its threshold, and the watcher to look: on a
// loaded host each can take long, so tests wait for the report rather
// than sleep a fixed time; 10 s (hundreds of the thresholds the tests
// use) bounds a report that never comes.
func AwaitLogs(logs *SyncBuffer, substr string, n int) string {
	for deadline := time.Now().Add(10 * time.Second); strings.Count(logs.String(), substr) < n && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return logs.String()
}

// StuckLinesDouble checks the stuck report lines of one lock in out
// against the repeat rule for a single waiter (internal/stuckrule): at
// least one line, and each later one waited at least twice as long as the
// one before (less the millisecond the report rounds to).
func StuckLinesDouble(out string) error {
	lines := regexp.MustCompile(` waited=(\S+) `).FindAllStringSubmatch(out, -1)
	if len(lines) == 0 || strings.Count(out, "level=WARN") != len(lines) {
		return fmt.Errorf("want stuck reports, each with its wait, got:\n%s", out)
	}
	var last time.Duration
	for _, l := range lines {
		d, err := time.ParseDuration(l[1])
		if err != nil {
			return fmt.Errorf("stuck report with waited=%s: %v", l[1], err)
		}
		if d < 2*last-time.Millisecond {
			return fmt.Errorf("stuck report repeated after %v, less than twice the last one's %v:\n%s", d, last, out)
		}
		last = d
	}
	return nil
}
