//go:build linux

package lockword

import (
	"os"
	"path/filepath"
	"sync"
)

// The SharedMutex joins the in-process benchmarks (goroutines of one
// process: the local queue's cost); bench/ compares it across processes.
func init() {
	benchKinds = append(benchKinds, benchKind{"shared", newBenchSharedMutex},
		benchKind{"shared-ticket", func() sync.Locker { return must(benchRegion().TicketMutex("bench")) }})
	rwBenchKinds = append(rwBenchKinds, struct {
		name string
		new  func() rwLocker
	}{"shared-rw", func() rwLocker { return must(benchRegion().RWMutex("bench")) }})
}

// benchRegion makes a fresh region whose file is removed at once: the
// mapping outlives the name, and nothing is left behind.
func benchRegion() *Region {
	dir, err := os.MkdirTemp("", "lockword-bench")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	return must(CreateRegion(filepath.Join(dir, "region"), 0, nil))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// newBenchSharedMutex makes a SharedMutex in a fresh region.
func newBenchSharedMutex() sync.Locker { return must(benchRegion().Mutex("bench")) }
