package bench

// Cross-process subjects: Params.Goroutines processes (this binary
// re-executed, see ChildMain) hammer one lock for Params.Duration, each
// timing its own waits (one in waitSampleEvery); a plain counter in a shared region, incremented
// under the lock, must come out equal to the sum of their acquisitions, or
// the lock did not exclude and the sample is an error.
//
// The children start together through internal/startgate: each attaches
// to the region and opens the lock, then hammers from the start time
// until start+d, and reports one JSON childResult line.

import (
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
	"time"

	"github.com/gofrs/flock"
	"github.com/lockword/lockword/internal/startgate"
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
	Size            int // bytes a message (the shared-queue kind)
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

// semLocker adapts a one-permit shm.Semaphore, so that the shared
// counter checks that it excludes; no holder dies in a benchmark.
type semLocker struct{ s *shm.Semaphore }

func (s semLocker) Lock() error   { return s.s.Acquire(context.Background(), 1) }
func (s semLocker) Unlock() error { s.s.Release(1); return nil }

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
	// A semaphore of one permit: every contended acquisition goes
	// through its FIFO queue of processes.
	{"shm.Semaphore", []string{"flock-fd", "gofrs-flock"}, func(r *shm.Region, _ string) (procLocker, error) {
		s, err := r.Semaphore("bench-sem", 1)
		return semLocker{s}, err
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
	return runChildren(ctx, exe, kind, dir, p, func() (uint64, error) { return ne.Uint64(counter), nil })
}

// runChildren measures p.Goroutines children of exe hammering kind's lock
// in dir: it gathers their results, and once they have exited checks
// that the shared counter (read by counter) equals their acquisitions,
// or the lock did not exclude.
func runChildren(ctx context.Context, exe, kind, dir string, p Params, counter func() (uint64, error)) (s Sample, err error) {
	in, out := p.Section.steps(p.StepsPerNs)
	g, start, err := startChildren(ctx, exe, childSpec{Kind: kind, Dir: dir, Duration: p.Duration, Inside: in, Outside: out}, p.Goroutines)
	defer g.Close()
	if err != nil {
		return s, err
	}
	end, err := gatherProcs(ctx, g, &s)
	if err != nil {
		return s, err
	}
	got, err := counter()
	if err != nil {
		return s, err
	}
	if got != uint64(s.Ops) {
		return s, fmt.Errorf("%s: shared counter %d, but the processes made %d acquisitions: the lock did not exclude", kind, got, s.Ops)
	}
	s.Elapsed = time.Duration(end - start.UnixNano())
	return s, nil
}

// gatherProcs adds the children's results to s, waits for them to exit,
// and returns the latest end of their work (Unix ns).
func gatherProcs(ctx context.Context, g *startgate.Group, s *Sample) (end int64, err error) {
	s.Waits = new(Histogram)
	err = g.Results(func(_ int, line []byte) error {
		var res childResult
		if err := json.Unmarshal(line, &res); err != nil {
			return err
		}
		if res.Waits == nil {
			return errors.New("no waits")
		}
		s.Ops += res.Ops
		s.PerWorker = append(s.PerWorker, res.Ops)
		s.Waits.Merge(res.Waits)
		end = max(end, res.EndNs)
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return end, ctx.Err()
		}
		return end, err
	}
	return end, g.Wait()
}

// startChildren starts n children of exe told spec, once each is ready
// tells them when to start, and returns that time; close the group also
// after an error.
func startChildren(ctx context.Context, exe string, spec childSpec, n int) (*startgate.Group, time.Time, error) {
	js, _ := json.Marshal(spec)
	g, err := startgate.Start(ctx, exe, childEnv+"="+string(js), spec.Kind, n)
	if err != nil {
		return g, time.Time{}, err
	}
	// Far enough ahead that every child has read it: they start together.
	start := time.Now().Add(startAhead)
	g.Go(start)
	return g, start, nil
}

// ChildMain runs a cross-process bench child and exits if this process is
// one (its environment says so); otherwise it returns at once. Call it
// first thing in main, or in a test binary's TestMain.
func ChildMain() {
	etcdChildMain()
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
	if spec.Kind == mpscKind || spec.Kind == unixgramKind || spec.Kind == seqpacketKind {
		return queueChild(spec, r, stdin, stdout)
	}
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
	end, err := awaitStart(spec, stdin, stdout)
	if err != nil {
		return err
	}
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

// awaitStart is a child's side of the start: it says it is ready, waits
// for the start time and then until it comes, and returns when to stop.
func awaitStart(spec childSpec, stdin io.Reader, stdout io.Writer) (end time.Time, err error) {
	fmt.Fprintln(stdout, "ready")
	start, err := startgate.ReadStart(stdin)
	if err != nil {
		return end, err
	}
	time.Sleep(time.Until(start))
	return start.Add(spec.Duration), nil
}

// errNoProcs is returned where processes cannot share a region.
var errNoProcs = errors.New("cross-process kinds need Linux (shared regions)")
