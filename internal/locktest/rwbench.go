package locktest

import (
	"fmt"
	"sync"
	"testing"
)

// The reader-writer benchmark shapes that package lockword's and package
// shm's benchmarks share, each run over a table of kinds so that one
// benchstat run compares a lock with its sync peer.

// RWLocker is a reader-writer lock: the package's own, sync.RWMutex, and
// the deliberately broken ones of the checkers.
type RWLocker interface {
	sync.Locker
	RLock()
	RUnlock()
}

// RWKind is one reader-writer lock of a kind=NAME sub-benchmark; New makes
// a fresh one for each sub-benchmark.
type RWKind struct {
	Name string
	New  func() RWLocker
}

// PaddedRW keeps a reader-writer lock alone on its cache lines, so that
// false sharing with the benchmark's own variables does not pollute the
// figure.
type PaddedRW struct {
	_  [128]byte
	RW RWLocker
	_  [128]byte
}

// BenchRW runs goroutines that share b.N acquisitions of rw: every
// writeEvery'th is a write (Lock, Unlock), the rest reads that do
// workInside SpinWork steps while holding the read lock (Go's own
// BenchmarkRWMutexWrite100 shape). It reports Macq/s.
func BenchRW(b *testing.B, rw RWLocker, goroutines, writeEvery, workInside int) {
	p := &PaddedRW{RW: rw}
	RunShared(b, goroutines, "Macq/s", func(g, n int) {
		local := 0
		for i := range n {
			if (i+g)%writeEvery == 0 {
				p.RW.Lock()
				p.RW.Unlock()
			} else {
				p.RW.RLock()
				local += SpinWork(workInside)
				p.RW.RUnlock()
			}
		}
		sink += local & 0
	})
}

// BenchRWKinds runs BenchRW for every kind at 2, 4, 16 and 64 goroutines,
// one write in writeEvery operations, 10 SpinWork steps inside;
// sub-benchmarks are kind=NAME/goroutines=G.
func BenchRWKinds(b *testing.B, kinds []RWKind, writeEvery int) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range kinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.Name, g), func(b *testing.B) {
				BenchRW(b, k.New(), g, writeEvery, 10)
			})
		}
	}
}

// BenchRWUncontended times Lock+Unlock (write) or RLock+RUnlock, from one
// goroutine, on a padded lock of every kind; sub-benchmarks are
// kind=NAME. The branch on write is the same every iteration.
func BenchRWUncontended(b *testing.B, kinds []RWKind, write bool) {
	for _, k := range kinds {
		b.Run("kind="+k.Name, func(b *testing.B) {
			p := &PaddedRW{RW: k.New()}
			for b.Loop() {
				if write {
					p.RW.Lock()
					p.RW.Unlock()
				} else {
					p.RW.RLock()
					p.RW.RUnlock()
				}
			}
		})
	}
}
