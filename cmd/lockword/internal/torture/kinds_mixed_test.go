//go:build linux

package torture

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	"github.com/lockword/lockword/internal/cbuild"
)

// needC skips a test that runs C workers where gcc is missing, and builds
// the C worker first, so that its build time does not count in the run.
func needC(t *testing.T) {
	t.Helper()
	if _, err := cbuild.Cached(); errors.Is(err, cbuild.ErrNoCompiler) {
		t.Skip("gcc is not installed: no C workers (CI installs gcc)")
	} else if err != nil {
		t.Fatal(err)
	}
}

// TestTortureMixedPass: Go and C worker processes, 2 threads (goroutines)
// each and 8 in all on 2 cores, on one shm.Mutex: exact total, no
// owner-slot violation, and the shared statistics, counted by both
// languages, agree with the additions.
func TestTortureMixedPass(t *testing.T) {
	needC(t)
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	stdout, stderr, status := runCLI(t, "torture", "-lock", "shared-c", "-procs", "4", "-workers", "8", "-iters", fmt.Sprint(iters))
	if status != exitOK {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	want := int64(8 * iters * 5)
	clitest.WantLines(t, stdout, []string{"Lock: shared-c", "Processes: 4", fmt.Sprintf("Actual:   %d", want), "Owner-slot violations: 0", "Result: PASS"})
}

// TestTortureMixedBrokenFails: C workers whose trylock ignores the lock
// word must make the mixed torture fail: the checker can fail.
func TestTortureMixedBrokenFails(t *testing.T) {
	needC(t)
	stdout, stderr, status := runCLI(t, "torture", "-lock", "shared-c-broken", "-procs", "4", "-workers", "8", "-iters", "5000")
	if status != exitFail || !strings.Contains(stdout, "Result: FAIL") {
		t.Fatalf("status %d, want a FAIL:\n%s\n%s", status, stdout, stderr)
	}
}

// TestTortureMixedKill: the supervisor SIGKILLs Go and C worker processes
// alike, holders often; each holder's death is recovered exactly once, by
// a waiter of either language, without a hang, and the counter equals the
// committed additions, over killRuns kills. The language
// log shows that holders of both languages died and that waiters of both
// languages recovered.
func TestTortureMixedKill(t *testing.T) {
	// Parallel: most of its time is waits for respawned processes, which
	// overlap the etcd tests' waits; it runs its own binary and env.
	t.Parallel()
	needC(t)
	bin := clitest.BuildLockword(t)
	kills := killRuns()
	log := filepath.Join(t.TempDir(), "langs")
	cmd := exec.Command(bin, "torture", "-lock", "shared-c", "-procs", "4", "-kill", "-kills", fmt.Sprint(kills), "-json")
	cmd.Env = append(os.Environ(), langLogEnv+"="+log)
	r, out := runJSONReport(t, cmd)
	k := r.Kill
	if k == nil || k.Kills != kills || k.Hangs != 0 || k.Recoveries != int64(k.HolderKills) || r.Expected != r.Actual || r.OwnerViolations != 0 || r.Result != "PASS" {
		t.Fatalf("bad kill report: %s", out)
	}
	checkHolderKills(t, k, kills)
	checkRecoveryLatency(t, k)
	lines, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	cPIDs := map[string]bool{}
	var recs [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		f := strings.Fields(l) // LANG what PID DEADPID
		if len(f) != 4 {
			t.Fatalf("bad log line %q", l)
		}
		if f[1] == "start" && f[0] == "c" {
			cPIDs[f[2]] = true
		}
		if f[1] == "recovered" {
			recs = append(recs, f)
		}
	}
	pairs := map[string]int{}
	for _, f := range recs {
		dead := "go"
		if cPIDs[f[3]] {
			dead = "c"
		}
		pairs[dead+" holder, "+f[0]+" recoverer"]++
	}
	t.Logf("recoveries by holder and recoverer language: %v", pairs)
	if int64(len(recs)) != k.Recoveries {
		t.Errorf("the log lists %d recoveries, the report %d", len(recs), k.Recoveries)
	}
	if pairs["c holder, go recoverer"]+pairs["c holder, c recoverer"] == 0 || pairs["go holder, go recoverer"]+pairs["go holder, c recoverer"] == 0 ||
		pairs["go holder, c recoverer"]+pairs["c holder, c recoverer"] == 0 || pairs["c holder, go recoverer"]+pairs["go holder, go recoverer"] == 0 {
		t.Errorf("not every language both died holding and recovered: %v", pairs)
	}
}

// TestTortureMixedPython: Go, C and Python (ctypes over liblockword.so)
// worker processes take the same shm.Mutex in one run: exact total.
func TestTortureMixedPython(t *testing.T) {
	needC(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	iters := 3000
	if testing.Short() {
		iters = 1000
	}
	stdout, stderr, status := runCLI(t, "torture", "-lock", "shared-c-py", "-procs", "3", "-workers", "6", "-iters", fmt.Sprint(iters))
	want := int64(6 * iters * 5)
	if status != exitOK || !clitest.HasLine(stdout, fmt.Sprintf("Actual:   %d", want)) || !clitest.HasLine(stdout, "Result: PASS") {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
}

// TestTortureMixedInstalled: the lockword binary, copied out of the module
// and run from a directory with no c directory above it and an empty
// cache, as a user's installed copy is, builds its C worker from the
// sources embedded in it, and the mixed torture passes. With no C
// compiler on PATH the mixed kinds are a set-up error: exit 2 (1 would
// say a lock failed), saying what is missing, and no process started.
func TestTortureMixedInstalled(t *testing.T) {
	t.Parallel() // its own binary, env and directories; mostly gcc and process waits
	needC(t)
	bin := filepath.Join(t.TempDir(), "lockword")
	b, err := os.ReadFile(clitest.BuildLockword(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "LOCKWORD_C_DIR" && name != "LOCKWORD_C_WORKER" && name != "XDG_CACHE_HOME" && name != "CC" && name != "PATH" {
			env = append(env, kv)
		}
	}
	run := func(path string) (string, string, int) {
		cmd := exec.Command(bin, "torture", "-lock", "shared-c", "-procs", "2", "-workers", "4", "-iters", "500")
		cmd.Dir = t.TempDir()
		// An empty cache each time: nothing built before is found.
		cmd.Env = append(env, "PATH="+path, "XDG_CACHE_HOME="+t.TempDir())
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	stdout, stderr, status := run(os.Getenv("PATH"))
	if status != exitOK || !clitest.HasLine(stdout, "Result: PASS") {
		t.Errorf("installed binary, outside the module: status %d\n%s\n%s", status, stdout, stderr)
	}
	stdout, stderr, status = run(t.TempDir()) // no gcc, no cc
	if status != exitUsage || stdout != "" || !strings.Contains(stderr, "lockword torture: shared-c: no C compiler") {
		t.Errorf("without a C compiler: status %d, stdout %q, stderr %q; want 2 and \"no C compiler\"", status, stdout, stderr)
	}
}
