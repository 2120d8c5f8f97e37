//go:build linux

package shm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkMPSCClaimFloor is the floor under the shared MPSC queue's
// 64-byte figure (BenchmarkSharedQueue in cmd/lockword/internal/bench):
// 4 producer processes, as there, do for 150 ms only what every message
// costs them at the least, a CAS of one shared claim word past an 80-byte
// record and one store of the record's header word at that position, with
// no consumer, no payload and no wait. Its Mclaims/s is the most messages
// per second that one shared claim word lets 4 processes on this machine
// publish; each b.N is one sample.
func BenchmarkMPSCClaimFloor(b *testing.B) {
	const producers, record = 4, 80
	path := filepath.Join(b.TempDir(), "region")
	r, err := Create(path, 4<<20, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var claims int64
	var took time.Duration
	for range b.N {
		n, d, err := claimFloorSample(path, r, producers, record, 150*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		claims, took = claims+n, took+d
	}
	b.ReportMetric(float64(claims)/took.Seconds()/1e6, "Mclaims/s")
}

// claimFloorSample runs one sample: producers children, started and ready
// before the start word is set, each claiming for d.
func claimFloorSample(path string, r *Region, producers, record int, d time.Duration) (int64, time.Duration, error) {
	words, err := r.Bytes("floor", 1<<20)
	if err != nil {
		return 0, 0, err
	}
	word64(words, 0).Store(0) // the start word
	var outs []*bufio.Reader
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	for range producers {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSharedChild$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), "LOCKWORD_SHARED_CHILD=mpsc-floor",
			"LOCKWORD_SHARED_ARGS="+strings.Join([]string{path, itoa(record), d.String()}, ","))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, 0, err
		}
		cmds = append(cmds, cmd)
		br := bufio.NewReader(out)
		if line, err := br.ReadString('\n'); err != nil || line != "ready\n" {
			return 0, 0, fmt.Errorf("child: %q, %v", line, err)
		}
		outs = append(outs, br)
	}
	start := time.Now()
	word64(words, 0).Store(1)
	var total int64
	for _, br := range outs {
		line, err := br.ReadString('\n')
		n, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil || perr != nil {
			return 0, 0, fmt.Errorf("child: %q, %v", line, err)
		}
		total += n
		go io.Copy(io.Discard, br)
	}
	return total, time.Since(start), nil
}

func init() {
	childModes["mpsc-floor"] = func(args []string) error {
		r, err := Open(args[0], nil)
		if err != nil {
			return err
		}
		record, _ := strconv.Atoi(args[1])
		d, _ := time.ParseDuration(args[2])
		words, err := r.Bytes("floor", 1<<20)
		if err != nil {
			return err
		}
		// The start word and the claim word on lines of their own, as
		// the queue's tail is; records in the rest.
		start, claim, data := word64(words, 0), word64(words, 128), words[256:]
		mask := uint64(len(data)/2 - 1) // a record never crosses the end
		fmt.Println("ready")
		for start.Load() == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		var n int64
		for end := time.Now().Add(d); ; n++ {
			if n%1024 == 0 && !time.Now().Before(end) {
				break
			}
			t := claim.Load()
			for !claim.CompareAndSwap(t, t+uint64(record)) {
				t = claim.Load()
			}
			word64(data, t&mask&^7).Store(t) // the header: publish
		}
		fmt.Println(n)
		return nil
	}
}
