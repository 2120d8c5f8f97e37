package bench

// Cross-process subjects: Params.Goroutines processes (this binary
// re-executed, see ChildMain) hammer one lock for Params.Duration, each
// timing its own waits (one in waitSampleEvery); a plain counter in a shared region, incremented
// under the lock, must come out equal to the sum of their acquisitions, or
// the lock did not exclude and the sample is an error.
//
// The protocol with a child, over its standard input and output:
//
//	parent                          child
//	start, env childEnv=spec  ->    attach to the region, open the lock
//	                          <-    "ready\n"
//	"<start Unix ns>\n"        ->   sleep until then, hammer until start+d
//	                          <-    one JSON childResult line, exit 0

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/lockword/lockword/shm"
)

// childEnv carries a child's spec (a JSON childSpec), or probeSpec.
const childEnv = "LOCKWORD_BENCH_CHILD"

// probeSpec in childEnv makes a child exit at once: ProcStart times it.
const probeSpec = "probe"

// startAhead is how far ahead of now a sample's processes are told to
// start, so that every one has read the start time before it comes.
const startAhead = 20 * time.Millisecond

// childSpec is what a child is told.
type childSpec struct {
	Kind     string        `json:"kind"`
	Dir      string        `json:"dir"` // holds the region and the lock file
	Duration time.Duration `json:"duration"`
	// Inside and Outside are the critical section's spin steps (see
	// Section): inside, between reading the counter and writing it back.
	Inside, Outside int
}

// childResult is what a child reports.
type childResult struct {
	Ops   int64      `json:"ops"`
	EndNs int64      `json:"end_ns"` // Unix ns of its last release
	Waits *Histogram `json:"waits"`
}

// A procLocker is one process's handle on a cross-process lock.
type procLocker interface {
	Lock() error
	Unlock() error
}

// sharedLocker adapts shm.Mutex; no owner dies in a benchmark.
type sharedLocker struct{ m *shm.Mutex }

func (s sharedLocker) Lock() error   { s.m.Lock(); return nil }
func (s sharedLocker) Unlock() error { s.m.Unlock(); return nil }

// procKinds opens each cross-process subject in one process, by name.
var procKinds = []struct {
	name  string
	peers []string
	open  func(r *shm.Region, lockFile string) (procLocker, error)
}{
	{"flock-fd", nil, func(_ *shm.Region, path string) (procLocker, error) { return openFlockFD(path) }},
	{"gofrs-flock", nil, func(_ *shm.Region, path string) (procLocker, error) { return flock.New(path), nil }},
	{"shm.Mutex", []string{"flock-fd", "gofrs-flock"}, func(r *shm.Region, _ string) (procLocker, error) {
		m, err := r.Mutex("bench")
		return sharedLocker{m}, err
	}},
}

const counterName = "bench-counter"

// noLockKind takes no lock at all: tests show the counter check fails it.
const noLockKind = "none"

type noLock struct{}

func (noLock) Lock() error   { return nil }
func (noLock) Unlock() error { return nil }

var ne = binary.NativeEndian

func procsSubjects(exe string) []Subject {
	var ss []Subject
	for _, k := range procKinds {
		ss = append(ss, Subject{Name: k.name, Peers: k.peers, run: func(ctx context.Context, p Params) (Sample, error) {
			return runProcs(ctx, exe, k.name, p)
		}})
	}
	return ss
}

