//go:build linux

package torture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	"github.com/lockword/lockword/shm"
)

// The worker processes of these tests are the test binary itself:
// ServeWorker (called from worker_test.go's init) runs a worker and exits
// when LOCKWORD_TORTURE_WORKER is set.

func TestTortureProcsPass(t *testing.T) {
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	stdout, stderr, status := runCLI(t, "torture", "-procs", "3", "-workers", "6", "-iters", fmt.Sprint(iters))
	if status != exitOK {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	want := int64(6 * iters * 5)
	clitest.WantLines(t, stdout, []string{"Lock: shared", "Workers: 6", "Processes: 3",
		fmt.Sprintf("Expected: %d", want), fmt.Sprintf("Actual:   %d", want), "Owner-slot violations: 0", "Result: PASS"})
}

func TestTortureProcsNoneFails(t *testing.T) {
	stdout, _, status := runCLI(t, "torture", "-procs", "3", "-lock", "shared-none", "-workers", "6", "-iters", "5000")
	// Without a lock the counter loses updates, or lands anywhere (under
	// -race the instrumented stores go byte by byte, and processes
	// interleave the bytes): a FAIL that names the counter, and
	// owner-slot violations.
	if status != exitFail || !strings.Contains(stdout, "Result: FAIL (") || !strings.Contains(stdout, "counter") ||
		!strings.Contains(stdout, "owner-slot violations") {
		t.Fatalf("status %d, want a FAIL with a wrong counter and owner-slot violations:\n%s", status, stdout)
	}
}

// killRuns is the -kill size of each kill test: 100 kills (about 50 of
// the holder, each a recovery checked for exactness), 40 under -short,
// and 200 with LOCKWORD_LONG=1. The checks are the same at every size.
func killRuns() int {
	switch {
	case os.Getenv("LOCKWORD_LONG") == "1":
		return 200 // the nightly run: more recoveries, the same checks
	case testing.Short():
		return 40
	}
	return 100
}

// checkHolderKills asserts that the run really exercised recovery: the
// supervisor aims every other kill at the holder, stopping it inside its
// critical section first (catchHolder), so about half the kills, and not
// fewer than a third on any machine state, must hit it (measured: 102-131
// of 200 idle, 112-117 with two CPU hogs), and most of those mid-update.
// (Not quite any state: shared-rw, which aims only half its kills at the
// writer, got 23-26 of 100 beside two CPU hogs and two other test runs,
// so TestTortureProcsKillFairKinds adds up to three of its runs' holder
// kills.)
// Before the aim used the owner slot and a stop, the fair kinds saw 0-19
// of 200 on a fresh clone.
func checkHolderKills(t *testing.T, k *killReport, kills int) {
	t.Helper()
	if k.HolderKills < kills/3 || k.RolledBack < int64(k.HolderKills/2) {
		t.Errorf("only %d of %d kills hit the holder (%d rollbacks; %d holder kills needed): the supervisor's aim at the holder failed, and recovery was barely exercised", k.HolderKills, k.Kills, k.RolledBack, kills/3)
	}
}

// TestTortureProcsKill: the CI run of the owner-death torture, killRuns
// kills. Every kill of the holder is recovered exactly
// once, without a hang, and the counter equals the committed additions
// exactly. It runs the lockword binary built without the race detector:
// a race-instrumented worker takes a large share of a second of CPU to
// start, and on two cores the respawns then starve the recovering waiter,
// so the latency would measure the instrumentation, not the lock.
func TestTortureProcsKill(t *testing.T) {
	bin := clitest.BuildLockword(t)
	kills := killRuns()
	cmd := exec.Command(bin, "torture", "-procs", "4", "-kill", "-kills", fmt.Sprint(kills), "-json")
	r, out := runJSONReport(t, cmd)
	k := r.Kill
	if k == nil || *r.Processes != 4 || k.Kills != kills || k.Hangs != 0 || k.Recoveries != int64(k.HolderKills) || r.Expected != r.Actual || r.Result != "PASS" {
		t.Fatalf("bad kill report: %s", out)
	}
	checkHolderKills(t, k, kills)
	checkRecoveryLatency(t, k)
	if d := k.Recovery; d == nil || d.Samples < 1 || d.Samples > k.HolderKills || !(d.P50Ms <= d.P99Ms && d.P99Ms <= d.MaxMs) || d.MaxMs != k.MaxRecoveryMs {
		t.Errorf("recovery latency distribution %+v for %d holder kills, max %.1f ms", d, k.HolderKills, k.MaxRecoveryMs)
	}
}

// checkRecoveryLatency bounds the median recovery latency of a kill run.
// Detection itself is bounded by 100 ms (TestSharedMutexOwnerDeath in the
// library asserts that); this latency also counts the wait for a CPU
// while the replacement process starts. The tail belongs to the host:
// at load 25 on 2 cores one run's maximum was 1188 ms with a median of
// 87 ms, so the maximum is reported, not bounded. A waiter that noticed a
// dead holder only on some timeout of a second or more puts the median
// past 500 ms on any host; one that never did shows as a hang.
func checkRecoveryLatency(t *testing.T, k *killReport) {
	t.Helper()
	if d := k.Recovery; d == nil || d.P50Ms > 500 {
		t.Errorf("recovery latency %+v: want a median within 500 ms", d)
	}
	t.Logf("recovery latency: max %.1f ms", k.MaxRecoveryMs)
}

// runJSONReport runs cmd, a lockword torture run with -json, and returns
// its decoded report and its output, which it logs. A failed run or
// undecodable output stops t.
func runJSONReport(t *testing.T, cmd *exec.Cmd) (reportJSON, []byte) {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r reportJSON
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("%s", out)
	return r, out
}

// TestTortureProcsKillCatchesBrokenRepair: workers that take ErrOwnerDead
// but do not roll the half-done update back must fail the accounting.
func TestTortureProcsKillCatchesBrokenRepair(t *testing.T) {
	t.Setenv(breakRepairEnv, "1")
	// The accounting fails only if some kill lands on a holder inside
	// its update. Of 40 kills about half aim at the holder, and nearly
	// all of those land inside, but on a loaded machine a run once had
	// none that did: up to three runs, and the broken repair must be
	// caught in one of them.
	var stdout string
	var status int
	for range 3 {
		stdout, _, status = runCLI(t, "torture", "-procs", "3", "-kill", "-kills", "40")
		if status == exitFail && strings.Contains(stdout, "Result: FAIL (the counter is off by") {
			return
		}
		if status != exitOK {
			break
		}
	}
	t.Fatalf("status %d, want a FAIL of the accounting:\n%s", status, stdout)
}

func TestTortureProcsUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string // what the first line of stderr must say
	}{
		{[]string{"-procs", "-1"}, "-procs must be between 0 and"},
		{[]string{"-procs", "1000000"}, "-procs must be between 0 and 512, got 1000000"},
		{[]string{"-procs", "2", "-lock", "mutex"}, "kind mutex runs in one process"},
		{[]string{"-lock", "shared"}, "kind shared runs across processes"},
		{[]string{"-kill"}, "-kill needs -procs N"},
		{[]string{"-procs", "2", "-kill", "-iters", "5"}, "-kill runs until -kills kills"},
		// A valid count without -kill: the missing flag is the error,
		// not the count ("must be at least 1, got 5" would puzzle).
		{[]string{"-kills", "5"}, "-kills needs -kill"},
		{[]string{"-procs", "2", "-kills", "5"}, "-kills needs -kill"},
		{[]string{"-kills", "0"}, "-kills needs -kill"},
		{[]string{"-procs", "2", "-kill", "-kills", "0"}, "-kills must be at least 1, got 0"},
		{[]string{"-procs", "8", "-workers", "4"}, "-procs 8 needs at least as many -workers"},
	} {
		_, stderr, status := runCLI(t, append([]string{"torture"}, c.args...)...)
		first, _, _ := strings.Cut(stderr, "\n")
		if status != exitUsage || !strings.HasPrefix(first, "lockword torture: "+c.msg) {
			t.Errorf("torture %v: status %d, stderr %q; want 2 and %q", c.args, status, stderr, c.msg)
		}
	}
	// -procs alone picks the shared kind and enough workers.
	opts, _, ok := parseTorture([]string{"-procs", "20"}, new(strings.Builder), new(strings.Builder))
	if !ok || len(opts.kinds) != 1 || opts.kinds[0].name != "shared" || opts.cfg.workers != 20 {
		t.Fatalf("-procs 20: %+v", opts)
	}
}

