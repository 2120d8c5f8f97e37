//go:build linux

package shm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/wait"
)

// Child processes for the cross-process tests of every shared kind: the
// test binary re-executed as TestSharedChild in a mode (as Go's
// TestMutexMisuse does), driven over its standard output.

// A child is a re-executed test binary running one TestSharedChild mode.
// Its standard output is the protocol: every line reaches lines, in order,
// none dropped, however many there are and however late the parent reads
// them (a child whose thousand waiters pass the stuck threshold prints a
// thousand warnings; a bounded channel that dropped what did not fit lost
// the line the parent waited for). Its standard error (slog's stuck
// reports, panics) goes only into out, for failure messages.
type child struct {
	cmd     *exec.Cmd
	lines   chan string     // standard output, line by line; closed at its end
	scanned chan struct{}   // closed when both streams have been read to the end
	out     strings.Builder // everything it printed, both streams, for failure messages
	mu      sync.Mutex
	queue   []string      // standard output lines not yet handed to lines
	queued  chan struct{} // signalled when queue grows or standard output ends
	ended   bool          // standard output ended: lines closes once queue is empty
}

func startChild(t *testing.T, mode string, args ...string) *child {
	t.Helper()
	return startChildIn(t, nil, mode, args...)
}

// startChildIn starts a child under a wrapper command (unshare, say).
func startChildIn(t *testing.T, wrapper []string, mode string, args ...string) *child {
	t.Helper()
	return startChildFiles(t, wrapper, nil, mode, args...)
}

// startChildFiles starts a child under wrapper (nil: none) that inherits
// files as its descriptors 3, 4, ... (exec.Cmd.ExtraFiles).
func startChildFiles(t *testing.T, wrapper []string, files []*os.File, mode string, args ...string) *child {
	t.Helper()
	argv := append(append([]string(nil), wrapper...), os.Args[0], "-test.run=^TestSharedChild$", "-test.v=false")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LOCKWORD_SHARED_CHILD="+mode, "LOCKWORD_SHARED_ARGS="+strings.Join(args, ","))
	cmd.ExtraFiles = files
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string), scanned: make(chan struct{}), queued: make(chan struct{}, 1)}
	var readers sync.WaitGroup
	readers.Go(func() { c.read(stdout, true) })
	readers.Go(func() { c.read(stderr, false) })
	go func() { readers.Wait(); close(c.scanned) }()
	stop := make(chan struct{})
	go c.forward(stop)
	t.Cleanup(func() { close(stop) })
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Signal(syscall.SIGCONT)
			c.cmd.Process.Kill()
			c.exit()
		}
	})
	return c
}

// read copies one of the child's streams into out, line by line, and
// queues standard output's lines for forward; it never blocks on the
// parent, so the child never blocks on a full pipe.
func (c *child) read(r io.Reader, protocol bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		c.mu.Lock()
		c.out.WriteString(sc.Text() + "\n")
		if protocol {
			c.queue = append(c.queue, sc.Text())
		}
		c.mu.Unlock()
		if protocol {
			c.signal()
		}
	}
	io.Copy(io.Discard, r) // after a line over 4 MiB: keep the pipe drained, or the child blocks
	if protocol {
		c.mu.Lock()
		c.ended = true
		c.mu.Unlock()
		c.signal()
	}
}

func (c *child) signal() {
	select {
	case c.queued <- struct{}{}:
	default: // a signal is pending already
	}
}

