//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFileLockTimeout: a process that holds a region's file lock and
// does not let go (here a child stopped with SIGSTOP, as a debugger or a
// terminal stop would leave it) makes every call that takes the lock give
// up at its timeout, with ErrFileLockTimeout (and context.DeadlineExceeded)
// naming the holder's PID and whether it is stopped: an open, the creation
// of an object, Close (which closes nothing, and succeeds once the holder
// is gone), and the observers Inspect and Remove, which wait
// DefaultInitTimeout. They blocked for as long as the holder held on.
//
// Timing assumption: a call whose deadline passed returns within
// flockSlack, whatever the load; a slower return is measured again (up to
// three times), the bound never widened. A call still blocked after a
// minute is reported as blocked: that is the bug, not the load.
func TestFileLockTimeout(t *testing.T) {
	const (
		timeout    = 200 * time.Millisecond
		flockSlack = 2 * time.Second
	)
	path := filepath.Join(t.TempDir(), "region")
	opts := &Options{InitTimeout: timeout}
	r, err := Create(path, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "flock", path)
	c.expect(t, "locked")
	pid := c.pid()

	check := func(what string, want time.Duration, stopped bool, call func() error) {
		t.Helper()
		for try := 1; ; try++ {
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- call() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Errorf("%s: still blocked after a minute on a file lock that PID %d holds, with a timeout of %v", what, pid, want)
				return
			}
			took := time.Since(start)
			var fe *FileLockTimeoutError
			if !errors.Is(err, ErrFileLockTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &fe) {
				t.Errorf("%s: %v, want a *FileLockTimeoutError (ErrFileLockTimeout, context.DeadlineExceeded)", what, err)
				return
			}
			holder := fmt.Sprintf("PID %d (not stopped)", pid)
			if stopped {
				holder = fmt.Sprintf("PID %d (stopped", pid)
			}
			if !strings.Contains(err.Error(), holder) || !reflect.DeepEqual(fe.Holders, []FileLockHolder{{PID: pid, Stopped: stopped}}) {
				t.Errorf("%s: %q (holders %+v): want the holder named, %q", what, err, fe.Holders, holder)
			}
			if took < want {
				t.Errorf("%s gave up after %v, before its timeout of %v", what, took, want)
			} else if took > want+flockSlack {
				if try < 3 {
					continue
				}
				t.Errorf("%s took %v three times, with a timeout of %v (load too high for the assumption of %v?)", what, took, want, flockSlack)
			}
			return
		}
	}
	open := func() error {
		h, err := Open(path, opts)
		if err == nil {
			h.Close()
		}
		return err
	}
	check("OpenRegion, holder running", timeout, false, open)

	c.cmd.Process.Signal(syscall.SIGSTOP)
	waitStopped(t, pid)
	check("OpenRegion", timeout, true, open)
	check("lockword.Mutex (a new object)", timeout, true, func() error { _, err := r.Mutex("new"); return err })
	check("Close", timeout, true, r.Close)
	var wg sync.WaitGroup
	for what, call := range map[string]func() error{
		"InspectRegion": func() error { _, err := Inspect(path); return err },
		"RemoveRegion":  func() error { return Remove(path, nil) },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); check(what, DefaultInitTimeout, true, call) }()
	}
	wg.Wait()

	c.cmd.Process.Signal(syscall.SIGCONT)
	c.cmd.Process.Kill()
	c.exit()
	if _, err := r.Mutex("new"); err != nil {
		t.Errorf("lockword.Mutex once the holder is gone: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close once the holder is gone: %v", err)
	}
}

func init() {
	// flock PATH: take the file lock of PATH through an open of its own
	// and keep it until killed.
	childModes["flock"] = func(args []string) error {
		f, err := os.OpenFile(args[0], os.O_RDWR, 0)
		if err != nil {
			return err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			return err
		}
		fmt.Println("locked")
		time.Sleep(time.Hour)
		return nil
	}
}

// TestFlockHolders: /proc/locks lines are matched by device and inode,
// flocks only, holders only (a "->" line is a waiter).
func TestFlockHolders(t *testing.T) {
	locks := []byte(`1: OFDLCK ADVISORY  WRITE -1 fe:00:9978882 0 EOF
2: FLOCK  ADVISORY  WRITE 6215 fe:00:9978866 0 EOF
2: -> FLOCK  ADVISORY  WRITE 6300 fe:00:9978866 0 EOF
3: POSIX  ADVISORY  WRITE 7000 fe:00:9978866 0 EOF
4: FLOCK  ADVISORY  READ 6216 fe:00:9978866 0 EOF
5: FLOCK  ADVISORY  WRITE 6217 fe:00:99788660 0 EOF
6: FLOCK  ADVISORY  WRITE 6218 00:1a:9978866 0 EOF
`)
	if got, want := flockHolders(locks, "fe:00:9978866"), []int{6215, 6216}; !reflect.DeepEqual(got, want) {
		t.Errorf("flockHolders: %v, want %v", got, want)
	}
	if got := flockHolders(locks, "00:1a:9978866"); !reflect.DeepEqual(got, []int{6218}) {
		t.Errorf("flockHolders of device 00:1a: %v, want [6218]", got)
	}
}

// TestFileLockTimeoutInheritedHolder: a flock belongs to the open file,
// not to the process that took it. This process takes a region's file lock
// through a file of its own, passes the file to a child (exec with an extra
// descriptor) and closes its copy: the child holds the lock, and
// /proc/locks still names this process. The timeout error names the child.
func TestFileLockTimeoutInheritedHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	r := mustCreate(t, path, 0)
	defer r.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	f.Close()
	_, err = Open(path, &Options{InitTimeout: 100 * time.Millisecond})
	var fe *FileLockTimeoutError
	if !errors.As(err, &fe) {
		t.Fatalf("Open: %v, want a *FileLockTimeoutError", err)
	}
	want := []FileLockHolder{{PID: child.Process.Pid}}
	if !reflect.DeepEqual(fe.Holders, want) || !strings.Contains(err.Error(), fmt.Sprintf("PID %d (not stopped)", child.Process.Pid)) {
		t.Errorf("Open: %v (holders %+v), want the child, PID %d, named (this process is %d)", err, fe.Holders, child.Process.Pid, os.Getpid())
	}
}
