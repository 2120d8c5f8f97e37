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
	benchKinds = append(benchKinds, benchKind{"shared", newBenchSharedMutex})
}

// newBenchSharedMutex makes a SharedMutex in a fresh region whose file is
// removed at once: the mapping outlives the name, and nothing is left behind.
func newBenchSharedMutex() sync.Locker {
	dir, err := os.MkdirTemp("", "lockword-bench")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	r, err := CreateRegion(filepath.Join(dir, "region"), 0, nil)
	if err != nil {
		panic(err)
	}
	m, err := r.Mutex("bench")
	if err != nil {
		panic(err)
	}
	return m
}
