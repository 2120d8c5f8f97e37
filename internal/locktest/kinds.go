package locktest

import (
	"fmt"
	"sync"
	"testing"
)

// LockKind is the shape of a mutual exclusion lock in a kind=NAME
// sub-benchmark: its name, and New making a fresh one. Each package's
// tests declare their own struct of this shape (K of BenchUncontended and
// BenchContended), so that their tables stay positional.
type LockKind = struct {
	Name string
	New  func() sync.Locker
}

// BenchUncontended measures one goroutine's Lock+Unlock on a padded lock
// of every kind; sub-benchmarks are kind=NAME.
func BenchUncontended[K ~LockKind](b *testing.B, kinds []K) {
	for _, k := range kinds {
		k := LockKind(k) // a type parameter's fields are reached by conversion
		b.Run("kind="+k.Name, func(b *testing.B) { Uncontended(b, k.New()) })
	}
}

// Uncontended is one kind's body of BenchUncontended: one goroutine's
// Lock+Unlock of l, padded to its own cache lines.
func Uncontended(b *testing.B, l sync.Locker) {
	p := &paddedLocker{l: l}
	for b.Loop() {
		p.l.Lock()
		p.l.Unlock()
	}
}

// BenchContended runs, for every kind at 2, 4, 16 and 64 goroutines,
// goroutines that share b.N acquisitions of one padded lock with nothing
// inside or between (RunShared: Macq/s); sub-benchmarks are
// kind=NAME/goroutines=G.
func BenchContended[K ~LockKind](b *testing.B, kinds []K) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range kinds {
			k := LockKind(k)
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.Name, g), func(b *testing.B) { Contended(b, k.New(), g) })
		}
	}
}

// Contended is one case's body of BenchContended: goroutines share b.N
// acquisitions of l, padded, with nothing inside or between.
func Contended(b *testing.B, l sync.Locker, goroutines int) {
	p := &paddedLocker{l: l}
	RunShared(b, goroutines, "Macq/s", func(_, n int) {
		local := 0
		for range n {
			p.l.Lock()
			local += SpinWork(0)
			p.l.Unlock()
			local += SpinWork(0)
		}
		sink += local & 0 // keep local live without a data race
	})
}