// TestTortureProcsInterrupted: SIGINT or SIGTERM stops a -procs run
// cleanly: the worker processes stop between updates and are reaped, the
// region file is removed, the report so far (exact: the counter equals the
// committed additions) says it was interrupted, and the status is 128 +
// the signal. The SIGINT goes to the whole process group, as a terminal's
// Ctrl-C does: the workers must not die of it mid-update.
func TestTortureProcsInterrupted(t *testing.T) {
	bin := clitest.BuildLockword(t)
	for _, c := range []struct {
		name   string
		sig    syscall.Signal
		group  bool // signal the process group, not the supervisor alone
		status int
		args   []string
	}{
		{"SIGINT", syscall.SIGINT, true, 130, []string{"-procs", "2", "-iters", "1000000000"}},
		{"SIGTERM", syscall.SIGTERM, false, 143, []string{"-procs", "2", "-kill", "-kills", "1000000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"torture", "-json"}, c.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			pattern := filepath.Join(regionDir(), fmt.Sprintf("lockword-torture-%d-*", pid))
			t.Cleanup(func() {
				cmd.Process.Kill()
				if files, _ := filepath.Glob(pattern); len(files) > 0 {
					for _, f := range files {
						os.Remove(f)
					}
				}
			})
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()

			// Wait until both workers have attached, then let them run.
			var workers []int
			for deadline := time.Now().Add(30 * time.Second); len(workers) < 2; time.Sleep(5 * time.Millisecond) {
				select {
				case err := <-exited: // stderr is ours to read once it has exited
					t.Fatalf("the supervisor exited (%v) before its workers attached\n%s%s", err, stdout.String(), stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("workers did not attach within 30 s (exit %v)\n%s", <-exited, stderr.String())
				}
				workers = workers[:0]
				if info, ok := inspectRunRegion(t, pid, "lockword-torture-"); ok {
					for _, p := range info.Processes {
						if p.PID != pid {
							workers = append(workers, p.PID)
						}
					}
				}
			}
			time.Sleep(300 * time.Millisecond)
			target := pid
			if c.group {
				target = -pid
			}
			if err := syscall.Kill(target, c.sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("still running 30 s after %s\n%s", c.name, stderr.String())
			}
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != c.status {
				t.Fatalf("after %s: %v (status %d), want exit status %d\nstdout: %s\nstderr: %s", c.name, err, cmd.ProcessState.ExitCode(), c.status, stdout.String(), stderr.String())
			}
			if files, _ := filepath.Glob(pattern); len(files) != 0 {
				t.Errorf("region file left behind: %v", files)
			}
			for _, w := range workers {
				// The supervisor reaped them before it exited: gone.
				if err := syscall.Kill(w, 0); err != syscall.ESRCH {
					t.Errorf("worker process %d still exists after the supervisor exited (kill 0: %v)", w, err)
				}
			}
			var r reportJSON
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, stdout.String())
			}
			if r.Interrupted != c.name || r.Result != "INTERRUPTED" || r.Additions == 0 || r.Expected != r.Actual || r.OwnerViolations != 0 {
				t.Errorf("report: %s\nwant interrupted by %s, additions made, counter exact", stdout.String(), c.name)
			}
			if k := r.Kill; c.sig == syscall.SIGTERM && (k == nil || k.Kills == 0 || k.Recoveries != int64(k.HolderKills) || k.Hangs != 0) {
				t.Errorf("kill report: %s", stdout.String())
			}
			if !strings.Contains(stderr.String(), "interrupted by "+c.name) {
				t.Errorf("stderr %q does not say it was interrupted", stderr.String())
			}
		})
	}
}

