//go:build linux

package torture

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

// runSharedRW runs the lockword binary bin's torture with args and env
// added, and decodes its -json report.
func runSharedRW(t *testing.T, bin string, env []string, args ...string) (reportJSON, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"torture", "-lock", "shared-rw", "-procs", "3", "-json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.Output() // a FAIL exits non-zero: the report says why
	var r reportJSON
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r, string(out)
}

// TestTortureSharedRWKillReaders: with -kill, shared-rw's workers read
// too and the supervisor kills read holders; the run passes with exact
// totals, reads that never saw a writer inside, and a write after every
// reader kill within hangTimeout. Assumption (measured: 10 of 40 kills hit
// a reader on an idle 2-core host): a quarter of the kills aim at a read
// holder, and readers hold for killWindowSteps of busy work before about
// half the writes, so at least 1 of 40 kills lands on a reader; on a
// loaded host a run may still miss: up to three runs, and one of them
// must have a reader kill (the requirement is never relaxed).
func TestTortureSharedRWKillReaders(t *testing.T) {
	bin := clitest.BuildLockword(t)
	const kills = 40
	for run := 1; ; run++ {
		r, out := runSharedRW(t, bin, nil, "-kill", "-kills", "40")
		k := r.Kill
		if r.Result != "PASS" || k == nil || k.Kills != kills || k.Hangs != 0 || k.Recoveries != int64(k.HolderKills) ||
			r.Expected != r.Actual || r.Reads == nil || *r.Reads == 0 || r.ReadViolations == nil || *r.ReadViolations != 0 ||
			k.ReaderKills == nil || k.MaxReaderKillToWriteMs == nil || *k.MaxReaderKillToWriteMs > float64(hangTimeout.Milliseconds()) {
			t.Fatalf("bad report: %s", out)
		}
		t.Logf("run %d: %d kills, %d of the holder, %d of a reader; %d reads; max reader kill to write %.1f ms",
			run, k.Kills, k.HolderKills, *k.ReaderKills, *r.Reads, *k.MaxReaderKillToWriteMs)
		if *k.ReaderKills >= 1 {
			return
		}
		if run == 3 {
			t.Fatalf("no kill of %d hit a reader in %d runs: the aim at read holders failed", kills, run)
		}
	}
}

// TestTortureSharedRWReportText: the text report of shared-rw has the
// reader lines; the other kinds' Kills line keeps its format (checked by
// TestTortureProcsKill's callers through the JSON, and here by its text).
func TestTortureSharedRWReportText(t *testing.T) {
	bin := clitest.BuildLockword(t)
	out, err := exec.Command(bin, "torture", "-lock", "shared-rw", "-procs", "2", "-kill", "-kills", "5").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"\nReads: ", " saw a writer inside)\n", "\nKills: 5 (", " of a reader)\n", "\nReader kill to next write: max "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	out, err = exec.Command(bin, "torture", "-lock", "shared", "-procs", "2", "-kill", "-kills", "5").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s := string(out); strings.Contains(s, "Reads:") || strings.Contains(s, "reader") || !strings.Contains(s, " of the lock's holder)\n") {
		t.Errorf("shared's report changed:\n%s", s)
	}
}

// TestTortureSharedRWCatchesBrokenReaders: readers that take no read lock
// must see writers inside, and fail the run. Assumption (measured: 2 of
// 16000 reads with -work 200, 42 with -work 2000, idle 2-core host):
// with 2000 steps of busy work per read some read of 16000 overlaps a
// write; up to three runs, one must catch it.
func TestTortureSharedRWCatchesBrokenReaders(t *testing.T) {
	bin := clitest.BuildLockword(t)
	for run := 1; run <= 3; run++ {
		r, out := runSharedRW(t, bin, []string{breakReadersEnv + "=1"}, "-iters", "2000", "-work", "2000")
		if r.ReadViolations == nil {
			t.Fatalf("no read_violations in the report: %s", out)
		}
		if r.Result == "FAIL" && r.ReadViolations != nil && *r.ReadViolations > 0 &&
			strings.Contains(strings.Join(r.Failures, "; "), "reads saw a writer inside") {
			t.Logf("run %d: %d of %d reads saw a writer inside", run, *r.ReadViolations, *r.Reads)
			return
		}
	}
	t.Fatal("readers that take no lock never saw a writer inside in 3 runs: the reader checks cannot fail")
}
