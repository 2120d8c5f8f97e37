package lockword

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// Benchmarks of every lock against its standard-library peer, in one file so
// that one benchstat run compares them (see BENCHMARKS.md):
//
//	go test -run '^$' -bench . -cpu 2 -count 10 | tee new.txt
//	benchstat -col /kind new.txt
//
// ns/op is wall time per acquisition across all goroutines (the inverse of
// throughput); Macq/s is millions of acquisitions per second.

// benchKind is locktest.LockKind's shape, for positional literals.
type benchKind struct {
	Name string
	New  func() sync.Locker
}

var benchKinds = []benchKind{
	{"sync", func() sync.Locker { return new(sync.Mutex) }},
	{"mutex", func() sync.Locker { return new(Mutex) }},
	{"spin", func() sync.Locker { return new(SpinMutex) }},
	{"ticket", func() sync.Locker { return new(TicketMutex) }},
}

// paddedLocker keeps the lock alone on its cache lines, so that false
// sharing with the benchmark's own variables does not pollute the figure.
type paddedLocker struct {
	_ [128]byte
	l sync.Locker
	_ [128]byte
}

// spinWork burns roughly n small steps of CPU (locktest.SpinWork).
func spinWork(n int) int { return locktest.SpinWork(n) }

var sink int

// BenchmarkUncontended is one goroutine's Lock+Unlock of every kind.
func BenchmarkUncontended(b *testing.B) { locktest.BenchUncontended(b, benchKinds) }

// BenchmarkContended is every kind at 2 to 64 goroutines, nothing inside
// or between.
func BenchmarkContended(b *testing.B) { locktest.BenchContended(b, benchKinds) }

// naiveTicket is the textbook spinning ticket lock, the reference that
// issue 4's TicketMutex targets are stated against: waiters spin on
// serving (with the CPU pause hint) and never sleep, so with more
// goroutines than cores the lock is handed to waiters that are not
// running and throughput collapses.
type naiveTicket struct {
	next, serving atomic.Uint32
}

func (n *naiveTicket) Lock() {
	t := n.next.Add(1) - 1
	for n.serving.Load() != t {
		procyield(4)
	}
}

func (n *naiveTicket) Unlock() { n.serving.Add(1) }

// paddedCount keeps each goroutine's counter on its own cache lines.
type paddedCount struct {
	n int
	_ [120]byte
}

// benchmarkFair runs goroutines that take turns on one lock until b.N
// acquisitions have been made in all, each counting its own. Besides
// Macq/s it reports max/min, the most acquisitions made by one goroutine
// over the fewest (1.00 is perfectly fair; a FIFO lock stays near it, an
// unfair one lets a goroutine that re-locks at once win most rounds). The
// lock is held while the goroutines start, and released when the timer
// starts, so that all of them contend from the first moment: a goroutine
// that has not yet run is in no lock's queue, and its lateness would be
// counted against the lock.
func benchmarkFair(b *testing.B, l sync.Locker, goroutines int) {
	p := &paddedLocker{l: l}
	counts := make([]paddedCount, goroutines)
	total := 0 // guarded by p.l
	var wg, started sync.WaitGroup
	p.l.Lock()
	for g := range goroutines {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			for {
				p.l.Lock()
				if total >= b.N {
					p.l.Unlock()
					return
				}
				total++
				counts[g].n++
				p.l.Unlock()
			}
		})
	}
	started.Wait()
	time.Sleep(time.Millisecond + time.Duration(goroutines)*20*time.Microsecond) // all reach Lock
	b.ResetTimer()
	t0 := time.Now()
	p.l.Unlock()
	wg.Wait()
	b.StopTimer()
	reportFair(b, t0, counts)
}

// reportFair reports, once the timer is stopped, the b.N acquisitions since
// t0 as Macq/s and the most acquisitions in counts over the fewest as
// max/min (benchmarkFair's metrics).
func reportFair(b *testing.B, t0 time.Time, counts []paddedCount) {
	lo, hi := math.MaxInt, 0
	for i := range counts {
		lo, hi = min(lo, counts[i].n), max(hi, counts[i].n)
	}
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds()/1e6, "Macq/s")
	b.ReportMetric(float64(hi)/float64(max(lo, 1)), "max/min")
}

// BenchmarkFair measures throughput and fairness at 2, 4, 16 and 64
// goroutines; run it with -cpu 2 for the figures in BENCHMARKS.md. The
// kind tokenring is the floor of strict FIFO, a token passed around a ring
// of channels (benchmarkTokenRing), for TicketMutex to be compared with.
func BenchmarkFair(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range benchKinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.Name, g), func(b *testing.B) {
				benchmarkFair(b, k.New(), g)
			})
		}
		b.Run(fmt.Sprintf("kind=tokenring/goroutines=%d", g), func(b *testing.B) {
			benchmarkTokenRing(b, g)
		})
	}
}

// BenchmarkTicketNaive measures the naive spinning ticket lock, the
// reference for issue 4's TicketMutex targets. Oversubscribed, it hands the
// lock to waiters that are not running and a fixed count of acquisitions
// can take minutes, so each iteration is one round of naiveRound: ns/op is
// the round's length, and Macq/s is the figure to read.
func BenchmarkTicketNaive(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			var acquisitions int64
			var elapsed time.Duration
			for b.Loop() {
				n, d := timedRound(new(naiveTicket), g, naiveRound)
				acquisitions += n
				elapsed += d
			}
			b.ReportMetric(float64(acquisitions)/elapsed.Seconds()/1e6, "Macq/s")
		})
	}
}

// naiveRound is the length of one BenchmarkTicketNaive iteration.
const naiveRound = 200 * time.Millisecond

// timedRound runs goroutines that lock and unlock l until d has passed, and
// returns the acquisitions made in that time and the time itself.
func timedRound(l sync.Locker, goroutines int, d time.Duration) (int64, time.Duration) {
	var stop atomic.Bool
	var made atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range goroutines {
		wg.Go(func() {
			<-start
			n := int64(0)
			for !stop.Load() {
				l.Lock()
				if !stop.Load() {
					n++
				}
				l.Unlock()
			}
			made.Add(n)
		})
	}
	t0 := time.Now()
	close(start)
	time.Sleep(d)
	stop.Store(true)
	elapsed := time.Since(t0)
	wg.Wait() // those still queued drain: not counted, not timed
	return made.Load(), elapsed
}

// rwBenchKinds are the reader-writer locks, beside their sync peer.
var rwBenchKinds = []locktest.RWKind{
	{Name: "sync", New: func() locktest.RWLocker { return new(sync.RWMutex) }},
	{Name: "rw", New: func() locktest.RWLocker { return new(RWMutex) }},
}

// paddedRW is locktest's padded reader-writer lock.
type paddedRW = locktest.PaddedRW

// runShared is locktest.RunShared, shared with the other package's benchmarks.
var runShared = locktest.RunShared

// BenchmarkRW99 is issue 4's reader-writer benchmark: 99% reads, at 2, 4,
// 16 and 64 goroutines, RWMutex against sync.RWMutex in the same run.
func BenchmarkRW99(b *testing.B) {
	locktest.BenchRWKinds(b, rwBenchKinds, 100)
}

// BenchmarkRWUncontended is one goroutine's RLock+RUnlock.
func BenchmarkRWUncontended(b *testing.B) {
	locktest.BenchRWUncontended(b, rwBenchKinds, false)
}
