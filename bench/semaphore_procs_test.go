//go:build linux

package bench

// shm.Semaphore against its peer, a POSIX sem_t (pshared, in a shared
// mapping: cpeer/posix_sem.c, built here with gcc), in one run:
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench SharedSemaphorePeers -benchtime 1x -count 5 ./bench
//
// The shape is the in-process one's (semaphore_test.go) between
// processes: 4 permits, P processes of one goroutine (thread) each taking
// 1 permit, doing 10 steps of work and giving it back, for semProcsMs from
// a common start; the permits in use are checked under the permit. Each
// sub-benchmark reports ns/acq and Macq/s (all processes together), the
// wait tail (p99 and max of one acquisition in 32) and max/min, the most
// acquisitions one process made over the fewest (fairness). ns/op is one
// run's wall time: compare the other units. Each b.N iteration is one
// run; the last one's figures are reported. LOCKWORD_POSIX_SEM names a
// posix_sem binary built already, instead of building it.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/lockword/lockword/internal/locktest"
	"github.com/lockword/lockword/shm"
)

const (
	semProcsPermits = 4
	semProcsMs      = 200
	semProcsEnv     = "LOCKWORD_BENCH_SEM_CHILD"
	semProcsSample  = 32 // one acquisition in semProcsSample is timed
)

// semProcsShapes are the process counts: one (no contention), as many as
// permits, and four times as many.
var semProcsShapes = []int{1, 4, 16}

// The run's words, in a bytes object of the region.
const (
	semWordGo         = 0  // Unix ns of the start; 0 until released
	semWordReady      = 8  // children attached
	semWordInUse      = 16 // permits in use, counted under them
	semWordViolations = 24 // entries that found more than the permits in use
	semWordsSize      = 32
)

// semRun is one run's figures.
type semRun struct {
	elapsed  time.Duration // from the start to the last process's finish
	perAcq   float64       // ns per acquisition, all processes together
	maxMin   float64       // most acquisitions of one process / fewest
	p99, max time.Duration // of the timed waits
}

func (r semRun) report(b *testing.B) {
	b.ReportMetric(r.perAcq, "ns/acq")
	b.ReportMetric(1e3/r.perAcq, "Macq/s")
	b.ReportMetric(float64(r.p99.Nanoseconds()), "p99-wait-ns")
	b.ReportMetric(float64(r.max.Nanoseconds()), "max-wait-ns")
	b.ReportMetric(r.maxMin, "max/min")
}

func BenchmarkSharedSemaphorePeers(b *testing.B) {
	for _, procs := range semProcsShapes {
		for _, peer := range []string{"sem_t", "lockword"} {
			b.Run(fmt.Sprintf("permits=%d/procs=%d/%s", semProcsPermits, procs, peer), func(b *testing.B) {
				var r semRun
				for range b.N {
					if peer == "sem_t" {
						r = runPosixSem(b, procs)
					} else {
						r = runSharedSem(b, procs)
					}
				}
				b.StopTimer()
				r.report(b)
			})
		}
	}
}

var posixSem struct {
	built bool
	path  string
	err   error
}