// forward hands the queued standard output lines to lines, in order,
// until the stream ends (then it closes lines) or the test ends (stop).
func (c *child) forward(stop <-chan struct{}) {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			ended := c.ended
			c.mu.Unlock()
			if ended {
				close(c.lines)
				return
			}
			select {
			case <-c.queued:
				continue
			case <-stop:
				return
			}
		}
		line := c.queue[0]
		c.queue = c.queue[1:]
		c.mu.Unlock()
		select {
		case c.lines <- line:
		case <-stop:
			return
		}
	}
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// expect waits for a line starting with prefix and returns the rest. It
// fails if the child ends without printing one, or when the test binary's
// own deadline (go test -timeout) is near: how long a child takes to get
// there on a loaded machine is no property of the code under test, so
// expect sets no patience of its own, and a hung child is reported with
// its output before the binary's timeout panic would hide it.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	var timeout <-chan time.Time // nil: no deadline (go test -timeout 0)
	patience := "the test binary's deadline"
	if d, ok := t.Deadline(); ok {
		timeout = time.After(time.Until(d) - testDeadlineMargin)
		patience = fmt.Sprintf("%v, until %v before the test binary's deadline", time.Until(d)-testDeadlineMargin, testDeadlineMargin)
	}
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child ended without printing %q:\n%s", prefix, c.output())
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest
			}
		case <-timeout:
			t.Fatalf("child did not print %q in %s:\n%s", prefix, patience, c.output())
		}
	}
}

// testDeadlineMargin is how long before the test binary's deadline a
// wait with no patience of its own gives up: time to report and clean up.
const testDeadlineMargin = 20 * time.Second

// exit waits for the child to exit, after reading all it printed (Wait
// closes the pipe: reading must be finished first, or output is lost).
func (c *child) exit() error {
	<-c.scanned
	return c.cmd.Wait()
}

