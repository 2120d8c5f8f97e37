//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	"github.com/lockword/lockword/shm"
)

// TestHoldChild holds a lock in a region until killed: run by
// TestInspectStoppedHolder.
func TestHoldChild(t *testing.T) {
	r := childRegion(t, "LOCKWORD_HOLD", "TestInspectStoppedHolder")
	m, _ := r.Mutex("orders")
	if os.Getenv("LOCKWORD_HOLD_STATS") != "" {
		m.EnableStats()
	}
	m.Lock()
	if n := os.Getenv("LOCKWORD_HOLD_SEM"); n != "" {
		// Also hold n permits of a 4-permit semaphore "gpus".
		var k int64
		fmt.Sscan(n, &k)
		s, err := r.Semaphore("gpus", 4)
		if err == nil {
			err = s.Acquire(context.Background(), k)
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	fmt.Println("locked")
	if os.Getenv("LOCKWORD_HOLD_EXIT") != "" {
		os.Exit(0) // holding: a zombie until the parent reaps it
	}
	time.Sleep(time.Hour)
}

// childRegion opens, for a child test, the region that $env names; with
// $env unset (the test binary run by hand) it skips: parent runs the child.
func childRegion(t *testing.T, env, parent string) *shm.Region {
	path := os.Getenv(env)
	if path == "" {
		t.Skip("run by " + parent)
	}
	r, err := shm.Open(path, nil)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	return r
}

// startHolder starts TestHoldChild on the region at path with the extra
// environment env, and returns once it holds "orders".
func startHolder(t *testing.T, path string, env ...string) *exec.Cmd {
	t.Helper()
	return startChild(t, "TestHoldChild", "locked", append([]string{"LOCKWORD_HOLD=" + path}, env...)...)
}

// startChild re-executes the test binary to run the child test named test
// with the extra environment env, and returns once the child has printed
// the line ready. The child is continued, killed and reaped at cleanup.
func startChild(t *testing.T, test, ready string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, len(ready)+1)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != ready+"\n" {
		t.Fatalf("child: %q %v", buf, err)
	}
	return cmd
}

// startStoppedHolder is startHolder, then SIGSTOP: it returns once the
// holder is stopped.
func startStoppedHolder(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := startHolder(t, path)
	cmd.Process.Signal(syscall.SIGSTOP)
	waitProcState(t, cmd.Process.Pid, "stopped")
	return cmd
}

// inspectRow returns the objects table's row of the object called name.
func inspectRow(t *testing.T, path, name string) string {
	t.Helper()
	stdout, stderr, status := runCLI(t, "inspect", path)
	if status != exitOK {
		t.Fatalf("inspect: status %d\n%s", status, stderr)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return l
		}
	}
	t.Fatalf("no row for %s:\n%s", name, stdout)
	return ""
}

// TestInspectHolderStateAndHeldSince: inspect tells an operator what the
// holder process is doing (stopped, zombie: from /proc/PID/stat) and from
// which stamp HELD FOR counts: the acquirer's when statistics are on, so
// the first look already shows the whole hold; otherwise the first stamp,
// which for a fast-path hold is this inspection's own (so "≥0s").
func TestInspectHolderStateAndHeldSince(t *testing.T) {
	const heldBeforeLook = 300 * time.Millisecond
	for _, stats := range []bool{false, true} {
		r, path := testRegion(t)
		r.Mutex("orders")
		var env []string
		if stats {
			env = append(env, "LOCKWORD_HOLD_STATS=1")
		}
		cmd := startHolder(t, path, env...)
		time.Sleep(heldBeforeLook)
		cmd.Process.Signal(syscall.SIGSTOP)
		waitProcState(t, cmd.Process.Pid, "stopped")
		row := inspectRow(t, path, "orders")
		t.Logf("stats %v: %s", stats, row)
		if !regexp.MustCompile(fmt.Sprintf(`\b%d\s+yes \(stopped\)`, cmd.Process.Pid)).MatchString(row) {
			t.Errorf("stats %v: the row does not say the holder is alive and stopped: %q", stats, row)
		}
		held := regexp.MustCompile(`(≥?)([0-9.]+m?s) \((acquired|first seen)\)`).FindStringSubmatch(row)
		switch {
		case held == nil:
			t.Errorf("stats %v: HELD FOR does not say which stamp it counts from: %q", stats, row)
		case stats && held[3] != "acquired":
			t.Errorf("stats on: HELD FOR %q, want it from the acquisition", held[0])
		case !stats && held[3] != "first seen":
			t.Errorf("stats off: HELD FOR %q, want it from the first sight", held[0])
		case stats:
			if d, _ := time.ParseDuration(held[2]); d < heldBeforeLook {
				t.Errorf("stats on: the first look says held for %v, but it was held %v before it", d, heldBeforeLook)
			}
		}
	}
	// A holder that exited and was not reaped: dead, and a zombie.
	r, path := testRegion(t)
	r.Mutex("orders")
	cmd := startHolder(t, path, "LOCKWORD_HOLD_EXIT=1")
	waitProcState(t, cmd.Process.Pid, "zombie")
	if row := inspectRow(t, path, "orders"); !regexp.MustCompile(fmt.Sprintf(`\b%d\s+no \(zombie\)`, cmd.Process.Pid)).MatchString(row) {
		t.Errorf("a zombie holder: %q", row)
	}
}