// runPosixSem runs cpeer/posix_sem.c once and reads its line.
func runPosixSem(b *testing.B, procs int) semRun {
	if !posixSem.built {
		posixSem.built = true
		if posixSem.path = os.Getenv("LOCKWORD_POSIX_SEM"); posixSem.path != "" {
			// built already (the quiet-window script builds it once)
		} else if _, err := exec.LookPath("gcc"); err != nil {
			posixSem.err = err
		} else {
			dir, err := os.MkdirTemp("", "lockword-posix-sem-")
			posixSem.path, posixSem.err = filepath.Join(dir, "posix_sem"), err
			if err == nil {
				out, err := exec.Command("gcc", "-O2", "-Wall", "-pthread", "-o", posixSem.path, "cpeer/posix_sem.c").CombinedOutput()
				if err != nil {
					posixSem.err = fmt.Errorf("gcc: %v\n%s", err, out)
				}
			}
		}
	}
	if posixSem.err != nil {
		b.Skip("no C peer: ", posixSem.err)
	}
	out, err := exec.Command(posixSem.path, strconv.Itoa(semProcsPermits), strconv.Itoa(procs), strconv.Itoa(semProcsMs),
		filepath.Join(b.TempDir(), "sem.map")).CombinedOutput()
	if err != nil {
		b.Fatalf("posix_sem: %v\n%s", err, out)
	}
	// "Benchmark... 1 <ns> ns/op <x> ns/acq <x> Macq/s <p99> p99-wait-ns <max> max-wait-ns <r> max/min"
	f := strings.Fields(string(out))
	val := func(unit string) float64 {
		i := slices.Index(f, unit)
		if i < 1 {
			b.Fatalf("posix_sem printed no %s: %q", unit, out)
		}
		v, err := strconv.ParseFloat(f[i-1], 64)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	return semRun{elapsed: time.Duration(val("ns/op")), perAcq: val("ns/acq"), maxMin: val("max/min"),
		p99: time.Duration(val("p99-wait-ns")), max: time.Duration(val("max-wait-ns"))}
}

func semWord(b []byte, off int) *atomic.Int64 { return (*atomic.Int64)(unsafe.Pointer(&b[off])) }

// runSharedSem runs procs children (this test binary) on one shm.Semaphore.
func runSharedSem(b *testing.B, procs int) semRun {
	dir := b.TempDir()
	r, err := shm.Create(filepath.Join(dir, "region"), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	words, err := r.Bytes("sem-words", semWordsSize)
	if err != nil {
		b.Fatal(err)
	}
	children := make([]*exec.Cmd, procs)
	outs := make([]bytes.Buffer, procs)
	for i := range children {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), semProcsEnv+"="+dir)
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		children[i] = c
	}
	for semWord(words, semWordReady).Load() < int64(procs) {
		time.Sleep(100 * time.Microsecond)
	}
	start := time.Now().UnixNano()
	semWord(words, semWordGo).Store(start)
	var run semRun
	var waits []int64
	var ops []int64
	end := int64(0)
	for i, c := range children {
		if err := c.Wait(); err != nil {
			b.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
		// "ops end_ns wait wait ..."
		f := strings.Fields(outs[i].String())
		if len(f) < 2 {
			b.Fatalf("child %d printed %q", i, outs[i].String())
		}
		var nums []int64
		for _, s := range f {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				b.Fatalf("child %d printed %q", i, outs[i].String())
			}
			nums = append(nums, v)
		}
		ops = append(ops, nums[0])
		end = max(end, nums[1])
		waits = append(waits, nums[2:]...)
	}
	if v := semWord(words, semWordViolations).Load(); v != 0 {
		b.Fatalf("shm.Semaphore: %d entries found more than %d permits in use", v, semProcsPermits)
	}
	if len(waits) == 0 {
		b.Fatal("no timed waits")
	}
	slices.Sort(waits)
	var total int64
	for _, o := range ops {
		total += o
	}
	if slices.Min(ops) == 0 {
		b.Fatal("a process made no acquisition")
	}
	run.elapsed = time.Duration(end - start)
	run.perAcq = float64(end-start) / float64(total)
	run.maxMin = float64(slices.Max(ops)) / float64(slices.Min(ops))
	run.p99, run.max = time.Duration(waits[len(waits)*99/100]), time.Duration(waits[len(waits)-1])
	return run
}

// semProcsChild is one process of runSharedSem: it prints its
// acquisitions, its finish time and its timed waits (ns) on one line.
func semProcsChild(dir string) int {
	fail := func(err error) int { fmt.Println("sem bench child:", err); return 1 }
	r, err := shm.Open(filepath.Join(dir, "region"), nil)
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	words, err := r.Bytes("sem-words", semWordsSize)
	if err != nil {
		return fail(err)
	}
	s, err := r.Semaphore("sem", semProcsPermits)
	if err != nil {
		return fail(err)
	}
	inUse, violations := semWord(words, semWordInUse), semWord(words, semWordViolations)
	semWord(words, semWordReady).Add(1)
	var start int64
	for start = semWord(words, semWordGo).Load(); start == 0; start = semWord(words, semWordGo).Load() {
		time.Sleep(20 * time.Microsecond)
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	endNs := start + int64(semProcsMs*time.Millisecond)
	ctx := context.Background()
	var ops uint64
	var waits []int64
	sum := 0
	for t := start; t < endNs; ops++ {
		if ops%semProcsSample == 0 {
			t0 := time.Now()
			if err := s.Acquire(ctx, 1); err != nil {
				return fail(err)
			}
			t = time.Now().UnixNano()
			waits = append(waits, t-t0.UnixNano())
		} else {
			if err := s.Acquire(ctx, 1); err != nil {
				return fail(err)
			}
			if ops%8 == 0 {
				t = time.Now().UnixNano()
			}
		}
		if inUse.Add(1) > semProcsPermits {
			violations.Add(1)
		}
		sum += locktest.SpinWork(10)
		inUse.Add(-1)
		s.Release(1)
	}
	end := time.Now().UnixNano()
	semSink.Add(int64(sum))
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "%d %d", ops, end)
	for _, v := range waits {
		fmt.Fprintf(w, " %d", v)
	}
	fmt.Fprintln(w)
	w.Flush()
	return 0
}