func (c *child) wait(t *testing.T) {
	t.Helper()
	if err := c.exit(); err != nil {
		t.Fatalf("child: %v\n%s", err, c.output())
	}
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// TestSharedChild is the body of the child processes.
func TestSharedChild(t *testing.T) {
	mode := os.Getenv("LOCKWORD_SHARED_CHILD")
	if mode == "" {
		t.Skip("run by the cross-process tests")
	}
	args := strings.Split(os.Getenv("LOCKWORD_SHARED_ARGS"), ",")
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	// mutexIn opens the region args[0] and returns its Mutex name.
	mutexIn := func(name string) *Mutex {
		r, err := Open(args[0], nil)
		if err != nil {
			fail(err)
		}
		m, _ := r.Mutex(name)
		return m
	}
	switch mode {
	case "create":
		r, err := OpenOrCreate(args[0], 0, nil)
		if err != nil {
			fail(err)
		}
		fmt.Println("stamp " + regionStamp(r))
		r.Close()
	case "hold", "create-hold":
		// Lock and hold until killed. args: path, name[, kind (see
		// robustLock)].
		open := func() (*Region, error) { return Open(args[0], nil) }
		if mode == "create-hold" {
			open = func() (*Region, error) { return OpenOrCreate(args[0], 0, nil) }
		}
		r, err := open()
		if err != nil {
			fail(err)
		}
		kind := "mutex"
		if len(args) > 2 {
			kind = args[2]
		}
		m, err := robustLock(r, kind, args[1])
		if err != nil {
			fail(err)
		}
		if err := m.LockContext(context.Background()); err != nil && !errors.Is(err, lockword.ErrOwnerDead) {
			fail(err)
		}
		fmt.Println("locked")
		time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock and exit
	case "unlock-other":
		m := mutexIn("m")
		m.Unlock()
	case "unlock-unlocked":
		m := mutexIn("fresh")
		m.Unlock()
	case "lock-owner-dead-recover":
		// As lock-owner-dead, but recover the panic and live on.
		m := mutexIn("m")
		func() {
			defer func() { fmt.Println("recovered", recover()) }()
			m.Lock()
		}()
		fmt.Println("alive")
		time.Sleep(time.Hour)
	case "lock-owner-dead":
		// Lock (the sync.Locker path) on a lock whose owner died, with no
		// repair function: must panic with ErrOwnerDead.
		m := mutexIn("m")
		m.Lock()
	default:
		body := childModes[mode]
		if body == nil {
			fail(fmt.Errorf("unknown child mode %q", mode))
		}
		if err := body(args); err != nil {
			fail(err)
		}
	}
	os.Exit(0)
}

// childModes are TestSharedChild modes that other test files add: each
// body gets the child's arguments and returns an error to fail it.
var childModes = map[string]func(args []string) error{}

func init() { childModes["threads"] = childThreads }

// childThreads blocks goroutines on the robust lock "m", which the parent
// holds, and prints the process's thread count once they wait, then the
// count done once the parent released it. args: path, goroutines[, kind
// (see robustLock)].
func childThreads(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	kind := "mutex"
	if len(args) > 2 {
		kind = args[2]
	}
	m, err := robustLock(r, kind, "m")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	var done atomic.Int64
	for range n {
		go func() { m.Lock(); m.Unlock(); done.Add(1) }()
	}
	// Everyone but the one goroutine that goes on to the kernel
	// parks at the process-local gate.
	printThreadsWhileParked(n, func() int { return localParked(m) }, &done)
	return nil
}

// printThreadsWhileParked is the report of a child whose n goroutines
// block on a shared object: once all but the one kernel sleeper park
// (parked counts them) and the sleeper has settled, it prints "threads"
// with the process's OS threads and GOMAXPROCS; once done reaches n, it
// prints "done" and the count.
func printThreadsWhileParked(n int, parked func() int, done *atomic.Int64) {
	for parked() < n-1 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the kernel sleeper settle
	fmt.Println("threads", threadCountNow(), runtime.GOMAXPROCS(0))
	for done.Load() < int64(n) {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("done", done.Load())
}

// localParked counts the goroutines parked at a robust lock's
// process-local gate.
func localParked(l robustLocker) int {
	switch l := l.(type) {
	case *Mutex:
		return wait.Parked((*atomic.Uint32)(unsafe.Pointer(&l.gate)))
	case *TicketMutex:
		return wait.Parked(ticketServing(&l.q.gate))
	case *RWMutex:
		return wait.Parked(ticketServing(&l.q.gate))
	}
	panic(fmt.Sprintf("localParked: %T", l))
}

func threadCountNow() int {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// startHolder starts a child that takes name in the region at path (a lock
// of kind, see robustLock; Mutex if none), waits until it holds it,
// and returns the child.
func startHolder(t *testing.T, path, name string, kind ...string) *child {
	c := startChild(t, "hold", append([]string{path, name}, kind...)...)
	c.expect(t, "locked")
	return c
}

// thousandBlocked starts two children of mode (args: path, "1000", ...)
// that each block 1,000 goroutines on a lock the caller holds, checks that
// each stays under GOMAXPROCS+64 OS threads, calls release, and checks that
// all their goroutines complete.
func thousandBlocked(t *testing.T, release func(), what, mode string, args ...string) {
	t.Helper()
	a := startChild(t, mode, args...)
	b := startChild(t, mode, args...)
	for _, c := range []*child{a, b} {
		var threads, procs int
		fmt.Sscan(c.expect(t, "threads "), &threads, &procs)
		t.Logf("child %d: %d OS threads with %s blocked (GOMAXPROCS %d)", c.pid(), threads, what, procs)
		if threads > procs+64 {
			t.Errorf("child has %d OS threads, want at most %d", threads, procs+64)
		}
	}
	release()
	for _, c := range []*child{a, b} {
		if got := c.expect(t, "done "); got != "1000" {
			t.Errorf("child completed %s of 1000", got)
		}
		c.wait(t)
	}
}

// threadRunqueueNs is how long thread tid of this process has waited on
// the kernel's run queue, runnable but without a CPU, in ns (the second
// field of /proc/self/task/TID/schedstat); 0 if the kernel does not say.
func threadRunqueueNs(tid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[1], 10, 64)
	return ns
}

// openRWChild opens, in a child process, the region at path and its
// RWMutex name: the start of every RW child mode.
func openRWChild(path, name string) (*Region, *RWMutex, error) {
	r, err := Open(path, nil)
	if err != nil {
		return nil, nil, err
	}
	rw, err := r.RWMutex(name)
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return r, rw, nil
}
