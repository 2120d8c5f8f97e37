//go:build linux

package ctest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/cbuild"
	"github.com/lockword/lockword/shm"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary, re-executed, a Go helper process
// (helperMain) instead of running tests.
const helperEnv = "LOCKWORD_CTEST_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helperMain(strings.Fields(spec)))
	}
	os.Exit(m.Run())
}

var built struct {
	once sync.Once
	dir  string
	b    map[cbuild.Variant]*cbuild.Built
	err  error
}

// cBuild compiles the C sources (once per test binary, into one temporary
// directory) in variant v, skipping the test without gcc.
func cBuild(t testing.TB, v cbuild.Variant) *cbuild.Built {
	t.Helper()
	built.once.Do(func() {
		built.b = map[cbuild.Variant]*cbuild.Built{}
		built.dir, built.err = os.MkdirTemp("", "lockword-ctest-")
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	if b := built.b[v]; b != nil {
		return b
	}
	src, err := cbuild.SourceDir()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(built.dir, string(v))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := cbuild.Build(src, out, v)
	if errors.Is(err, cbuild.ErrNoCompiler) {
		t.Skip("gcc is not installed: the C library cannot be built (CI installs gcc)")
	}
	if err != nil {
		t.Fatal(err)
	}
	built.b[v] = b
	return b
}

// regionPath returns a fresh region path, removed at the end of the test.
func regionPath(t *testing.T) string {
	dir := "/dev/shm"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = t.TempDir()
	}
	p := filepath.Join(dir, fmt.Sprintf("lockword-ctest-%d-%d", os.Getpid(), time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(p) })
	return p
}

// goRegion creates a fresh region from Go, closed at the end of the test,
// and returns its path.
func goRegion(t *testing.T) (string, *shm.Region) {
	t.Helper()
	path := regionPath(t)
	r, err := shm.Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return path, r
}

// A proc is a running helper process, C or Go, whose stdout is read line
// by line.
type proc struct {
	t     testing.TB
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	err   error
	tail  strings.Builder
}

func start(t testing.TB, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &p.tail
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// startC runs the C worker with args.
func startC(t testing.TB, worker string, args ...string) *proc {
	return start(t, exec.Command(worker, args...))
}

// startGo runs this test binary as a Go helper (helperMain) with args.
func startGo(t *testing.T, args ...string) *proc {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join(args, " "))
	return start(t, cmd)
}

// line returns the next line of output, failing after timeout.
func (p *proc) line(timeout time.Duration) string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			<-p.done
			p.t.Fatalf("%s exited (%v) before printing: %s", p.cmd.Path, p.err, p.tail.String())
		}
		return l
	case <-time.After(timeout):
		p.t.Fatalf("%s printed nothing within %v: %s", p.cmd.Path, timeout, p.tail.String())
	}
	return ""
}

// wait waits for the process to exit and returns its remaining output.
func (p *proc) wait(timeout time.Duration) (rest []string, err error) {
	p.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				if p.err != nil {
					return rest, fmt.Errorf("%v: %s", p.err, p.tail.String())
				}
				return rest, nil
			}
			rest = append(rest, l)
		case <-deadline:
			p.t.Fatalf("%s did not exit within %v: %s", p.cmd.Path, timeout, p.tail.String())
		}
	}
}

