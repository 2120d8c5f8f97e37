//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockword/lockword/shm"
	"golang.org/x/sys/unix"
)

// TestLsRm: ls tells a region in use from a stale one (and, with -all, a
// file that is not a region), and rm removes only what nobody uses, unless
// forced, with the exit statuses the help promises.
func TestLsRm(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "orders")
	r, err := shm.Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Mutex("m"); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("not a region"), 0o600)

	lsJSON := func(args ...string) []lsEntry {
		t.Helper()
		stdout, stderr, status := runCLI(t, append([]string{"ls", "-json"}, args...)...)
		if status != exitOK {
			t.Fatalf("ls: %d %s", status, stderr)
		}
		var list []lsEntry
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if line == "" {
				continue
			}
			var e lsEntry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%v: %q", err, line)
			}
			list = append(list, e)
		}
		return list
	}
	if l := lsJSON(dir); len(l) != 1 || l[0].Path != path || l[0].Live != 1 || l[0].Objects != 1 || l[0].State != "in use" {
		t.Fatalf("ls of a region in use: %+v", l)
	}
	if l := lsJSON(dir, "-all"); len(l) != 2 || l[0].Path != junk || l[0].Error == "" {
		t.Fatalf("ls -all: %+v", l)
	}
	if _, stderr, status := runCLI(t, "rm", path); status != exitFail || !strings.Contains(stderr, "live processes") {
		t.Fatalf("rm of a region in use: %d %q", status, stderr)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if l := lsJSON(dir); len(l) != 1 || l[0].Live != 0 || l[0].State != "stale" {
		t.Fatalf("ls of a stale region: %+v", l)
	}
	stdout, _, _ := runCLI(t, "ls", dir)
	if !strings.Contains(stdout, "stale") || strings.Contains(stdout, "junk") {
		t.Errorf("ls text:\n%s", stdout)
	}
	if _, stderr, status := runCLI(t, "rm", path); status != exitOK {
		t.Fatalf("rm of a stale region: %d %s", status, stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
	if _, stderr, status := runCLI(t, "rm", junk, "-force"); status != exitUsage { // a flag after the path
		t.Fatalf("rm PATH -force of a non-region: %d %s", status, stderr)
	}
	for _, args := range [][]string{{"rm"}, {"rm", path}, {"rm", "-bogus", path}, {"ls", "-bogus"}, {"ls", dir, dir}, {"ls", filepath.Join(dir, "nope")}} {
		if _, stderr, status := runCLI(t, args...); status != exitUsage || stderr == "" {
			t.Errorf("%q: status %d, stderr %q: want %d and a message", args, status, stderr, exitUsage)
		}
	}
}

// TestRmForceOnlyRegions: rm refuses a file that is not a lockword region
// (random bytes, never initialized) with exit 2, with or without -force,
// keeps it, and does not suggest -force; a damaged region (truncated) is
// refused with exit 1 and the -force hint, and -force removes it.
func TestRmForceOnlyRegions(t *testing.T) {
	dir := t.TempDir()
	random := make([]byte, 8192)
	rand.New(rand.NewSource(1)).Read(random)
	model := filepath.Join(dir, "model")
	r, err := shm.Create(model, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	region, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		content []byte
		ours    bool
	}{
		{"random", random, false},
		{"empty", nil, false},
		{"truncated", region[:4096], true},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, c.content, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, force := range []bool{false, true} {
			args := []string{"rm", path}
			if force {
				args = append(args, "-force")
			}
			_, stderr, status := runCLI(t, args...)
			_, serr := os.Lstat(path)
			switch {
			case !c.ours && (status != exitUsage || serr != nil || !strings.Contains(stderr, "not a lockword region") && !strings.Contains(stderr, "never initialized") || strings.Contains(stderr, "-force")):
				t.Errorf("%q on %s: status %d, file kept %v, stderr %q: want %d, the file kept, a message saying it is not a region and no -force hint",
					args, c.name, status, serr == nil, stderr, exitUsage)
			case c.ours && !force && (status != exitFail || serr != nil || !strings.Contains(stderr, "-force")):
				t.Errorf("%q on %s: status %d, file kept %v, stderr %q: want %d, the file kept and the -force hint", args, c.name, status, serr == nil, stderr, exitFail)
			case c.ours && force && (status != exitOK || serr == nil):
				t.Errorf("%q on %s: status %d, file kept %v, stderr %q: want it removed", args, c.name, status, serr == nil, stderr)
			}
		}
	}
}

// TestRmFileLockHeld: rm of a region whose file lock another open holds
// (here this process, through a descriptor of its own) gives up after
// the library's DefaultInitTimeout with exit 1, naming the holder's PID,
// keeps the file, and does not suggest -force; ls lists the region, even
// without -all, as "file lock held", naming the holder.
func TestRmFileLockHeld(t *testing.T) {
	path := fileLockHeldRegion(t, t.TempDir())
	_, stderr, status := runCLI(t, "rm", path)
	if _, serr := os.Lstat(path); status != exitFail || serr != nil || !strings.Contains(stderr, fmt.Sprintf("PID %d (not stopped)", os.Getpid())) || strings.Contains(stderr, "-force") {
		t.Errorf("rm of a region whose file lock is held: status %d, file kept %v, stderr %q: want %d, the file kept, the holder named, no -force hint",
			status, serr == nil, stderr, exitFail)
	}
}

// fileLockHeldRegion creates a region in dir whose file lock this process
// holds, through a descriptor of its own, until the test ends.
func fileLockHeldRegion(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "region")
	r, err := shm.Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLsUnreadable: ls lists a region it could not read (its file lock
// stayed held: here by this process, through a descriptor of its own),
// even without -all, saying why and naming the holder; -json gives the
// error instead of zero counts and a zero creation time; both exit 1, so
// that a script does not take the listing for complete.
func TestLsUnreadable(t *testing.T) {
	dir := t.TempDir()
	path := fileLockHeldRegion(t, dir)
	holder := fmt.Sprintf("PID %d", os.Getpid())
	stdout, stderr, status := runCLI(t, "ls", dir)
	if status != exitFail || !strings.Contains(stdout, "file lock held: ") || !strings.Contains(stdout, holder) {
		t.Errorf("ls of a region whose file lock is held: status %d, stdout %q, stderr %q: want %d and the region listed as file lock held, naming the holder",
			status, stdout, stderr, exitFail)
	}
	stdout, stderr, status = runCLI(t, "ls", "-json", dir)
	var entry map[string]any
	if err := json.Unmarshal([]byte(stdout), &entry); err != nil {
		t.Fatalf("ls -json: %v: %q", err, stdout)
	}
	if e, _ := entry["error"].(string); status != exitFail || entry["path"] != path || !strings.Contains(e, holder) {
		t.Errorf("ls -json of an unreadable region: status %d, %q, stderr %q: want %d, its path and the error naming the holder", status, stdout, stderr, exitFail)
	}
	for _, unknown := range []string{"objects", "live", "dead", "created"} {
		if v, ok := entry[unknown]; ok {
			t.Errorf("ls -json of an unreadable region: %s %v, which it could not know: %q", unknown, v, stdout)
		}
	}
}

// TestRmForceSaysWhatItOverrode: rm -force of a region that live
// processes are attached to (this one, running, and a child holding a
// lock, stopped) removes it with exit 0 and names on stderr each process
// it overrode, with its state and the locks it holds.
func TestRmForceSaysWhatItOverrode(t *testing.T) {
	r, path := testRegion(t)
	r.Mutex("orders")
	child := startStoppedHolder(t, path)
	_, stderr, status := runCLI(t, "rm", "-force", path)
	if _, err := os.Lstat(path); status != exitOK || err == nil {
		t.Fatalf("rm -force: status %d, file kept %v, stderr %q: want it removed", status, err == nil, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf(`PID %d (stopped, holding "orders")`, child.Process.Pid),
		fmt.Sprintf("PID %d (running)", os.Getpid()),
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("rm -force: stderr %q lacks %q", stderr, want)
		}
	}
}

// TestRmForceListsPermits: rm -force over a stopped process holding 3
// permits of a semaphore names them beside its locks.
func TestRmForceListsPermits(t *testing.T) {
	_, path := testRegion(t)
	child := startHolder(t, path, "LOCKWORD_HOLD_SEM=3")
	child.Process.Signal(unix.SIGSTOP)
	waitProcState(t, child.Process.Pid, "stopped")
	_, stderr, status := runCLI(t, "rm", "-force", path)
	want := fmt.Sprintf(`PID %d (stopped, holding "orders", holding 3 permits of "gpus")`, child.Process.Pid)
	if status != exitOK || !strings.Contains(stderr, want) {
		t.Fatalf("rm -force over a stopped holder of 3 permits: status %d, stderr %q, want %q", status, stderr, want)
	}
}

// TestLsEmpty: a directory without regions says so, rather than printing a
// header over nothing; -json prints no line at all.
func TestLsEmpty(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes"), []byte("not a region"), 0o600)
	if stdout, stderr, status := runCLI(t, "ls", dir); status != exitOK || stdout != "no regions in "+dir+"\n" {
		t.Errorf("ls of a directory without regions: status %d, stdout %q, stderr %q; want \"no regions in %s\"", status, stdout, stderr, dir)
	}
	if stdout, _, status := runCLI(t, "ls", "-json", dir); status != exitOK || stdout != "" {
		t.Errorf("ls -json: status %d, stdout %q; want nothing", status, stdout)
	}
}

// TestLsCurrentDir: "lockword ls ." lists the regions of the current
// directory as ./NAME, a path that inspect and rm take to mean that file:
// a bare NAME would be looked up under /dev/shm, which holds another file
// of that name or none (every region was then "unreadable").
func TestLsCurrentDir(t *testing.T) {
	dir := t.TempDir()
	r, err := shm.Create(filepath.Join(dir, "lockword-ls-dot-test"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Chdir(dir)
	stdout, stderr, status := runCLI(t, "ls", "-json", ".")
	var e lsEntry
	if status != exitOK || json.Unmarshal([]byte(stdout), &e) != nil || e.Path != "./lockword-ls-dot-test" || e.Error != "" || e.State != "in use" {
		t.Fatalf("ls .: status %d, stdout %q, stderr %q; want ./lockword-ls-dot-test in use", status, stdout, stderr)
	}
	if _, stderr, status := runCLI(t, "rm", "-force", e.Path); status != exitOK {
		t.Fatalf("rm -force %s: status %d, stderr %q", e.Path, status, stderr)
	}
}
