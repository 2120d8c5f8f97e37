//go:build linux

package bench

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lockword/lockword/internal/cbuild"
	"github.com/lockword/lockword/shm"
)

// The C library on the same word: lockword-c runs every child as the C
// worker (c/test/cworker.c bench-child, through c/lockword.c), and
// lockword-mixed every other child, the rest being Go children of kind
// lockword: Go and C processes contending for one SharedMutex.
func init() {
	open := func(r *shm.Region, _ string) (locker, error) {
		m, err := r.Mutex("bench")
		return sharedLocker{m}, err
	}
	kinds = append(kinds, kind{"lockword-c", open}, kind{"lockword-mixed", open})
}

// cChild returns the command of a C child of contend.
func cChild(tb testing.TB, dir string, i, per int) *exec.Cmd {
	b, err := cbuild.Cached()
	if errors.Is(err, cbuild.ErrNoCompiler) {
		tb.Skip("gcc is not installed: no C peer")
	}
	if err != nil {
		tb.Fatal(err)
	}
	return exec.Command(b.Worker, "bench-child", filepath.Join(dir, "region"), strconv.Itoa(i), strconv.Itoa(per))
}

// benchUncontendedC times b.N lock+unlock pairs in one C process, from
// its release to its finish (the process's start is outside the timing).
func benchUncontendedC(b *testing.B) {
	elapsed := contend(b, kinds[len(kinds)-2], 1, b.N, b.ResetTimer)
	b.StopTimer()
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds()/1e6, "Macq/s")
}
