package lockword

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// Benchmarks of issue 11 sections 2-4: RWMutex against sync.RWMutex at 99%
// and 90% reads and for an uncontended write, TicketMutex against the
// strict-FIFO floor of a token passed around a ring of channels, and the
// cost of the stuck watcher on the slow paths (see BENCHMARKS.md):
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench 'RW90|RWLockUncontended|Fair|DiagCost' -cpu 2 -count 6 . | tee new.txt
//	benchstat -col /kind new.txt

// benchmarkTokenRing is benchmarkFair's shape without a lock: goroutines
// pass one token around a ring of channels (capacity 1), and the holder of
// the token makes the next acquisition. It is the floor of a strictly FIFO
// hand-off between parked goroutines: every acquisition wakes the next
// goroutine in the ring, which is what a ticket lock must do under
// contention.
func benchmarkTokenRing(b *testing.B, goroutines int) {
	ring := make([]chan struct{}, goroutines)
	for i := range ring {
		ring[i] = make(chan struct{}, 1)
	}
	counts := make([]paddedCount, goroutines)
	total := 0 // guarded by the token
	var wg, started sync.WaitGroup
	for g := range goroutines {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			next := ring[(g+1)%goroutines]
			for range ring[g] {
				if total >= b.N {
					next <- struct{}{} // let the next one see the end
					return
				}
				total++
				counts[g].n++
				next <- struct{}{}
			}
		})
	}
	started.Wait()
	time.Sleep(time.Millisecond + time.Duration(goroutines)*20*time.Microsecond) // all reach their receive
	b.ResetTimer()
	t0 := time.Now()
	ring[0] <- struct{}{}
	wg.Wait()
	b.StopTimer()
	reportFair(b, t0, counts)
}

// BenchmarkRW90 is BenchmarkRW99 at 90% reads.
func BenchmarkRW90(b *testing.B) {
	locktest.BenchRWKinds(b, rwBenchKinds, 10)
}

// BenchmarkRWLockUncontended is one goroutine's Lock+Unlock (a write).
func BenchmarkRWLockUncontended(b *testing.B) {
	locktest.BenchRWUncontended(b, rwBenchKinds, true)
}

// BenchmarkDiagCost runs slow-path shapes with the default stuck threshold
// and with stuck reports off (SetStuckThreshold(-1)), alternating, so that
// benchstat -col /stuck gives the cost of the diagnostics nobody asked for.
// Run one sub-benchmark per process to include the stuck watcher's own
// cost: a watcher started by a default lock runs on for a second after
// its last sleeper, through an off lock's benchmark in the same process.
func BenchmarkDiagCost(b *testing.B) {
	stucks := []struct {
		name      string
		threshold time.Duration
	}{{"default", 0}, {"off", -1}}
	for _, g := range []int{16, 64} {
		for _, st := range stucks {
			b.Run(fmt.Sprintf("shape=ticket/goroutines=%d/stuck=%s", g, st.name), func(b *testing.B) {
				m := new(TicketMutex)
				m.SetStuckThreshold(st.threshold)
				benchmarkFair(b, m, g)
			})
		}
	}
	for _, g := range []int{16, 64} {
		for _, st := range stucks {
			b.Run(fmt.Sprintf("shape=rw-write/goroutines=%d/stuck=%s", g, st.name), func(b *testing.B) {
				rw := new(RWMutex)
				rw.SetStuckThreshold(st.threshold)
				benchmarkFair(b, rw, g) // writers only: BenchmarkDiagPaired's rw-write
			})
		}
	}
	for _, g := range []int{4, 16} {
		for _, st := range stucks {
			b.Run(fmt.Sprintf("shape=rw90/goroutines=%d/stuck=%s", g, st.name), func(b *testing.B) {
				rw := new(RWMutex)
				rw.SetStuckThreshold(st.threshold)
				locktest.BenchRW(b, rw, g, 10, 10)
			})
		}
	}
}

