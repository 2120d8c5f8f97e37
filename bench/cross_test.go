//go:build linux

package bench

// Cross-process Lock+Unlock: uncontended (one process, the lock always
// free) and contended (2 and 4 processes hammering one lock), for lockword's
// SharedMutex and the flock peers. ns/op is wall time per acquisition
// across all processes; Macq/s its inverse in millions per second. The C
// pthread robust mutex prints lines of the same shape (cpeer/pthread_robust.c),
// so one benchstat run compares them all.
//
//	go test -run '^$' -bench . -benchtime 200ms -count 5 ./bench
//
// Every critical section increments a plain counter in shared memory, and
// the contended runs check it: a benchmark of a lock that does not exclude
// would be meaningless.

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/lockword/lockword/shm"
	"golang.org/x/sys/unix"
)

// A kind is one cross-process lock under test.
type kind struct {
	name string
	// open returns a lock usable by this process, given the region (where
	// lockword's lock lives) and a lock file path (for the flock peers).
	open func(r *shm.Region, lockFile string) (locker, error)
}

type locker interface {
	Lock() error
	Unlock() error
}

var kinds = []kind{
	{"lockword", func(r *shm.Region, _ string) (locker, error) {
		m, err := r.Mutex("bench")
		return sharedLocker{m}, err
	}},
	{"flock-fd", func(_ *shm.Region, path string) (locker, error) {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		return flockFD(fd), err
	}},
	{"gofrs-flock", func(_ *shm.Region, path string) (locker, error) {
		return flock.New(path), nil
	}},
}

// sharedLocker adapts SharedMutex; an owner death cannot happen here.
type sharedLocker struct{ m *shm.Mutex }

func (s sharedLocker) Lock() error   { s.m.Lock(); return nil }
func (s sharedLocker) Unlock() error { s.m.Unlock(); return nil }

// flockFD is flock(2) on a descriptor kept open: the cheapest use of flock.
type flockFD int

func (f flockFD) Lock() error   { return unix.Flock(int(f), unix.LOCK_EX) }
func (f flockFD) Unlock() error { return unix.Flock(int(f), unix.LOCK_UN) }

// Layout of the benchmark's shared data (a Bytes object).
const (
	offCounter = 0  // incremented under the lock
	offGo      = 64 // parent: start time (Unix ns); 0 until released
	offReady   = 128
	offDone    = 256 // per child: finish time (Unix ns)
	dataSize   = 512
)

var ne = binary.NativeEndian

func setup(tb testing.TB) (dir string, r *shm.Region, data []byte) {
	dir = tb.TempDir()
	r, err := shm.Create(filepath.Join(dir, "region"), 0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	if data, err = r.Bytes("data", dataSize); err != nil {
		tb.Fatal(err)
	}
	return dir, r, data
}

// BenchmarkCrossProcess runs every kind uncontended (procs=1, in this
// process) and contended by 2 and 4 child processes.
func BenchmarkCrossProcess(b *testing.B) {
	for _, procs := range []int{1, 2, 4} {
		for _, k := range kinds {
			b.Run(fmt.Sprintf("kind=%s/procs=%d", k.name, procs), func(b *testing.B) {
				switch {
				case procs == 1 && k.name == "lockword-c":
					benchUncontendedC(b) // cpeer_test.go
				case procs == 1 && k.name == "lockword-mixed":
					b.Skip("one process has one language")
				case procs == 1:
					benchUncontended(b, k)
				default:
					benchContended(b, k, procs)
				}
			})
		}
	}
}

func benchUncontended(b *testing.B, k kind) {
	dir, r, data := setup(b)
	l, err := k.open(r, filepath.Join(dir, "lock"))
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	start := time.Now()
	for b.Loop() {
		l.Lock()
		n++
		ne.PutUint64(data, ne.Uint64(data)+1)
		l.Unlock()
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds()/1e6, "Macq/s")
}

// benchContended runs procs child processes that share b.N acquisitions.
func benchContended(b *testing.B, k kind, procs int) {
	per := b.N / procs
	elapsed := contend(b, k, procs, per, b.ResetTimer)
	b.StopTimer()
	if per > 0 && elapsed > 0 {
		// ns/op as testing reports it includes process start-up and exit;
		// these two metrics are the acquisitions proper.
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(per*procs), "ns/acq")
		b.ReportMetric(float64(per*procs)/elapsed.Seconds()/1e6, "Macq/s")
	}
}