// TestInspectJSONHolderState: inspect -json gives each attached process's
// state and each lock holder's, as the text view does: a stopped holder
// is "stopped" (alive, and it never lets go until continued), this
// process "running".
func TestInspectJSONHolderState(t *testing.T) {
	r, path := testRegion(t)
	r.Mutex("orders")
	cmd := startStoppedHolder(t, path)
	stdout, stderr, status := runCLI(t, "inspect", "-json", path)
	var info struct {
		Objects []struct {
			Name        string `json:"name"`
			HolderPID   int    `json:"holder_pid"`
			HolderState string `json:"holder_state"`
		} `json:"objects"`
		Processes []struct {
			PID   int    `json:"pid"`
			State string `json:"state"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(stdout), &info); status != exitOK || err != nil || len(info.Objects) != 1 {
		t.Fatalf("inspect -json: status %d, %v, stderr %q:\n%s", status, err, stderr, stdout)
	}
	if o := info.Objects[0]; o.HolderPID != cmd.Process.Pid || o.HolderState != "stopped" {
		t.Errorf("inspect -json: object %+v: want holder %d, holder_state \"stopped\"", o, cmd.Process.Pid)
	}
	want := map[int]string{cmd.Process.Pid: "stopped", os.Getpid(): "running"}
	for _, p := range info.Processes {
		if p.State != want[p.PID] {
			t.Errorf("inspect -json: process %d has state %q, want %q", p.PID, p.State, want[p.PID])
		}
		delete(want, p.PID)
	}
	if len(want) > 0 {
		t.Errorf("inspect -json: processes %v missing:\n%s", want, stdout)
	}
}

// waitProcState waits until process pid is in state (as procState names
// it): the signal, or the exit, takes effect asynchronously.
func waitProcState(t *testing.T, pid int, state string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); procStateRaw(pid) != state; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d never became %s", pid, state)
		}
	}
}

// procStateRaw reads the state letter of /proc/PID/stat, as the test's
// own judge of what procState must say.
func procStateRaw(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) == 0 {
		return ""
	}
	return map[string]string{"T": "stopped", "Z": "zombie"}[f[0]]
}

// TestInspectStoppedHolder: inspect shows a lock held by a stopped process
// as held, holder alive, and the held-for time growing between runs.
func TestInspectStoppedHolder(t *testing.T) {
	r, path := testRegion(t)
	r.Mutex("orders")
	r.Bytes("orders-data", 100)
	cmd := startStoppedHolder(t, path)

	var held []time.Duration
	for range 3 {
		stdout, stderr, status := runCLI(t, "inspect", "-json", path)
		if status != exitOK {
			t.Fatalf("inspect: %d %s", status, stderr)
		}
		var info shm.RegionInfo
		if err := json.Unmarshal([]byte(stdout), &info); err != nil {
			t.Fatal(err)
		}
		o := info.Objects[0]
		if o.Name != "orders" || o.State != "held" || o.HolderPID != cmd.Process.Pid || !o.HolderAlive || !o.HeldForKnown {
			t.Fatalf("inspect: %+v", o)
		}
		held = append(held, o.HeldFor)
		time.Sleep(30 * time.Millisecond)
	}
	if !(held[0] < held[1] && held[1] < held[2]) {
		t.Fatalf("held-for not growing: %v", held)
	}
	stdout, _, status := runCLI(t, "inspect", path)
	t.Logf("\n%s", stdout)
	for _, want := range []string{"orders", "held", fmt.Sprint(cmd.Process.Pid), "yes", "≥", "orders-data", "bytes", "Processes attached: 2 (2 alive)"} {
		if status != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("inspect text lacks %q (status %d)", want, status)
		}
	}
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "notes.txt")
	os.WriteFile(foreign, []byte("not a region at all, but long enough to have a magic"), 0o600)
	corrupt := filepath.Join(dir, "corrupt")
	r, err := shm.Create(corrupt, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	f, _ := os.OpenFile(corrupt, os.O_RDWR, 0)
	f.WriteAt([]byte{0xff}, 40) // a checksummed header field
	f.Close()
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"inspect", foreign}, "bad magic"},
		{[]string{"inspect", corrupt}, "checksum"},
		{[]string{"inspect", "-json", corrupt}, "checksum"},
		{[]string{"inspect", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"inspect", dir}, "not a regular file"},
		{[]string{"inspect"}, "exactly one region PATH"},
		{[]string{"inspect", "-bogus", corrupt}, "flag provided but not defined"},
	} {
		stdout, stderr, status := runCLI(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want 2 and %q", c.args, status, stdout, stderr, c.msg)
		}
		// One prefix, the command's: the library's "lockword: " is not
		// repeated after it.
		if strings.Contains(stderr, "lockword: ") || (len(c.args) == 2 && !strings.HasPrefix(stderr, "lockword inspect: open region ")) {
			t.Errorf("%v: stderr %q: want one prefix, \"lockword inspect: open region PATH: \"", c.args, stderr)
		}
	}
	if stdout, _, status := runCLI(t, "inspect", "-help"); status != exitOK || !strings.Contains(stdout, "Usage: lockword inspect") {
		t.Errorf("inspect -help: %d %q", status, stdout)
	}
}

// TestInspectTextUnknownHolder: a held lock whose holder's PID is unknown
// (it died and its process-table slot was reused) says so, rather than
// looking free ("-").
func TestInspectTextUnknownHolder(t *testing.T) {
	var b strings.Builder
	writeInspectText(&b, &shm.RegionInfo{Path: "r", Objects: []shm.ObjectInfo{
		{Name: "orders", Kind: "mutex", State: "owner-dead", HolderPID: 0},
	}}, false)
	if !regexp.MustCompile(`orders\s+mutex\s+0\s+owner-dead\s+unknown\s+no\s`).MatchString(b.String()) {
		t.Fatalf("want holder unknown, alive no:\n%s", b.String())
	}
}

// TestInspectReadOnlyUser runs inspect as an unprivileged user (nobody,
// through setpriv, where the test runs as root) on a region it may read
// but not write, as a monitoring user would: it must work, say it is
// read-only, and change no byte of the file.
func TestInspectReadOnlyUser(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if os.Geteuid() != 0 || err != nil {
		t.Skip("needs root and setpriv(1) to run inspect as an unprivileged user; TestInspectRegionReadOnly covers the read-only path")
	}
	dir, err := os.MkdirTemp("", "lockword-inspect-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	asNobody := func(args ...string) *exec.Cmd {
		return exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, args...)...)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := asNobody("test", "-x", dir).CombinedOutput(); err != nil {
		t.Skipf("nobody cannot reach %s (%v %s)", dir, err, out)
	}
	bin := clitest.BuildLockword(t) // in a directory every user may read
	if out, err := asNobody("test", "-x", bin).CombinedOutput(); err != nil {
		t.Skipf("nobody cannot run %s (%v %s)", bin, err, out)
	}
	path := filepath.Join(dir, "region")
	r, err := shm.Create(path, 0, &shm.Options{Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, _ := r.Mutex("orders")
	m.Lock() // the fast path: inspect would stamp it, if it could write
	defer m.Unlock()
	before, _ := os.ReadFile(path)

	out, err := asNobody(bin, "inspect", "-json", path).Output()
	if err != nil {
		t.Fatalf("inspect as nobody: %v\n%s", err, out)
	}
	var info shm.RegionInfo
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if o := info.Objects[0]; !info.ReadOnly || o.State != "held" || o.HolderPID != os.Getpid() || !o.HolderAlive || o.HeldForKnown {
		t.Fatalf("inspect as nobody: %s\nwant read-only, held by live PID %d, held-for unknown", out, os.Getpid())
	}
	out, err = asNobody(bin, "inspect", path).Output()
	if err != nil || !strings.Contains(string(out), "Read-only: ") || !regexp.MustCompile(`orders\s+mutex\s+\d+\s+held\s+\d+\s+yes\s+unknown`).Match(out) {
		t.Fatalf("inspect as nobody: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("inspect as nobody changed the region file")
	}
}

// TestInspectJSONNotALock: inspect -json gives an object that is not a
// lock no lock fields (no "state": "", "word": 0, "holder_alive": false).
func TestInspectJSONNotALock(t *testing.T) {
	r, path := testRegion(t)
	r.Mutex("orders")
	r.Bytes("orders-data", 100)
	stdout, stderr, status := runCLI(t, "inspect", "-json", path)
	if status != exitOK {
		t.Fatalf("inspect: %d %s", status, stderr)
	}
	var info struct {
		Objects []map[string]json.RawMessage `json:"objects"`
	}
	if err := json.Unmarshal([]byte(stdout), &info); err != nil || len(info.Objects) != 2 {
		t.Fatalf("%v: %s", err, stdout)
	}
	lock, data := info.Objects[0], info.Objects[1]
	if string(lock["state"]) != `"free"` || lock["word"] == nil || lock["holder_alive"] == nil {
		t.Errorf("lock lacks its fields: %s", stdout)
	}
	for _, k := range []string{"state", "word", "holder_alive", "held_for_known", "waiters"} {
		if v, ok := data[k]; ok {
			t.Errorf("bytes object has %q: %s", k, v)
		}
	}
}

// TestInspectCorruptFiles: inspect of a damaged region file, or of a file
// that never was one, exits 2 with one line on stderr that names the file
// and the check that failed, prints nothing on stdout, and never panics.
// Garbage where the header does not look (process table, lock words)
// cannot be told from live state; it must not crash inspect either.
func TestInspectCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	r, err := shm.Create(good, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Mutex("orders")
	r.Bytes("orders-data", 100)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	valid, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	changed := func(off int, b []byte) []byte {
		c := bytes.Clone(valid)
		copy(c[off:], b)
		return c
	}
	const (
		tableOffset = 4096  // docs/abi.md: the object table
		procOffset  = 12288 // the process table
	)
	for _, c := range []struct {
		name    string
		content []byte
		msg     string // in the error; "" means the header is intact: exit 0
	}{
		{"empty", nil, "never initialized"},
		{"truncated to 100 bytes", valid[:100], "region file truncated (region size does not match the file): header says 1048576 bytes, file has 100"},
		{"truncated in the process table", valid[:20000], "size does not match the file"},
		{"truncated to half", valid[:len(valid)/2], "size does not match the file"},
		{"one byte past the end", append(bytes.Clone(valid), 0), "size does not match the file"},
		{"magic overwritten", changed(0, []byte("XXXXXXXX")), "not a lockword region (bad magic)"},
		{"version 99", changed(8, []byte{99, 0, 0, 0}), "unsupported region ABI version"},
		{"object table entry changed", changed(tableOffset+3, []byte{'!'}), "checksum"},
		{"zero bytes", make([]byte, len(valid)), "never initialized"},
		{"random bytes, region size", random(len(valid)), "bad magic"},
		{"random bytes, 100", random(100), "bad magic"},
		{"random process table and objects", changed(procOffset, random(len(valid)-procOffset)), ""},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(path, c.content, 0o600); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, status := runCLI(t, "inspect", path)
		if c.msg == "" {
			if status != exitOK {
				t.Errorf("%s: status %d, stderr %q; want 0 (the header is intact)", c.name, status, stderr)
			}
			continue
		}
		prefix := "lockword inspect: open region " + path + ": "
		if status != exitUsage || stdout != "" || !strings.HasPrefix(stderr, prefix) || !strings.Contains(stderr, c.msg) ||
			strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
			t.Errorf("%s: status %d, stdout %q, stderr %q; want 2 and one line %q...%q", c.name, status, stdout, stderr, prefix, c.msg)
		}
	}
}

// TestInspectSemaphoreStoppedHolder: a process stopped (SIGSTOP) holding
// semaphore permits is marked stopped, in the Semaphores table beside its
// PID and in the objects table's ALIVE column, as a lock's stopped holder
// is: it keeps its permits until continued. Both showed it as merely
// alive ("-" for ALIVE).
func TestInspectSemaphoreStoppedHolder(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep(1) to stop:", err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill(); cmd.Wait() })
	cmd.Process.Signal(syscall.SIGSTOP)
	waitProcState(t, cmd.Process.Pid, "stopped")
	pid := cmd.Process.Pid
	info := &shm.RegionInfo{Path: "r", Objects: []shm.ObjectInfo{
		{Name: "gpus", Kind: "semaphore", State: "held", Semaphore: &shm.SemaphoreInfo{
			Capacity: 4, InUse: 1,
			Processes: []shm.SemaphoreProcess{{ProcessInfo: shm.ProcessInfo{Slot: 1, PID: pid, Alive: true}, Held: 1}}}},
	}}
	var b bytes.Buffer
	writeInspectText(&b, info, false)
	if want := fmt.Sprintf("PID %d (stopped): 1 held", pid); !strings.Contains(b.String(), want) {
		t.Errorf("no %q in the Semaphores table:\n%s", want, b.String())
	}
	if re := fmt.Sprintf(`\s+gpus\s+semaphore\s+\d+\s+held\s+%d\s+yes \(stopped\)\s`, pid); !regexp.MustCompile(re).MatchString(b.String()) {
		t.Errorf("the objects row does not mark the holder stopped (%s):\n%s", re, b.String())
	}
}