// runProcs measures one cross-process kind in p.Goroutines processes.
func runProcs(ctx context.Context, exe, kind string, p Params) (s Sample, err error) {
	dir, err := os.MkdirTemp("", "lockword-bench-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(dir)
	r, err := shm.Create(filepath.Join(dir, "region"), 0, nil)
	if err != nil {
		return s, err
	}
	defer r.Close()
	counter, err := r.Bytes(counterName, 8)
	if err != nil {
		return s, err
	}
	in, out := p.Section.steps(p.StepsPerNs)
	spec, _ := json.Marshal(childSpec{Kind: kind, Dir: dir, Duration: p.Duration, Inside: in, Outside: out})

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr strings.Builder
	}
	children := make([]*child, p.Goroutines)
	defer func() {
		for _, c := range children {
			if c != nil && c.cmd.Process != nil && c.cmd.ProcessState == nil {
				c.cmd.Process.Kill()
				c.cmd.Wait()
			}
		}
	}()
	for i := range children {
		c := &child{cmd: exec.CommandContext(ctx, exe)}
		c.cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		c.cmd.Stderr = &c.stderr
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			return s, err
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			return s, err
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			return s, err
		}
		children[i] = c
	}
	fail := func(c *child, what string, err error) error {
		return fmt.Errorf("%s process %d: %s: %v %s", kind, c.cmd.Process.Pid, what, err, strings.TrimSpace(c.stderr.String()))
	}
	for _, c := range children {
		if line, err := c.stdout.ReadString('\n'); err != nil || line != "ready\n" {
			return s, fail(c, "no ready line", err)
		}
	}
	// Far enough ahead that every child has read it: they start together.
	start := time.Now().Add(startAhead)
	for _, c := range children {
		fmt.Fprintf(c.stdin, "%d\n", start.UnixNano())
	}
	s.Waits = new(Histogram)
	var end int64
	for _, c := range children {
		line, err := c.stdout.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil {
				return s, ctx.Err()
			}
			return s, fail(c, "no result", err)
		}
		var res childResult
		if err := json.Unmarshal([]byte(line), &res); err != nil || res.Waits == nil {
			return s, fail(c, "bad result", err)
		}
		if err := c.cmd.Wait(); err != nil {
			return s, fail(c, "exit", err)
		}
		s.Ops += res.Ops
		s.PerWorker = append(s.PerWorker, res.Ops)
		s.Waits.Merge(res.Waits)
		end = max(end, res.EndNs)
	}
	if got := ne.Uint64(counter); got != uint64(s.Ops) {
		return s, fmt.Errorf("%s: shared counter %d, but the processes made %d acquisitions: the lock did not exclude", kind, got, s.Ops)
	}
	s.Elapsed = time.Duration(end - start.UnixNano())
	return s, nil
}

// ChildMain runs a cross-process bench child and exits if this process is
// one (its environment says so); otherwise it returns at once. Call it
// first thing in main, or in a test binary's TestMain.
func ChildMain() {
	specText := os.Getenv(childEnv)
	switch specText {
	case "":
		return
	case probeSpec:
		os.Exit(0)
	}
	if err := child(specText, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockword bench child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ProcStart returns how long one start of exe as a bench child takes on
// this machine now, to its exit (the median of three starts of a child
// that exits at once): what each process of a cross-process sample adds
// to the run's time, for Config.Estimate. 0 if exe cannot be started.
func ProcStart(exe string) time.Duration {
	var ds []time.Duration
	for range 3 {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), childEnv+"="+probeSpec)
		t := time.Now()
		if err := cmd.Run(); err != nil {
			return 0
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds[1]
}

// child is one contending process.
func child(specText string, stdin io.Reader, stdout io.Writer) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(specText), &spec); err != nil {
		return err
	}
	r, err := shm.Open(filepath.Join(spec.Dir, "region"), nil)
	if err != nil {
		return err
	}
	defer r.Close()
	counter, err := r.Bytes(counterName, 8)
	if err != nil {
		return err
	}
	var l procLocker
	if spec.Kind == noLockKind {
		l = noLock{}
	}
	for _, k := range procKinds {
		if k.name == spec.Kind {
			l, err = k.open(r, filepath.Join(spec.Dir, "lock"))
		}
	}
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("unknown kind %q", spec.Kind)
	}
	fmt.Fprintln(stdout, "ready")
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the start time: %v", err)
	}
	startNs, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return fmt.Errorf("bad start time %q", line)
	}
	time.Sleep(time.Until(time.Unix(0, startNs)))
	end := time.Unix(0, startNs).Add(spec.Duration)
	res := childResult{Waits: new(Histogram)}
	local := 0
	var ws waitSampler // as in-process; its clock also says when to stop
	for {
		ws.before()
		if err := l.Lock(); err != nil {
			return err
		}
		t1 := ws.after(res.Waits)
		// Under the lock, checked by the parent: a lock that does not
		// exclude loses updates made in the spin between read and write.
		v := ne.Uint64(counter)
		local += spin(spec.Inside)
		ne.PutUint64(counter, v+1)
		if err := l.Unlock(); err != nil {
			return err
		}
		res.Ops++
		local += spin(spec.Outside)
		if !t1.IsZero() && !t1.Before(end) {
			break
		}
	}
	res.EndNs = time.Now().UnixNano()
	sinkInt.Add(int64(local & 1))
	return json.NewEncoder(stdout).Encode(&res)
}

// errNoProcs is returned where processes cannot share a region.
var errNoProcs = errors.New("cross-process kinds need Linux (shared regions)")
