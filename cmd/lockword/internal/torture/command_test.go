package torture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

// runCLI runs a torture command line in-process ("torture" and its flags,
// or "help torture"), as lockword's run dispatches it, and returns what it
// printed and its exit status.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errOut bytes.Buffer
	switch {
	case len(args) > 0 && args[0] == "torture":
		status = Command(args[1:], &out, &errOut)
	case len(args) == 2 && args[0] == "help" && args[1] == "torture":
		Help(&out)
	default:
		t.Fatalf("runCLI %q: not a torture command line", args)
	}
	return out.String(), errOut.String(), status
}

// wantExitOK stops t unless a run exited with status 0, quoting its
// output.
func wantExitOK(t *testing.T, stdout, stderr string, status int) {
	t.Helper()
	if status != exitOK {
		t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", status, stdout, stderr)
	}
}

// testScale is the torture size for in-process tests: big enough that a
// broken lock cannot pass by luck, small enough for -race on two cores.
func testScale() (workers, iters int) {
	if testing.Short() {
		return 4, 2000
	}
	return 8, 20000
}

// TestTortureRealLocksPass runs each real kind through the command line
// and checks the text report, exit status and exact totals.
func TestTortureRealLocksPass(t *testing.T) {
	workers, iters := testScale()
	for _, name := range []string{"mutex", "spin", "sync"} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, status := runCLI(t, "torture", "-lock", name,
				"-workers", fmt.Sprint(workers), "-iters", fmt.Sprint(iters), "-value", "3")
			wantExitOK(t, stdout, stderr, status)
			want := int64(workers) * int64(iters) * 3
			clitest.WantLines(t, stdout, []string{
				"Lock: " + name,
				fmt.Sprintf("Workers: %d", workers),
				fmt.Sprintf("Additions per worker: %d", iters),
				"Value per addition: 3",
				fmt.Sprintf("Expected: %d", want),
				fmt.Sprintf("Actual:   %d", want),
				"Owner-slot violations: 0",
				"Result: PASS",
			})
			if name == "sync" {
				if !clitest.HasLine(stdout, "Slow path: n/a (sync.Mutex keeps no statistics)") {
					t.Errorf("sync report lacks the n/a slow-path line:\n%s", stdout)
				}
			} else if !strings.Contains(stdout, "% of acquisitions") {
				t.Errorf("%s report lacks a slow-path percentage:\n%s", name, stdout)
			}
			if stderr != "" {
				t.Errorf("unexpected stderr: %q", stderr)
			}
		})
	}
}

// TestTortureExactTotals runs the kinds' run functions directly and checks
// the report's numbers, including the lock's own acquisition count, with
// and without busy work inside the critical section.
func TestTortureExactTotals(t *testing.T) {
	workers, iters := testScale()
	for _, name := range []string{"mutex", "spin", "sync"} {
		for _, work := range []int{0, 20} {
			t.Run(fmt.Sprintf("%s/work=%d", name, work), func(t *testing.T) {
				cfg := &config{workers: workers, iters: int64(iters), value: 5, work: work}
				rep, err := lookupKind(name).run(cfg)
				if err != nil {
					t.Fatal(err)
				}
				r := rep.(*counterReport)
				total := int64(workers) * int64(iters)
				if r.total() != total || r.expected != 5*total || r.actual != 5*total {
					t.Errorf("total %d, expected %d, actual %d; want %d, %d, %d",
						r.total(), r.expected, r.actual, total, 5*total, 5*total)
				}
				if r.ownerViolations != 0 {
					t.Errorf("%d owner-slot violations", r.ownerViolations)
				}
				if name != "sync" {
					// Statistics are on from the start: exact.
					if r.statsAcquisitions == nil || int64(*r.statsAcquisitions) != total {
						t.Errorf("lock's Stats counted %v acquisitions, want %d", r.statsAcquisitions, total)
					}
					if r.slowPath == nil || *r.slowPath < 0 || *r.slowPath > 1 {
						t.Errorf("slow-path fraction %v, want one in [0, 1]", r.slowPath)
					}
				}
				if !r.passed() {
					t.Errorf("failed: %v", r.failures())
				}
			})
		}
	}
}

