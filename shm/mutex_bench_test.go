//go:build linux

package shm

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// The shared kinds beside their sync peers, as goroutines of one process
// (the local queue's cost); bench/ compares them across processes.
var benchKinds = []benchKind{
	{"sync", func() sync.Locker { return new(sync.Mutex) }},
	{"shared", newBenchSharedMutex},
	{"shared-ticket", func() sync.Locker { return must(benchRegion().TicketMutex("bench")) }},
}

var rwBenchKinds = []locktest.RWKind{
	{Name: "sync", New: func() rwLocker { return new(sync.RWMutex) }},
	{Name: "shared-rw", New: func() rwLocker { return must(benchRegion().RWMutex("bench")) }},
}

// benchRegion makes a fresh region whose file is removed at once: the
// mapping outlives the name, and nothing is left behind.
func benchRegion() *Region {
	dir, err := os.MkdirTemp("", "lockword-bench")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	return must(Create(filepath.Join(dir, "region"), 0, nil))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// newBenchSharedMutex makes a Mutex in a fresh region.
func newBenchSharedMutex() sync.Locker { return must(benchRegion().Mutex("bench")) }

// BenchmarkSharedStarve is BenchmarkStarve's lockskew shape for
// Mutex between owners: goroutine 0 re-locks in a tight loop through
// one Region handle, and 1 or 3 others, each through a handle of its own
// (another owner token and process-local gate, as another process would
// have), work 1 µs between acquisitions; max-ms is the victims' worst
// wait (issue 11.1: the hand-off bounds it).
func BenchmarkSharedStarve(b *testing.B) {
	for _, others := range []int{1, 3} {
		b.Run(fmt.Sprintf("kind=shared/others=%d", others), func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "region")
			r := must(Create(path, 0, nil))
			defer r.Close()
			ms := []sync.Locker{must(r.Mutex("bench"))}
			for range others {
				h := must(Open(path, nil))
				defer h.Close()
				ms = append(ms, must(h.Mutex("bench")))
			}
			benchmarkLockShape(b, ms[0], lockShape{
				Goroutines: others + 1, Outside: workSteps(time.Microsecond), TimeWaits: true, Greedy: true,
				Handle: func(g int) sync.Locker { return ms[g] },
			})
		})
	}
}