// BenchmarkRWLockPaired is BenchmarkRWLockUncontended with the two locks
// alternating in blocks of rwPairBlock Lock+Unlock pairs within one
// iteration, so that a loaded host slows both alike: it reports each
// one's ns per Lock+Unlock and rw/sync, the median of the blocks' ratios.
func BenchmarkRWLockPaired(b *testing.B) {
	ps, pr := &paddedRW{RW: new(sync.RWMutex)}, &paddedRW{RW: new(RWMutex)}
	var syncNs, rwNs time.Duration
	var ratios []float64
	for b.Loop() {
		t0 := time.Now()
		for range rwPairBlock {
			ps.RW.Lock()
			ps.RW.Unlock()
		}
		t1 := time.Now()
		for range rwPairBlock {
			pr.RW.Lock()
			pr.RW.Unlock()
		}
		t2 := time.Now()
		syncNs += t1.Sub(t0)
		rwNs += t2.Sub(t1)
		ratios = append(ratios, float64(t2.Sub(t1))/float64(t1.Sub(t0)))
	}
	slices.Sort(ratios)
	n := float64(b.N * rwPairBlock)
	b.ReportMetric(float64(syncNs)/n, "sync-ns/lock")
	b.ReportMetric(float64(rwNs)/n, "rw-ns/lock")
	b.ReportMetric(ratios[len(ratios)/2], "rw/sync")
}

const rwPairBlock = 1000

// BenchmarkDiagPaired is BenchmarkDiagCost paired within one iteration:
// each iteration runs diagPairAcq contended acquisitions (benchmarkFair's
// shape: the lock is held while the goroutines queue) on a lock with the
// default stuck threshold and on one with stuck reports off, each first in
// turn (the first of a pair ran about 1% slower here, whichever it was),
// and reports 1 - default/off throughput per pair (the median:
// default-cost, the share of throughput the diagnostics take) beside each
// one's Macq/s.
// Host load hits both halves of a pair alike. The stuck watcher, started
// by the default half, runs through the off half too: this measures what
// each wait pays, not the watcher (BenchmarkDiagCost, one per process,
// includes it).
func BenchmarkDiagPaired(b *testing.B) {
	shapes := []struct {
		name string
		new  func(threshold time.Duration) sync.Locker
	}{
		{"ticket", func(th time.Duration) sync.Locker { m := new(TicketMutex); m.SetStuckThreshold(th); return m }},
		{"rw-write", func(th time.Duration) sync.Locker { m := new(RWMutex); m.SetStuckThreshold(th); return m }},
	}
	for _, sh := range shapes {
		for _, g := range []int{16, 64} {
			b.Run(fmt.Sprintf("shape=%s/goroutines=%d", sh.name, g), func(b *testing.B) {
				var ratios []float64
				var tDef, tOff time.Duration
				first := true
				for b.Loop() {
					// Alternate which half runs first, so that whatever
					// favours the first (or second) run of a pair is shared.
					var d1, d2 time.Duration
					if first {
						d1 = fairRun(sh.new(0), g, diagPairAcq)
						d2 = fairRun(sh.new(-1), g, diagPairAcq)
					} else {
						d2 = fairRun(sh.new(-1), g, diagPairAcq)
						d1 = fairRun(sh.new(0), g, diagPairAcq)
					}
					first = !first
					tDef, tOff = tDef+d1, tOff+d2
					ratios = append(ratios, 1-float64(d2)/float64(d1))
				}
				slices.Sort(ratios)
				n := float64(b.N * diagPairAcq)
				b.ReportMetric(n/tDef.Seconds()/1e6, "default-Macq/s")
				b.ReportMetric(n/tOff.Seconds()/1e6, "off-Macq/s")
				b.ReportMetric(ratios[len(ratios)/2], "default-cost")
			})
		}
	}
}

const diagPairAcq = 30_000

// fairRun is benchmarkFair's shape without the benchmark: goroutines
// queue on l (held while they start), then share n acquisitions; it
// returns the time from the release to the last acquisition.
func fairRun(l sync.Locker, goroutines, n int) time.Duration {
	total := 0 // guarded by l
	var wg, started sync.WaitGroup
	l.Lock()
	for range goroutines {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			for {
				l.Lock()
				if total >= n {
					l.Unlock()
					return
				}
				total++
				l.Unlock()
			}
		})
	}
	started.Wait()
	time.Sleep(time.Millisecond + time.Duration(goroutines)*20*time.Microsecond) // all reach Lock
	t0 := time.Now()
	l.Unlock()
	wg.Wait()
	return time.Since(t0)
}