// contend runs procs child processes of per acquisitions each, released
// together (after calling released), checks that the shared counter is
// exact, and returns the time from the release to the last one's finish
// as each records it (process exit not timed).
func contend(tb testing.TB, k kind, procs, per int, released func()) time.Duration {
	dir, _, data := setup(tb)
	children := make([]*exec.Cmd, procs)
	outs := make([]strings.Builder, procs)
	for i := range children {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "LOCKWORD_BENCH_CHILD="+strings.Join([]string{k.name, dir, strconv.Itoa(i), strconv.Itoa(per)}, ","))
		if k.name == "lockword-c" || (k.name == "lockword-mixed" && i%2 == 1) {
			c = cChild(tb, dir, i, per) // cpeer_test.go
		}
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		if err := c.Start(); err != nil {
			tb.Fatal(err)
		}
		children[i] = c
	}
	for ready := 0; ready < procs; time.Sleep(100 * time.Microsecond) {
		ready = 0
		for i := range procs {
			ready += int(ne.Uint64(data[offReady+8*i:]))
		}
	}
	released()
	start := time.Now().UnixNano()
	ne.PutUint64(data[offGo:], uint64(start))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() {
			if err := c.Wait(); err != nil {
				tb.Errorf("child %d: %v\n%s", i, err, outs[i].String())
			}
		})
	}
	wg.Wait()
	end := int64(0)
	for i := range procs {
		end = max(end, int64(ne.Uint64(data[offDone+8*i:])))
	}
	if got, want := ne.Uint64(data), uint64(per*procs); got != want {
		tb.Fatalf("%s: counter %d, want %d: the lock did not exclude", k.name, got, want)
	}
	return time.Duration(end - start)
}

// TestKindsExclude runs every kind's contended harness briefly: the
// benchmarks' figures mean something only if each lock excludes (the
// counter check would fail otherwise).
func TestKindsExclude(t *testing.T) {
	for _, k := range kinds {
		contend(t, k, 3, 2000, func() {})
	}
}

func TestMain(m *testing.M) {
	if spec := os.Getenv("LOCKWORD_BENCH_CHILD"); spec != "" {
		os.Exit(child(spec))
	}
	if dir := os.Getenv(semProcsEnv); dir != "" {
		os.Exit(semProcsChild(dir)) // semaphore_procs_test.go
	}
	os.Exit(m.Run())
}

// child is one contending process: attach, report ready, wait for the
// release, do its acquisitions, record the finish time.
func child(spec string) int {
	f := strings.Split(spec, ",")
	name, dir := f[0], f[1]
	idx, _ := strconv.Atoi(f[2])
	n, _ := strconv.Atoi(f[3])
	fail := func(err error) int { fmt.Println("bench child:", err); return 1 }
	r, err := shm.Open(filepath.Join(dir, "region"), nil)
	if err != nil {
		return fail(err)
	}
	data, err := r.Bytes("data", dataSize)
	if err != nil {
		return fail(err)
	}
	var l locker
	for _, k := range kinds {
		if k.name == name {
			l, err = k.open(r, filepath.Join(dir, "lock"))
		}
	}
	if l == nil || err != nil {
		return fail(fmt.Errorf("kind %q: %v", name, err))
	}
	ne.PutUint64(data[offReady+8*idx:], 1)
	for ne.Uint64(data[offGo:]) == 0 {
		time.Sleep(50 * time.Microsecond)
	}
	for range n {
		if err := l.Lock(); err != nil {
			return fail(err)
		}
		ne.PutUint64(data, ne.Uint64(data)+1)
		if err := l.Unlock(); err != nil {
			return fail(err)
		}
	}
	ne.PutUint64(data[offDone+8*idx:], uint64(time.Now().UnixNano()))
	return 0
}
