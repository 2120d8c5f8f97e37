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
