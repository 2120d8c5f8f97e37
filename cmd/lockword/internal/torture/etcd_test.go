//go:build linux

package torture

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

// The etcd kinds' tests: each run starts its own embedded server (or
// three) on free loopback ports, with its data in a temporary directory
// that the run removes. They run in parallel with each other (they
// mostly wait for leases to expire), after the package's other tests. Worker processes are the test binary itself
// (ServeWorker, from worker_test.go's init). Sizes are CI's: each run takes a few
// seconds on 2 cores; a lease TTL is 1 s, so a kill of the holder or a
// pause costs about 1–2 s.

// etcdTTL is the lease TTL of the test runs: 2 s, so that a live
// worker's keep-alives (every TTL/3) survive a loaded host; a kill or a
// pause then costs 2–3 s.
const etcdTTL = "2s"

// runEtcd runs lockword torture with the test runs' TTL.
func runEtcd(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	return runCLI(t, append([]string{"torture", "-ttl", etcdTTL}, args...)...)
}

// etcdField returns the integer after prefix on a line of the report.
func etcdField(t *testing.T, report, prefix string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `\s*(\d+)`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("report lacks %q:\n%s", prefix, report)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func wantPass(t *testing.T, stdout, stderr string, status int, lines ...string) {
	t.Helper()
	if status != exitOK {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	clitest.WantLines(t, stdout, append(lines, "Owner-slot violations: 0", "Result: PASS"))
}

func TestTortureEtcd(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runEtcd(t, "-lock", "etcd", "-workers", "6", "-iters", "10")
	wantPass(t, stdout, stderr, status, "Lock: etcd", "Workers: 6", "Expected: 300", "Actual:   300")
}

func TestTortureEtcdProcs(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runEtcd(t, "-lock", "etcd", "-procs", "3", "-workers", "6", "-iters", "8")
	wantPass(t, stdout, stderr, status, "Processes: 3", "Expected: 240", "Actual:   240")
}

// TestTortureEtcdKill: every kill of a holder is recovered exactly once,
// with ErrOwnerDead, after about the lease TTL; the total is exact.
func TestTortureEtcdKill(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runEtcd(t, "-lock", "etcd", "-procs", "3", "-workers", "6", "-kill", "-kills", "8")
	wantPass(t, stdout, stderr, status, "Hangs: 0")
	holder := etcdField(t, stdout, "Kills: 8 (")
	if rec := etcdField(t, stdout, "Recoveries:"); rec != holder {
		t.Fatalf("%d recoveries for %d holder kills:\n%s", rec, holder, stdout)
	}
	if etcdField(t, stdout, "Expected:") != etcdField(t, stdout, "Actual:") {
		t.Fatalf("not exact:\n%s", stdout)
	}
}

// TestTortureEtcdKillCheckerFails: workers that ignore an owner death
// (no repair, no record of it) must fail the run: recoveries fall short of
// the holder kills (and the dead holder's owner slot, if it died inside,
// is found set). A run
// that happened to kill no holder proves nothing and is made again.
func TestTortureEtcdKillCheckerFails(t *testing.T) {
	t.Setenv(breakRepairEnv, "1")
	for attempt := 1; ; attempt++ {
		stdout, _, status := runEtcd(t, "-lock", "etcd", "-procs", "3", "-workers", "6", "-kill", "-kills", "6")
		if etcdField(t, stdout, "Kills: 6 (") == 0 && attempt < 3 {
			continue
		}
		// A holder killed inside the critical section leaves the owner
		// slot set; one killed just before Unlock does not: either way its
		// recovery is missing.
		if status != exitFail || !strings.Contains(stdout, "recoveries for") {
			t.Fatalf("status %d, want a FAIL with missing recoveries:\n%s", status, stdout)
		}
		return
	}
}

// TestTortureEtcdPause: a holder stopped past its lease cannot write once
// it goes on (etcd: PASS, exact, late writes rejected); without the fence
// (etcd-unfenced) the run must FAIL with lost updates. A pause that lands
// outside the critical section harms nothing, so an unfenced run that
// lost nothing is made again, up to 3 times (each has 3 pauses).
func TestTortureEtcdPause(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runEtcd(t, "-lock", "etcd", "-procs", "3", "-workers", "6", "-pause", "-pauses", "2")
	wantPass(t, stdout, stderr, status, "Pauses: 2 (SIGSTOP of the holder past its TTL)", "Hangs: 0")
	if etcdField(t, stdout, "Expected:") != etcdField(t, stdout, "Actual:") {
		t.Fatalf("not exact:\n%s", stdout)
	}
	wantCaughtIn3(t, runEtcd, "lost updates", "the unfenced kind, paused,", "a paused holder's late write", "-lock", "etcd-unfenced", "-procs", "3", "-workers", "6", "-pause")
}

// TestTortureEtcdCluster: three members, the leader hard-stopped a third
// of the way through; the run completes exact after the re-election.
func TestTortureEtcdCluster(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runEtcd(t, "-lock", "etcd-cluster", "-workers", "6", "-iters", "12")
	wantPass(t, stdout, stderr, status, "Expected: 360", "Actual:   360")
	if !regexp.MustCompile(`(?m)^Leader stop: member m\d stopped after \d+ additions; m\d elected in `).MatchString(stdout) {
		t.Fatalf("no leader stop and re-election in:\n%s", stdout)
	}
}

// TestTortureEtcdChaos: cancellations at random points, a slow endpoint
// and member stops (the short version of -chaos): exact, no phantom
// holder, no false owner-death report.
func TestTortureEtcdChaos(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runEtcd(t, "-lock", "etcd", "-chaos", "-workers", "4", "-iters", "6")
	wantPass(t, stdout, stderr, status, "Expected: 120", "Actual:   120", "Phantom holders: 0", "False owner-death reports: 0", "Hangs: 0")
	if etcdField(t, stdout, "Chaos:") == 0 {
		t.Fatalf("no acquisition was cancelled:\n%s", stdout)
	}
}

func TestTortureEtcdUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-lock", "etcd", "-pause"},
		{"-lock", "etcd", "-etcd", "nohost"},
		{"-lock", "etcd", "-ttl", "10ms"},
		{"-lock", "etcd", "-procs", "2", "-pause", "-kill"},
		{"-lock", "etcd", "-pauses", "2"},
		{"-lock", "etcd", "-chaos", "-procs", "2"},
		{"-lock", "etcd", "-chaos", "-etcd", "127.0.0.1:2379"},
		{"-lock", "etcd-semaphore", "-procs", "2", "-pause"},
		{"-lock", "etcd-rw", "-chaos"},
	} {
		if _, stderr, status := runCLI(t, append([]string{"torture"}, args...)...); status != exitUsage || stderr == "" {
			t.Errorf("%v: status %d, want %d with a message; stderr %q", args, status, exitUsage, stderr)
		}
	}
	// Nothing listens on port 1: a clear set-up error, exit 2, no hang.
	_, stderr, status := runEtcd(t, "-lock", "etcd", "-etcd", "127.0.0.1:1", "-workers", "2", "-iters", "1")
	if status != exitUsage || !strings.Contains(stderr, "-etcd 127.0.0.1:1: etcd unreachable") {
		t.Fatalf("unreachable etcd: status %d, stderr %q", status, stderr)
	}
}

// TestEtcdHangFor: the hang bound is hangTimeout on a host with a core
// free, grows with the load per core, and stops at its cap.
func TestEtcdHangFor(t *testing.T) {
	for _, c := range []struct {
		load float64
		cpus int
		want time.Duration
	}{
		{0.3, 2, hangTimeout},
		{2, 2, hangTimeout},
		{6, 2, 3 * hangTimeout},
		{24, 2, etcdHangScaleMax * hangTimeout},
		{24, 16, 3 * hangTimeout / 2},
	} {
		if got := etcdHangFor(c.load, c.cpus); got != c.want {
			t.Errorf("etcdHangFor(%v, %d) = %v, want %v", c.load, c.cpus, got, c.want)
		}
	}
}
