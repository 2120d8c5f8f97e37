package bench

// Reader-writer throughput of lockword's RWMutex against sync.RWMutex and
// xsync's RBMutex (a reader-biased lock: readers count themselves on one
// of many padded slots, writers scan them), in one run so that the ratios
// hold (BENCHMARKS.md, "RWMutex"):
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench RWPeers -cpu 2 -benchtime 200ms -count 6 ./bench
//
// goroutines share b.N acquisitions: every writeEvery'th is a write (Lock,
// Unlock), the rest reads that do 10 steps of work while holding the read
// lock, the shape of the root package's BenchmarkRW99 and BenchmarkRW90.
// It lives here because the root package imports only golang.org/x/sys.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/locktest"
	"github.com/puzpuzpuz/xsync/v4"
)

// rwPeer is one lock's read and write sections: read runs f under the read
// lock.
type rwPeer struct {
	name string
	new  func() (read func(f func()), write func())
}

var rwPeers = []rwPeer{
	{"sync", func() (func(func()), func()) {
		rw := new(sync.RWMutex)
		return func(f func()) { rw.RLock(); f(); rw.RUnlock() }, func() { rw.Lock(); rw.Unlock() }
	}},
	{"rw", func() (func(func()), func()) {
		rw := new(lockword.RWMutex)
		return func(f func()) { rw.RLock(); f(); rw.RUnlock() }, func() { rw.Lock(); rw.Unlock() }
	}},
	{"xsync", func() (func(func()), func()) {
		rw := xsync.NewRBMutex()
		return func(f func()) { t := rw.RLock(); f(); rw.RUnlock(t) }, func() { rw.Lock(); rw.Unlock() }
	}},
}

// rwWork burns roughly n small steps of CPU (locktest.SpinWork).
func rwWork(n int) int { return locktest.SpinWork(n) }

var rwSink int

func benchmarkRWPeer(b *testing.B, p rwPeer, goroutines, writeEvery int) {
	read, write := p.new()
	locktest.RunShared(b, goroutines, "Macq/s", func(g, n int) {
		local := 0
		work := func() { local += rwWork(10) }
		for i := range n {
			if (i+g)%writeEvery == 0 {
				write()
			} else {
				read(work)
			}
		}
		rwSink += local & 0
	})
}

func BenchmarkRWPeers(b *testing.B) {
	for _, reads := range []struct {
		name       string
		writeEvery int
	}{{"99", 100}, {"90", 10}} {
		for _, g := range []int{2, 4, 16, 64} {
			for _, p := range rwPeers {
				b.Run(fmt.Sprintf("reads=%s/goroutines=%d/kind=%s", reads.name, g, p.name), func(b *testing.B) {
					benchmarkRWPeer(b, p, g, reads.writeEvery)
				})
			}
		}
	}
}
