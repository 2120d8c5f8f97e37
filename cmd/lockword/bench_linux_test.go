package main

// The bench tests that run the built command as a user would; they share
// buildLockword with the -procs torture tests, which are Linux-only.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

// TestBenchCommandCI runs what the issue asks CI to run, as a user would:
// lockword bench -duration 100ms -count 2, with a PNG chart. About 8 s on
// 2 cores (34 samples x 2 x 100 ms, and the build); skipped with -short.
func TestBenchCommandCI(t *testing.T) {
	if testing.Short() {
		t.Skip("8 s: not with -short")
	}
	bin := clitest.BuildLockword(t)
	png := filepath.Join(t.TempDir(), "bench.png")
	out, err := exec.Command(bin, "bench", "-duration", "100ms", "-count", "2", "-chart", png).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Mutex", "SpinMutex", "TicketMutex", "RWMutex", "Ring batch", "chart written to"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Errorf("chart: %v", err)
	}
	t.Logf("\n%s", out)
}

// TestBenchInterrupted: SIGINT stops the run after the sample in hand; the
// table of what was measured is printed, and the exit status is 130.
func TestBenchInterrupted(t *testing.T) {
	bin := clitest.BuildLockword(t)
	cmd := exec.Command(bin, "bench", "-kinds", "mutex", "-duration", "200ms", "-count", "50")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// The header ends with the number of samples; then the run starts.
	r := bufio.NewReader(pipe)
	var stdout strings.Builder
	for !strings.Contains(stdout.String(), "samples") {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("no header: %v\n%s", err, stdout.String())
		}
		stdout.WriteString(line)
	}
	time.Sleep(1500 * time.Millisecond) // some samples are measured
	cmd.Process.Signal(syscall.SIGINT)
	rest, _ := io.ReadAll(r)
	stdout.Write(rest)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want status 130\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "sync.Mutex") || !strings.Contains(stderr.String(), "interrupted by SIGINT after") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

// TestBenchProcsEstimate: the time bench announces before a -procs run
// counts the worker processes' starts, not only the samples' durations
// (6 samples of 5 ms here, but 18 processes started). Timing assumption:
// the machine's load does not triple between the estimate, which times
// one start of this binary, and the run that follows: the estimate must
// be at least a third of the wall time, and not ten times it.
func TestBenchProcsEstimate(t *testing.T) {
	start := time.Now()
	stdout, stderr, status := runCLI(t, "bench", "-procs", "-kinds", "shared", "-duration", "5ms", "-count", "1")
	took := time.Since(start)
	if status != exitOK {
		t.Fatalf("exit %d\n%s\n%s", status, stdout, stderr)
	}
	m := regexp.MustCompile(`about (\S+) to go`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no estimate in the header:\n%s", stdout)
	}
	est, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("estimated %v, took %v", est, took)
	if est < took/3 || est > 10*took {
		t.Errorf("estimated %v for a run that took %v", est, took)
	}
}