// TestTortureInterruptedText: the text report of an interrupted counted
// run says so and gives the additions made, not the count asked for.
func TestTortureInterruptedText(t *testing.T) {
	cfg := &config{workers: 2, iters: 1000, value: 5, procs: 2}
	r := newReport(cfg, "shared", hammerRun{perWorker: []int64{10, 20}, elapsed: time.Second})
	r.procs, r.actual, r.interrupted = 2, 150, "SIGINT"
	var b strings.Builder
	r.writeText(&b)
	for _, line := range []string{"Interrupted: by SIGINT after 1s; a partial report, of the additions made until then",
		"Additions per worker: 1000 asked, made: min 10, max 20 (30 total)", "Expected: 150", "Result: INTERRUPTED (no check failed until then)"} {
		if !clitest.HasLine(b.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, b.String())
		}
	}
	if r.actual = 145; r.result() != "FAIL" {
		t.Errorf("an interrupted run whose counter is off: result %s, want FAIL", r.result())
	}
}

// TestTortureProcsWorkerKilledFromOutside: a worker process killed by
// someone else fails the run with a report of what the others did and a
// reason that says so, not with a bare error.
func TestTortureProcsWorkerKilledFromOutside(t *testing.T) {
	t.Parallel() // its own binary and children; mostly a 2 s wait
	bin := clitest.BuildLockword(t)
	cmd := exec.Command(bin, "torture", "-procs", "3", "-duration", "6s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A worker: a child of the supervisor, once the run has started.
	var victim int
	for deadline := time.Now().Add(time.Minute); victim == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no worker process appeared")
		}
		victim = childOf(cmd.Process.Pid)
	}
	// Timing assumption: the workers attach and the run starts within
	// 2 s of the first one's start (milliseconds idle; under a second at
	// load 20); a kill before that is reported as a failed start.
	time.Sleep(2 * time.Second)
	syscall.Kill(victim, syscall.SIGKILL)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFail {
		t.Fatalf("exit %v, want %d\n%s", err, exitFail, &out)
	}
	want := fmt.Sprintf("Result: FAIL (worker process PID %d died of signal 9", victim)
	if s := out.String(); !strings.Contains(s, want) || !strings.Contains(s, "Expected: ") {
		t.Fatalf("output lacks the report or %q:\n%s", want, s)
	}
}