// TestTortureNoneFails is the proof that the checks can fail: with no lock
// the counter must lose updates and the owner slot must see intruders. It
// must also hold under -race, which go:norace on sectionUnprotected makes
// possible.
func TestTortureNoneFails(t *testing.T) {
	workers, iters := testScale()
	stdout, stderr, status := runCLI(t, "torture", "-lock", "none",
		"-workers", fmt.Sprint(workers), "-iters", fmt.Sprint(iters))
	if status != exitFail {
		t.Fatalf("exit status %d, want 1\nstdout:\n%s\nstderr:\n%s", status, stdout, stderr)
	}
	for _, want := range []string{"Lock: none", "Result: FAIL", "lost updates", "owner-slot violations", "Slow path: n/a"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}

	rep, err := lookupKind("none").run(&config{workers: workers, iters: int64(iters), value: 5})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.(*counterReport)
	if r.actual >= r.expected {
		t.Errorf("no lost updates: actual %d, expected %d", r.actual, r.expected)
	}
	if r.ownerViolations == 0 {
		t.Error("no owner-slot violations")
	}
	if r.passed() {
		t.Error("the unprotected kind passed")
	}
}

// TestTortureDefaults checks that no flags means the classic experiment on
// every kind in all, and that all leaves none out.
func TestTortureDefaults(t *testing.T) {
	opts, status, ok := parseTorture(nil, new(bytes.Buffer), new(bytes.Buffer))
	if !ok {
		t.Fatalf("parseTorture(nil) failed with status %d", status)
	}
	if c := opts.cfg; c.workers != 16 || c.iters != 100000 || c.value != 5 || c.work != 0 || c.duration != 0 {
		t.Errorf("default config %+v, want 16 workers × 100000 additions × value 5", c)
	}
	if got, want := names(opts.kinds), []string{"mutex", "spin", "sync", "ticket", "rw", "rw-read-mostly", "cond", "semaphore"}; !slices.Equal(got, want) {
		t.Errorf("default kinds %v, want %v", got, want)
	}
	if opts.json {
		t.Error("-json on by default")
	}
	if opts.cfg.progress != nil {
		t.Error("progress enabled although stderr is not a terminal")
	}
}

func TestParseKinds(t *testing.T) {
	for spec, want := range map[string][]string{
		"mutex":           {"mutex"},
		"sync,mutex,sync": {"sync", "mutex"},
		"none,all":        {"none", "mutex", "spin", "sync", "ticket", "rw", "rw-read-mostly", "cond", "semaphore"},
		" spin , none":    {"spin", "none"},
	} {
		ks, err := parseKinds(spec)
		if err != nil {
			t.Errorf("parseKinds(%q): %v", spec, err)
			continue
		}
		if got := names(ks); !slices.Equal(got, want) {
			t.Errorf("parseKinds(%q) = %v, want %v", spec, got, want)
		}
	}
}

func names(ks []*kind) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.name)
	}
	return out
}

