//go:build linux

package shm

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cross-process read throughput of a RWMutex: procs child processes
// (the test binary re-executed, as the cross-process tests do) share b.N
// read locks (RLock, RUnlock, nothing inside), with no writer. Readers of
// different processes count on cache lines of their own (per-process
// counts), where the layout before shared one pair of words among all.

func init() {
	childModes["rwread"] = func(args []string) error {
		// args: path, read locks to take. Prints "ready", waits for the
		// start word, reads, prints "done".
		r, rw, err := openRWChild(args[0], "rw")
		if err != nil {
			return err
		}
		start, err := r.Bytes("start", 8)
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(args[1])
		fmt.Println("ready")
		for word32(start, 0).Load() == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		for range n {
			rw.RLock()
			rw.RUnlock()
		}
		fmt.Println("done")
		return nil
	}
}

func BenchmarkSharedRWMutexReadProcesses(b *testing.B) {
	for _, procs := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "region")
			r, err := Create(path, 0, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			if _, err := r.RWMutex("rw"); err != nil {
				b.Fatal(err)
			}
			start, _ := r.Bytes("start", 8)
			per := max(b.N/procs, 1)
			type proc struct {
				cmd   *exec.Cmd
				lines *bufio.Scanner
			}
			var ps []proc
			for range procs {
				cmd := exec.Command(os.Args[0], "-test.run=^TestSharedChild$", "-test.v=false")
				cmd.Env = append(os.Environ(), "LOCKWORD_SHARED_CHILD=rwread", "LOCKWORD_SHARED_ARGS="+strings.Join([]string{path, strconv.Itoa(per)}, ","))
				out, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				cmd.Stderr = cmd.Stdout
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				ps = append(ps, proc{cmd, bufio.NewScanner(out)})
			}
			expect := func(p proc, want string) {
				for p.lines.Scan() {
					if p.lines.Text() == want {
						return
					}
				}
				p.cmd.Process.Kill()
				b.Fatalf("reader process ended without %q", want)
			}
			for _, p := range ps {
				expect(p, "ready")
			}
			b.ResetTimer()
			t0 := time.Now()
			word32(start, 0).Store(1)
			for _, p := range ps {
				expect(p, "done")
			}
			elapsed := time.Since(t0)
			b.StopTimer()
			for _, p := range ps {
				for p.lines.Scan() {
				}
				if err := p.cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(per*procs)/elapsed.Seconds()/1e6, "Macq/s")
		})
	}
}

// BenchmarkSharedRWMutexWrite is one goroutine's Lock+Unlock with no
// reader: the writer's cost, mostly its sum of the readers' counts.
func BenchmarkSharedRWMutexWrite(b *testing.B) {
	rw := must(benchRegion().RWMutex("bench"))
	for b.Loop() {
		rw.Lock()
		rw.Unlock()
	}
}
