package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/bench"
)

// TestBenchUsage: bad flag values get a clear message naming the flag and
// exit 2; help goes to stdout with 0. All are rejected before anything is
// measured.
func TestBenchUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"-kinds", "mutex,nope"}, `-kinds: unknown kind "nope"`},
		{[]string{"-kinds", ""}, "-kinds: no kinds selected"},
		{[]string{"-goroutines", "0"}, `-goroutines: "0" is not a goroutine count`},
		{[]string{"-goroutines", "2,x"}, `-goroutines: "x" is not a goroutine count`},
		{[]string{"-goroutines", "2,2"}, "-goroutines: 2 is given twice"},
		{[]string{"-duration", "0s"}, "-duration must be between"},
		{[]string{"-duration", "2h"}, "-duration must be between"},
		{[]string{"-count", "0"}, "-count must be between 1"},
		{[]string{"-section", "fast"}, `-section: section "fast": want empty or INSIDE/OUTSIDE`},
		{[]string{"-section", "1s/0"}, "each side must be 0..1ms"},
		{[]string{"-read", "101"}, `-read: "101" is not a percentage`},
		{[]string{"-read", "half"}, `-read: "half" is not a percentage`},
		{[]string{"-chart", "out.jpg"}, "must end in .svg or .png"},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		if got := run(append([]string{"bench"}, c.args...), &stdout, &stderr); got != exitUsage {
			t.Errorf("bench %q: exit %d, want %d", c.args, got, exitUsage)
		}
		if !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("bench %q: stderr %q (want %q), stdout %q", c.args, stderr.String(), c.want, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if got := run([]string{"bench", "-help"}, &stdout, &stderr); got != exitOK || !strings.Contains(stdout.String(), "-read PERCENT") {
		t.Errorf("bench -help: exit %d, stdout %q", got, stdout.String())
	}
}

// TestBenchJSON: -json prints one object per sample, every sample.
func TestBenchJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "-kinds", "mutex,rw", "-goroutines", "1,3", "-duration", "5ms", "-count", "2", "-json", "-read", "90%"}
	if got := run(args, &stdout, &stderr); got != exitOK {
		t.Fatalf("exit %d: %s", got, stderr.String())
	}
	type line struct {
		Group, Kind       string
		Versus            []string
		Goroutines, Round int
		ReadFraction      float64 `json:"read_fraction"`
		Ops               int64
		OpsPerSec         float64 `json:"ops_per_sec"`
		WaitP99Ns         int64   `json:"wait_p99_ns"`
		WorkerMax         int64   `json:"worker_max_ops"`
	}
	seen := map[string]int{}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	for _, l := range lines {
		var m line
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		seen[m.Kind]++
		switch {
		case m.Ops <= 0 || m.OpsPerSec <= 0 || m.Round < 1 || m.Round > 2:
			t.Errorf("bad measurement %s", l)
		case m.Goroutines == 3 && (m.WaitP99Ns <= 0 || m.WorkerMax <= 0):
			t.Errorf("contended measurement without waits or per-worker counts: %s", l)
		case m.Group == "rw" && m.ReadFraction != 0.9:
			t.Errorf("rw measurement without its read fraction: %s", l)
		case (m.Kind == "Mutex") != (len(m.Versus) == 1 && m.Versus[0] == "sync.Mutex") && m.Group == "mutex":
			t.Errorf("versus wrong: %s", l)
		}
	}
	// 2 goroutine counts x 2 rounds of sync.Mutex, Mutex, sync.RWMutex, RWMutex.
	if len(lines) != 16 || seen["Mutex"] != 4 || seen["sync.Mutex"] != 4 || seen["RWMutex"] != 4 || seen["sync.RWMutex"] != 4 {
		t.Errorf("%d lines, per kind %v; want 16, 4 each", len(lines), seen)
	}
}