// TestTortureUsageErrors checks that bad command lines exit with status 2,
// print nothing on stdout, and say what is wrong on stderr.
func TestTortureUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-workers", "0"}, "-workers must be between 1 and 100000, got 0"},
		{[]string{"-workers", "-3"}, "-workers must be between 1"},
		{[]string{"-workers", "many"}, `invalid value "many" for flag -workers`},
		{[]string{"-iters", "-1"}, "-iters must be at least 1, got -1"},
		{[]string{"-iters", "0"}, "-iters must be at least 1, got 0"},
		{[]string{"-value", "0"}, "-value must be between 1 and 1000000, got 0"},
		{[]string{"-work", "-1"}, "-work must be between 0"},
		{[]string{"-duration", "-1s"}, "-duration must not be negative, got -1s"},
		{[]string{"-duration", "soon"}, `invalid value "soon" for flag -duration`},
		{[]string{"-iters", "10", "-duration", "1s"}, "-iters and -duration cannot be combined"},
		{[]string{"-lock", "bogus"}, `unknown lock kind "bogus" in -lock (valid kinds: mutex, spin, sync, none, ` /* kinds of other files follow, then all */},
		{[]string{"-lock", "mutex,bogus"}, `unknown lock kind "bogus"`},
		{[]string{"-lock", "mutex,"}, "names an empty lock kind"},
		{[]string{"-lock", ""}, "names an empty lock kind"},
		{[]string{"-iters", "9000000000000000000"}, "does not fit the 64-bit counter"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"mutex"}, `unexpected argument "mutex": torture takes only flags`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, status := runCLI(t, append([]string{"torture"}, tc.args...)...)
			if status != exitUsage {
				t.Errorf("exit status %d, want 2", status)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", stderr, tc.want)
			}
			if !strings.Contains(stderr, "lockword torture -help") {
				t.Errorf("stderr %q does not point to the help", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

// TestTortureHelp checks that the help describes every kind, every flag,
// the exit statuses and examples, on stdout with status 0.
func TestTortureHelp(t *testing.T) {
	for _, args := range [][]string{{"torture", "-help"}, {"torture", "--help"}, {"torture", "-h"}, {"help", "torture"}} {
		stdout, stderr, status := runCLI(t, args...)
		if status != exitOK || stderr != "" {
			t.Errorf("%v: exit status %d, stderr %q; want 0 and nothing", args, status, stderr)
		}
		for _, want := range []string{
			"Usage: lockword torture",
			"-lock KINDS", "-workers N", "-iters N", "-value V", "-work N", "-duration D", "-json",
			"(default 16)", "(default 100000)", "(default 5)", "(default all)",
			"Exit status:", "Examples:", "slow_path_fraction", "owner_violations",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
		// Each kind on its own line, marked * when in all; the name
		// column is as wide as the longest kind name.
		for _, want := range []string{`mutex +\* +lockword\.Mutex`, `spin +\* +lockword\.SpinMutex`,
			`sync +\* +sync\.Mutex`, `none {4,}no lock`} {
			if !regexp.MustCompile(`(?m)^  ` + want).MatchString(stdout) {
				t.Errorf("%v: help lacks a kind line matching %q", args, want)
			}
		}
	}
}

// TestTortureJSON checks that -json prints one parseable object per kind
// with the documented fields.
func TestTortureJSON(t *testing.T) {
	stdout, stderr, status := runCLI(t, "torture", "-json", "-lock", "mutex,sync,none", "-workers", "4", "-iters", "20000")
	if status != exitFail { // none fails
		t.Fatalf("exit status %d, want 1; stderr %q", status, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), stdout)
	}
	fields := []string{"lock", "workers", "iters", "value", "expected", "actual", "owner_violations",
		"throughput_macq_s", "slow_path_fraction", "duration_s", "result"}
	for i, name := range []string{"mutex", "sync", "none"} {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, lines[i])
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("%s: no field %q in %s", name, f, lines[i])
			}
		}
		var r reportJSON
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatal(err)
		}
		if r.Lock != name || r.Workers != 4 || r.Iters == nil || *r.Iters != 20000 || r.Value != 5 || r.Expected != 400000 {
			t.Errorf("%s: unexpected header fields: %s", name, lines[i])
		}
		if r.DurationS <= 0 || r.ThroughputMacqS <= 0 {
			t.Errorf("%s: duration_s %v, throughput %v; want both positive", name, r.DurationS, r.ThroughputMacqS)
		}
		switch name {
		case "mutex":
			if r.Result != "PASS" || r.Actual != 400000 || r.SlowPathFraction == nil {
				t.Errorf("mutex: %s", lines[i])
			}
		case "sync":
			if r.Result != "PASS" || r.Actual != 400000 || m["slow_path_fraction"] != nil {
				t.Errorf("sync: %s", lines[i])
			}
		case "none":
			if r.Result != "FAIL" || r.Actual >= 400000 || r.OwnerViolations == 0 || len(r.Failures) == 0 || m["slow_path_fraction"] != nil {
				t.Errorf("none: %s", lines[i])
			}
		}
	}
}