func monoNs() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// helperMain is a Go helper process: "hold REGION LOCK" takes the lock and
// sleeps (to be killed); "send REGION RING CAP COUNT" sends COUNT
// messages (message i as ringMessage(i)), printing "attached" first;
// "flock REGION" takes the region's file lock, prints "locked" and sleeps.
func helperMain(args []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "go helper:", err)
		return 1
	}
	if len(args) == 2 && args[0] == "flock" {
		// Take the region's file lock through an open of our own, and
		// keep it until killed.
		f, err := os.OpenFile(args[1], os.O_RDWR, 0)
		if err != nil {
			return fail(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			return fail(err)
		}
		fmt.Println("locked")
		for {
			time.Sleep(time.Hour)
		}
	}
	if len(args) < 3 {
		return fail(fmt.Errorf("bad helper args %q", args))
	}
	r, err := shm.Open(args[1], nil)
	if err != nil {
		return fail(err)
	}
	switch args[0] {
	case "cycle":
		// cycle REGION HOLD WANT: lock HOLD, print "locked", lock WANT
		// (which the test has another process hold: a deadlock).
		hold, err := r.Mutex(args[2])
		if err != nil {
			return fail(err)
		}
		want, err := r.Mutex(args[3])
		if err != nil {
			return fail(err)
		}
		hold.Lock()
		fmt.Println("locked")
		want.Lock()
		return fail(errors.New("cycle: locked both"))
	case "cycle-kinds":
		// cycle-kinds REGION HOLD WANT: as cycle, HOLD and WANT being
		// "mutex:NAME", "ticket:NAME", "rw:NAME" or "rwread:NAME".
		hold, err := lockSpec(r, args[2])
		if err != nil {
			return fail(err)
		}
		want, err := lockSpec(r, args[3])
		if err != nil {
			return fail(err)
		}
		if err := hold(); err != nil {
			return fail(err)
		}
		fmt.Println("locked")
		return fail(fmt.Errorf("cycle-kinds: locked both (%v)", want()))
	case "sem-hold":
		// sem-hold REGION NAME PERMITS K: take K permits and sleep.
		permits, _ := strconv.ParseInt(args[3], 10, 64)
		k, _ := strconv.ParseInt(args[4], 10, 64)
		s, err := r.Semaphore(args[2], permits)
		if err != nil {
			return fail(err)
		}
		if err := s.Acquire(context.Background(), k); err != nil && !errors.Is(err, lockword.ErrOwnerDead) {
			return fail(err)
		}
		fmt.Println("held")
		for {
			time.Sleep(time.Hour)
		}
	case "hold":
		m, err := r.Mutex(args[2])
		if err != nil {
			return fail(err)
		}
		if err := m.LockContext(context.Background()); err != nil && !errors.Is(err, lockword.ErrOwnerDead) {
			return fail(err)
		}
		fmt.Println("held")
		for { // not select{}: the runtime would call that a deadlock and exit
			time.Sleep(time.Hour)
		}
	case "send":
		capacity, _ := strconv.Atoi(args[3])
		count, _ := strconv.ParseUint(args[4], 10, 64)
		p, err := r.RingProducer(args[2], capacity)
		if err != nil {
			return fail(err)
		}
		fmt.Println("attached")
		buf := make([]byte, p.MaxMessage())
		for i := range count {
			if err := p.Send(context.Background(), ringMessage(buf, i)); err != nil {
				return fail(err)
			}
		}
		p.Close()
		return 0
	}
	return fail(fmt.Errorf("unknown helper %q", args[0]))
}

// lockSpec returns the function that takes the shared lock spec names:
// "mutex:NAME", "ticket:NAME", "rw:NAME" (write) or "rwread:NAME".
func lockSpec(r *shm.Region, spec string) (func() error, error) {
	kind, name, _ := strings.Cut(spec, ":")
	ctx := context.Background()
	switch kind {
	case "mutex":
		m, err := r.Mutex(name)
		if err != nil {
			return nil, err
		}
		return func() error { return m.LockContext(ctx) }, nil
	case "ticket":
		m, err := r.TicketMutex(name)
		if err != nil {
			return nil, err
		}
		return func() error { return m.LockContext(ctx) }, nil
	case "rw", "rwread":
		m, err := r.RWMutex(name)
		if err != nil {
			return nil, err
		}
		if kind == "rwread" {
			return func() error { return m.RLockContext(ctx) }, nil
		}
		return func() error { return m.LockContext(ctx) }, nil
	}
	return nil, fmt.Errorf("lock spec %q", spec)
}
