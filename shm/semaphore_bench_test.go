//go:build linux

package shm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks of Semaphore in the shapes the torture runs: 4 permits,
// weights 1 to 3 by turns, nothing done while holding. handles=H is H
// handles of one process (each attaches: to the semaphore, H processes
// sharing one Go runtime); procs=P re-executes the test binary P times
// (sem-bench children), each of g goroutines.

const semBenchPermits = 4

func semBenchWeight(i int) int64 { return int64(1 + i%3) }

// semBenchLoop runs acquisitions over goroutines goroutines of s until
// next, shared by every process, reaches n.
func semBenchLoop(s *Semaphore, goroutines int, next *atomic.Uint64, n uint64) error {
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				k := semBenchWeight(int(i))
				if err := s.Acquire(context.Background(), k); err != nil {
					errs <- err
					return
				}
				s.Release(k)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// semBenchWords returns the run's shared words: go (nonzero: start) and
// next (the next acquisition's number).
func semBenchWords(r *Region) (start, next *atomic.Uint64) {
	b := must(r.Bytes("bench-words", 16))
	return word64(b, 0), word64(b, 8)
}

func init() {
	childModes["sem-bench"] = func(args []string) error {
		// args: path, name, acquisitions, goroutines. Prints
		// "ready", waits for a line on standard input, runs, prints
		// "done".
		s, err := openSemChild([]string{args[0], args[1], strconv.Itoa(semBenchPermits)})
		if err != nil {
			return err
		}
		n, _ := strconv.ParseUint(args[2], 10, 64)
		g, _ := strconv.Atoi(args[3])
		start, next := semBenchWords(s.r)
		fmt.Println("ready")
		for start.Load() == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		if err := semBenchLoop(s, g, next, n); err != nil {
			return err
		}
		fmt.Println("done")
		return nil
	}
}

func BenchmarkSharedSemaphore(b *testing.B) {
	for _, shape := range []struct{ handles, goroutines int }{{1, 1}, {1, 4}, {1, 16}, {4, 1}, {4, 8}} {
		b.Run(fmt.Sprintf("handles=%d/goroutines=%d", shape.handles, shape.goroutines), func(b *testing.B) {
			path := semBenchPath(b)
			var sems []*Semaphore
			for h := range shape.handles {
				open := Open
				if h == 0 {
					open = func(path string, o *Options) (*Region, error) { return Create(path, 0, o) }
				}
				r := must(open(path, nil))
				defer r.Close()
				sems = append(sems, must(r.Semaphore("bench", semBenchPermits)))
			}
			_, next := semBenchWords(sems[0].r)
			sems[0].guard.EnableStats()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, s := range sems {
				wg.Go(func() {
					if err := semBenchLoop(s, shape.goroutines, next, uint64(b.N)); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			reportSemGuard(b, sems[0])
		})
	}
	for _, shape := range []struct{ procs, goroutines int }{{4, 1}, {4, 8}} {
		b.Run(fmt.Sprintf("procs=%d/goroutines=%d", shape.procs, shape.goroutines), func(b *testing.B) {
			benchSemProcs(b, shape.procs, shape.goroutines)
		})
	}
}

// benchSemProcs runs b.N acquisitions over procs sem-bench children of
// goroutines goroutines each, timing from the start word to the last exit.
func benchSemProcs(b *testing.B, procs, goroutines int) {
	path := semBenchPath(b)
	r := must(Create(path, 0, nil))
	defer r.Close()
	s := must(r.Semaphore("bench", semBenchPermits))
	s.guard.EnableStats()
	start, _ := semBenchWords(r)
	var cmds []*exec.Cmd
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSharedChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), "LOCKWORD_SHARED_CHILD=sem-bench",
			"LOCKWORD_SHARED_ARGS="+strings.Join([]string{path, "bench", strconv.Itoa(b.N), strconv.Itoa(goroutines)}, ","))
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer cmd.Process.Kill()
		line, err := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			b.Fatalf("child: %q %v", line, err)
		}
		go io.Copy(io.Discard, out)
		cmds = append(cmds, cmd)
	}
	b.ResetTimer()
	start.Store(1)
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportSemGuard(b, s)
}

// reportSemGuard reports how the guard fared, summed over the processes:
// its acquisitions per semaphore acquisition (2 when nobody waits: one
// to take, one to give back), the fraction that found it held, and its
// kernel sleeps per semaphore acquisition.
func reportSemGuard(b *testing.B, s *Semaphore) {
	st := s.guard.Stats()
	b.ReportMetric(float64(st.Acquisitions)/float64(b.N), "guard-locks/op")
	b.ReportMetric(st.SlowPathFraction(), "guard-slow-frac")
	b.ReportMetric(float64(st.Parks)/float64(b.N), "guard-parks/op")
}

func semBenchPath(b *testing.B) string { return b.TempDir() + "/region" }