// childOf returns the PID of a worker process of pid, or 0: a child, in
// the children files of its threads (any thread may have forked it), whose
// argv[0] is a worker's. Not any child: Go's os package clones a child that
// exits at once to learn whether pidfds work, and a child between fork and
// exec is still a copy of its parent.
func childOf(pid int) int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(w)
			if err != nil {
				continue
			}
			argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n))
			if name, _, _ := bytes.Cut(argv, []byte{0}); string(name) == workerArgv0 {
				return n
			}
		}
	}
	return 0
}

// inspectRunRegion describes the region of the running torture supervisor
// pid whose label starts with label ("lockword-torture-"), reached through
// the supervisor's open descriptor of it (the region is a memfd, with no
// path). ok is false while there is none yet.
func inspectRunRegion(t *testing.T, pid int, label string) (info *shm.RegionInfo, ok bool) {
	t.Helper()
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(target, "/memfd:"+label+fmt.Sprint(pid)+"-") {
			continue
		}
		f, err := os.OpenFile(fd, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		defer f.Close()
		r, err := shm.OpenFile(f, nil)
		if err != nil {
			continue
		}
		defer r.Close()
		if info, err = r.Inspect(); err == nil {
			// Less ourselves: we attached to look.
			procs := info.Processes[:0]
			for _, p := range info.Processes {
				if p.PID != os.Getpid() {
					procs = append(procs, p)
				}
			}
			info.Processes = procs
			return info, true
		}
	}
	return nil, false
}

