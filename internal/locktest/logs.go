package locktest

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
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
	lines, err := stuckLines(out)
	if err != nil {
		return err
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].waited < 2*lines[i-1].waited-time.Millisecond {
			return fmt.Errorf("stuck report repeated after %v, less than twice the last one's %v:\n%s", lines[i].waited, lines[i-1].waited, out)
		}
	}
	return nil
}

// StuckLinesWithin checks the stuck report lines of lock (its name) in
// out, logged while it was held for held with the given threshold, against
// the repeat rule (internal/stuckrule) for any number of waiters: each
// later line has twice the longest wait or twice the waiters of the one
// before, and, as either takes a threshold at least, there are at most
// held/threshold lines. The bound holds on a loaded host: delays only
// lengthen held.
func StuckLinesWithin(out, lock string, held, threshold time.Duration) error {
	out = linesWith(out, "lock="+lock+" ") // other tests' goroutines may still log
	if n := strings.Count(out, "level=WARN"); n > int(held/threshold) {
		return fmt.Errorf("%d stuck reports while the lock was held for %v, want at most %d (one per threshold of %v at most):\n%.3000s", n, held, held/threshold, threshold, out)
	}
	lines, err := stuckLines(out)
	if err != nil {
		return err
	}
	for i := 1; i < len(lines); i++ {
		a, b := lines[i-1], lines[i]
		if b.waited < 2*a.waited-time.Millisecond && b.waiters < 2*a.waiters {
			return fmt.Errorf("stuck report repeated with %d waiters, the longest %v, after %d and %v: neither doubled:\n%s", b.waiters, b.waited, a.waiters, a.waited, out)
		}
	}
	return nil
}

type stuckLine struct {
	waiters int
	waited  time.Duration
}

var stuckLineRE = regexp.MustCompile(` waiters=(\d+) waited=(\S+) `)

// stuckLines parses the waiters and longest wait of each stuck report.
func stuckLines(out string) ([]stuckLine, error) {
	found := stuckLineRE.FindAllStringSubmatch(out, -1)
	if len(found) == 0 || strings.Count(out, "level=WARN") != len(found) {
		return nil, fmt.Errorf("want stuck reports, each with its waiters and wait, got:\n%s", out)
	}
	var lines []stuckLine
	for _, f := range found {
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("stuck report with waiters=%s: %v", f[1], err)
		}
		d, err := time.ParseDuration(f[2])
		if err != nil {
			return nil, fmt.Errorf("stuck report with waited=%s: %v", f[2], err)
		}
		lines = append(lines, stuckLine{n, d})
	}
	return lines, nil
}

// linesWith returns the lines of out that contain mark.
func linesWith(out, mark string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.Contains(line, mark) {
			b.WriteString(line)
		}
	}
	return b.String()
}