// TestTortureDuration checks a timed run: the honest per-worker line, and
// Expected computed from the additions actually completed.
func TestTortureDuration(t *testing.T) {
	start := time.Now()
	stdout, stderr, status := runCLI(t, "torture", "-lock", "mutex,spin", "-workers", "4", "-duration", "200ms")
	if elapsed := time.Since(start); elapsed < 400*time.Millisecond {
		t.Errorf("two 200ms runs took only %v", elapsed)
	}
	wantExitOK(t, stdout, stderr, status)
	reports := strings.Split(stdout, "\n\n")
	if len(reports) != 2 {
		t.Fatalf("got %d reports, want 2:\n%s", len(reports), stdout)
	}
	for _, rep := range reports {
		var total, expected, actual int64
		for line := range strings.SplitSeq(rep, "\n") {
			if _, err := fmt.Sscanf(line, "Additions per worker: varies, min %d, max %d (%d total)", new(int64), new(int64), &total); err == nil {
				continue
			}
			fmt.Sscanf(line, "Expected: %d", &expected)
			fmt.Sscanf(line, "Actual: %d", &actual)
		}
		if total <= 0 || expected != 5*total || actual != expected {
			t.Errorf("total %d, expected %d, actual %d; want expected = actual = 5 × total > 0:\n%s", total, expected, actual, rep)
		}
		if !clitest.HasLine(rep, "Duration: 200ms") || !clitest.HasLine(rep, "Result: PASS") {
			t.Errorf("report lacks the duration or PASS line:\n%s", rep)
		}
	}

	// The JSON form has no single per-worker count.
	stdout, _, status = runCLI(t, "torture", "-json", "-lock", "sync", "-workers", "2", "-duration", "50ms")
	var r reportJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || status != exitOK {
		t.Fatalf("status %d, %v: %s", status, err, stdout)
	}
	if r.Iters != nil || r.DurationS < 0.05 || r.Expected != 5*r.Additions || r.Actual != r.Expected {
		t.Errorf("timed JSON: %s", stdout)
	}
}

// TestRegisterRejects checks that the registry refuses names that would be
// ambiguous on the command line.
func TestRegisterRejects(t *testing.T) {
	before := len(kinds)
	for _, name := range []string{"", "all", "mutex", "a,b"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("register(%q) did not panic", name)
				}
			}()
			register(lockerKind(name, "test", false, func() lockerTarget { return lockerTarget{lock: noLock{}} }))
		}()
	}
	if len(kinds) != before {
		t.Errorf("registry grew from %d to %d kinds", before, len(kinds))
	}
}

// TestTortureNoWorkFails: a run in which no worker completed an addition
// (a -duration shorter than one acquisition) checked nothing, and must not
// say PASS. On the old code a "-duration 1ns" run printed "Result: PASS"
// with 0 additions and exited 0. (Whether a 1 ns run completes an
// addition depends on the machine, so the report is built here.)
func TestTortureNoWorkFails(t *testing.T) {
	r := &counterReport{lock: "mutex", workers: 2, perWorker: []int64{0, 0}, value: 5}
	if r.passed() || r.result() != "FAIL" || !strings.Contains(strings.Join(r.failures(), "; "), "checked nothing") {
		t.Fatalf("a run of 0 additions: result %s, failures %q; want FAIL naming the empty run", r.result(), r.failures())
	}
	r.interrupted = "SIGINT" // stopped before any addition: a partial report, not a failure
	if r.result() != "INTERRUPTED" {
		t.Fatalf("an interrupted run of 0 additions: result %s, want INTERRUPTED", r.result())
	}
	r.interrupted, r.perWorker, r.expected, r.actual = "", []int64{1, 0}, 5, 5
	if !r.passed() {
		t.Fatalf("a run of 1 addition, exact: failures %q", r.failures())
	}
}
