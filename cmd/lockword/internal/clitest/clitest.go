// Package clitest holds the test helpers that cmd/lockword's tests and
// its internal/torture tests share: building the lockword binary and
// reading its text reports.
package clitest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// BuildLockword builds the lockword command, without the race detector,
// once per test binary, and returns the binary's path; a failed build
// fails t (and every later caller). The package is named by import path,
// so the caller's directory does not matter. Linking the command costs
// seconds of CPU, once per call before: a package whose tests call this
// has a TestMain that calls Main, which removes the binary at the end.
// The binary's directory is readable by every user, for tests that run
// it as another one.
func BuildLockword(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "lockword-clitest-"); built.err != nil {
			return
		}
		if built.err = os.Chmod(built.dir, 0o755); built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "lockword")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/lockword/lockword/cmd/lockword").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// built is BuildLockword's binary, built once.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// Main runs a package's tests (call it from TestMain) and removes the
// binary BuildLockword built, if any.
func Main(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
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