// TestBenchTableAndChart: the table names every subject with its ratio,
// and -chart writes the file.
func TestBenchTableAndChart(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "b.svg")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "-kinds", "spin,ring", "-goroutines", "1,2", "-duration", "5ms", "-count", "1", "-chart", chart}
	if got := run(args, &stdout, &stderr); got != exitOK {
		t.Fatalf("exit %d: %s", got, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"machine: ", "Exclusive locks", "SpinMutex", "sync.Mutex", "ns/op", "M/s", "SPSC queues", "Ring", "chart written to"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(chart); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("chart: %v, %d bytes", err, len(b))
	}
}

// TestMeasuringArgs: the caption's command line keeps what changes the
// measurement and drops where the charts go and the note.
func TestMeasuringArgs(t *testing.T) {
	got := shellWords(measuringArgs([]string{"-procs", "-chart", "a.svg,b.png", "-note=shared box", "--note", "x y", "-count", "3", "-section", "1us/2us"}))
	if want := "-procs -count 3 -section 1us/2us"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := shellWords([]string{"-note", "a b"}); got != `-note "a b"` {
		t.Errorf("shellWords: %q", got)
	}
}

// TestBenchChartUnwritableFailsFirst: a -chart file that cannot be written
// (its directory is missing) is a usage error reported before anything is
// measured, not after the whole run.
func TestBenchChartUnwritableFailsFirst(t *testing.T) {
	dir := t.TempDir()
	for _, chart := range []string{filepath.Join(dir, "missing", "x.png"), filepath.Join(dir, "ok.svg") + "," + dir + "/missing/y.svg"} {
		var stdout, stderr bytes.Buffer
		args := []string{"bench", "-kinds", "mutex", "-goroutines", "1", "-duration", "1ms", "-count", "1", "-chart", chart}
		got := run(args, &stdout, &stderr)
		if got != exitUsage || stdout.Len() != 0 || !strings.Contains(stderr.String(), "lockword bench: -chart ") ||
			!strings.Contains(stderr.String(), "no such file or directory") {
			t.Errorf("-chart %s: exit %d, stdout %q, stderr %q; want 2 before measuring, naming the file", chart, got, stdout.String(), stderr.String())
		}
	}
	// The check leaves nothing behind: ok.svg was created to prove it
	// writable, and removed when the run did not go ahead.
	if _, err := os.Stat(filepath.Join(dir, "ok.svg")); !os.IsNotExist(err) {
		t.Errorf("a chart file left behind by a run that never measured: %v", err)
	}
}

// TestBenchOneRound: the header counts rounds in English.
func TestBenchOneRound(t *testing.T) {
	stdout, stderr, status := runCLI(t, "bench", "-kinds", "mutex", "-goroutines", "1", "-duration", "1ms", "-count", "1")
	if status != exitOK || !strings.Contains(stdout, "lockword bench: 1 round of 1ms per sample") {
		t.Errorf("exit %d, stdout %q, stderr %q; want the header \"1 round of 1ms per sample\"", status, stdout, stderr)
	}
}

// TestChartSettings: the chart's caption line is the command as typed,
// without a stray space when no flag changes the measurement.
func TestChartSettings(t *testing.T) {
	cfg := bench.Config{Count: 5, Duration: 150 * time.Millisecond, ReadFraction: 0.99}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-chart", "b.svg"}, "lockword bench: 5 rounds of 150ms per sample, section empty, rw reads 99%"},
		{[]string{"-count", "5", "-chart", "b.svg"}, "lockword bench -count 5: 5 rounds of 150ms per sample, section empty, rw reads 99%"},
	} {
		if got := chartSettings(c.args, &cfg); got != c.want {
			t.Errorf("chartSettings(%q) = %q, want %q", c.args, got, c.want)
		}
	}
	cfg.Count = 1
	if got := chartSettings(nil, &cfg); !strings.HasPrefix(got, "lockword bench: 1 round of ") {
		t.Errorf("one round: %q", got)
	}
}
