// Package clitest holds the test helpers that cmd/lockword's tests and
// its internal/torture tests share: building the lockword binary and
// reading its text reports.
package clitest

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildLockword builds the lockword command, without the race detector,
// into a temporary directory of t and returns the binary's path. The
// package is named by import path, so the caller's directory does not
// matter. A failed build fails t.
func BuildLockword(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lockword")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/lockword/lockword/cmd/lockword").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// HasLine reports whether text has line as one whole line.
func HasLine(text, line string) bool {
	s := bufio.NewScanner(strings.NewReader(text))
	for s.Scan() {
		if s.Text() == line {
			return true
		}
	}
	return false
}

// WantLines fails t, without stopping it, for each of lines that report
// does not have as one whole line, and quotes the report.
func WantLines(t testing.TB, report string, lines []string) {
	t.Helper()
	for _, line := range lines {
		if !HasLine(report, line) {
			t.Errorf("report lacks line %q:\n%s", line, report)
		}
	}
}