// TestTortureProcsSupervisorKilled: a supervisor killed with SIGKILL, which
// nothing can catch, leaves no region file behind (the region is a memfd
// that vanishes with its last process) and no worker running.
func TestTortureProcsSupervisorKilled(t *testing.T) {
	bin := clitest.BuildLockword(t)
	for _, c := range []struct {
		label string
		args  []string
	}{
		{"lockword-torture-", []string{"-procs", "3", "-duration", "30s"}},
		{"lockword-torture-ring-", []string{"-lock", "ring", "-procs", "2", "-duration", "30s"}},
	} {
		args := c.args
		cmd := exec.Command(bin, append([]string{"torture"}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		var workers []int
		for deadline := time.Now().Add(30 * time.Second); len(workers) < 2; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("%q: workers did not attach", args)
			}
			workers = workers[:0]
			if info, ok := inspectRunRegion(t, pid, c.label); ok {
				for _, p := range info.Processes {
					if p.PID != pid && p.Alive {
						workers = append(workers, p.PID)
					}
				}
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		if files, _ := filepath.Glob(filepath.Join(regionDir(), fmt.Sprintf("lockword-torture*-%d-*", pid))); len(files) != 0 {
			t.Errorf("%q: region file left behind by a killed supervisor: %v", args, files)
		}
		for _, w := range workers {
			// Pdeathsig kills them; give the kernel a moment.
			for deadline := time.Now().Add(10 * time.Second); syscall.Kill(w, 0) != syscall.ESRCH; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("%q: worker %d outlived its killed supervisor", args, w)
					break
				}
			}
		}
	}
}

// TestTortureProcsKillFairKinds is TestTortureProcsKill for the shared
// ticket mutex and the RW mutex's write side: SIGKILLed holders are
// recovered exactly once each, no hang, and the counter equals the
// committed additions exactly.
func TestTortureProcsKillFairKinds(t *testing.T) {
	bin := clitest.BuildLockword(t)
	kills := killRuns()
	for _, kind := range []string{"shared-ticket", "shared-rw"} {
		t.Run(kind, func(t *testing.T) {
			// Every run must be exact on its own. How many kills
			// land on a holder is the supervisor's aim, which a
			// loaded host spoils for shared-rw, whose aim is split
			// between the writer and the readers (23-26 of 100 on
			// the writer beside two CPU hogs), so up to three of its
			// runs count together towards the recoveries
			// checkHolderKills requires. shared-ticket gets one run:
			// it is what catches a broken aim (catchHolder always
			// giving up: 16 of 300 for shared-rw's three runs, and
			// for shared-ticket's one run too few, where three runs'
			// random kills reached 44).
			runs := 1
			if kind == "shared-rw" {
				runs = maxAimRuns
			}
			var sum killReport
			for run := 1; run <= runs; run++ {
				k := runFairKill(t, bin, kind, kills)
				sum.HolderKills += k.HolderKills
				sum.RolledBack += k.RolledBack
				sum.Kills += k.Kills
				sum.MaxRecoveryMs = max(sum.MaxRecoveryMs, k.MaxRecoveryMs)
				if sum.HolderKills >= kills/3 && sum.RolledBack >= int64(sum.HolderKills/2) {
					break
				}
			}
			checkHolderKills(t, &sum, kills)
			t.Logf("%s: %d kills, %d of the holder, max recovery %.1f ms", kind, sum.Kills, sum.HolderKills, sum.MaxRecoveryMs)
		})
	}
}

// maxAimRuns is how many shared-rw kill runs TestTortureProcsKillFairKinds
// may add up to reach the holder kills checkHolderKills requires.
const maxAimRuns = 3

// runFairKill runs one kill torture of kind and fails the test unless it
// is exact: every kill made, no hang, every holder kill recovered once,
// the counter equal to the committed additions.
func runFairKill(t *testing.T, bin, kind string, kills int) *killReport {
	t.Helper()
	out, err := exec.Command(bin, "torture", "-procs", "4", "-lock", kind, "-kill", "-kills", fmt.Sprint(kills), "-json").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r reportJSON
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	k := r.Kill
	if k == nil || k.Kills != kills || k.Hangs != 0 || k.Recoveries != int64(k.HolderKills) || r.Expected != r.Actual || r.Result != "PASS" {
		t.Fatalf("bad kill report: %s", out)
	}
	return k
}
