//go:build linux

package ctest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockword/lockword/internal/cbuild"
	"github.com/lockword/lockword/shm"
)

// TestCFileLockTimeout: a process stopped while it holds a region's file
// lock makes the C library's takers of that lock give up at the open's
// timeout (200 ms here) with LW_ETIMEDOUT, and lw_region_lock_holder names
// the holder and says it is stopped: lw_region_open_init, lw_region_mutex
// of a new name, and lw_region_close, which closes nothing then and
// succeeds once the holder is gone. They blocked in flock(LOCK_EX) for as
// long as the holder held on.
//
// Timing assumption: a call whose deadline passed returns within 2 s on
// any load this suite runs under (the worker measures, so process start-up
// does not count); a call still blocked after a minute is the bug.
func TestCFileLockTimeout(t *testing.T) {
	const timeoutMs, slackMs = 200, 2000
	b := cBuild(t, cbuild.Plain)
	path, r := goRegion(t)
	r.Close()
	cmd := exec.Command(b.Worker, "flocked", path, strconv.Itoa(timeoutMs))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := start(t, cmd)
	if l := w.line(time.Minute); l != "opened" {
		t.Fatalf("C worker: %q, want opened", l)
	}
	holder := startGo(t, "flock", path)
	if l := holder.line(time.Minute); l != "locked" {
		t.Fatalf("holder: %q, want locked", l)
	}
	pid := holder.cmd.Process.Pid
	holder.cmd.Process.Signal(syscall.SIGSTOP)
	defer holder.cmd.Process.Signal(syscall.SIGCONT)
	waitStopped(t, pid)
	io.WriteString(stdin, "go\n")
	for _, call := range []string{"open", "mutex", "close"} {
		got := w.line(time.Minute)
		var name string
		var code, ms, holderPID, stopped int
		if _, err := fmt.Sscan(got, &name, &code, &ms, &holderPID, &stopped); err != nil || name != call {
			t.Fatalf("C worker: %q, want %q CODE MS PID STOPPED", got, call)
		}
		if code != 110 || holderPID != pid || stopped != 1 {
			t.Errorf("%s: code %d, holder %d, stopped %d: want LW_ETIMEDOUT (110) naming PID %d, stopped (1)", call, code, holderPID, stopped, pid)
		}
		if ms < timeoutMs || ms > timeoutMs+slackMs {
			t.Errorf("%s gave up after %d ms with a timeout of %d ms", call, ms, timeoutMs)
		}
	}
	holder.cmd.Process.Kill()
	io.WriteString(stdin, "go\n")
	if got, _ := w.wait(time.Minute); len(got) != 1 || got[0] != "close 0" {
		t.Errorf("close once the holder is gone: %q, want close 0", got)
	}
}

// waitStopped waits until process pid's state is T (stopped): kill returns
// before the signal is taken.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		b := string(raw)
		if i := strings.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
	}
	t.Fatalf("process %d did not stop within 10 s", pid)
}

// TestCOpenReclaimsAbandonedCreation: the file a creator leaves when it
// dies after creating and sizing it, before publishing the header (its
// flock released by its death, here by closing the creator's descriptor):
// the C opener initializes it (docs/abi.md, "Abandoned creations") and
// takes a lock in it, which Go then sees held.
func TestCOpenReclaimsAbandonedCreation(t *testing.T) {
	path := regionPath(t)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(shm.DefaultRegionSize); err != nil {
		t.Fatal(err)
	}
	f.Close() // the creator dies: its lock goes
	p := startC(t, cBuild(t, cbuild.Plain).Worker, "hold", path, "m")
	if l := p.line(30 * time.Second); l != "held" {
		t.Fatalf("C opener of an abandoned creation: %q, want \"held\"\n%s", l, p.tail.String())
	}
	r, err := shm.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, _ := r.Mutex("m")
	if m.TryLock() {
		t.Error("Go took the lock that the C process holds")
		m.Unlock()
	}
}
