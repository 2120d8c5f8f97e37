//go:build linux

package shm

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// Test harness that the root package's tests also define: the bench
// shapes, the wake-latency measurement, the torn-read check and the log
// capture, for the shared kinds.

// brokenLock does not lock: the deliberately broken lock of the kernel's
// locktorture ("lock_busted") that every checker must catch.
type brokenLock struct{}

func withGOMAXPROCS(t *testing.T, procs int) {
	old := runtime.GOMAXPROCS(procs)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

type benchKind struct {
	name string
	new  func() sync.Locker
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

// benchmarkUncontended measures one goroutine's Lock+Unlock.
func benchmarkUncontended(b *testing.B, l sync.Locker) {
	p := &paddedLocker{l: l}
	for b.Loop() {
		p.l.Lock()
		p.l.Unlock()
	}
}

// benchmarkContended runs goroutines that share b.N acquisitions of one
// lock, doing workInside steps while holding it and workOutside between.
func benchmarkContended(b *testing.B, l sync.Locker, goroutines, workInside, workOutside int) {
	p := &paddedLocker{l: l}
	runShared(b, goroutines, "Macq/s", func(g, n int) {
		local := 0
		for range n {
			p.l.Lock()
			local += spinWork(workInside)
			p.l.Unlock()
			local += spinWork(workOutside)
		}
		sink += local & 0 // keep local live without a data race
	})
}

func BenchmarkUncontended(b *testing.B) {
	for _, k := range benchKinds {
		b.Run("kind="+k.name, func(b *testing.B) { benchmarkUncontended(b, k.new()) })
	}
}

func BenchmarkContended(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range benchKinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.name, g), func(b *testing.B) {
				benchmarkContended(b, k.new(), g, 0, 0)
			})
		}
	}
}

// paddedRW is paddedLocker for a reader-writer lock.
type paddedRW struct {
	_  [128]byte
	rw rwLocker
	_  [128]byte
}

// benchmarkRW runs goroutines that share b.N acquisitions of rw: every
// writeEvery'th is a write (Lock, Unlock), the rest reads that do
// workInside steps while holding the read lock (Go's own
// BenchmarkRWMutexWrite100 shape).
func benchmarkRW(b *testing.B, rw rwLocker, goroutines, writeEvery, workInside int) {
	p := &paddedRW{rw: rw}
	runShared(b, goroutines, "Macq/s", func(g, n int) {
		local := 0
		for i := range n {
			if (i+g)%writeEvery == 0 {
				p.rw.Lock()
				p.rw.Unlock()
			} else {
				p.rw.RLock()
				local += spinWork(workInside)
				p.rw.RUnlock()
			}
		}
		sink += local & 0
	})
}

// runShared is locktest.RunShared, shared with the other package's benchmarks.
var runShared = locktest.RunShared

// BenchmarkRW99 is issue 4's reader-writer benchmark: 99% reads, at 2, 4,
// 16 and 64 goroutines, RWMutex against sync.RWMutex in the same run.
func BenchmarkRW99(b *testing.B) {
	benchmarkRWKinds(b, 100)
}

// benchmarkRWKinds runs benchmarkRW for every rwBenchKinds entry at 2, 4, 16
// and 64 goroutines, one write in writeEvery operations, 10 loop iterations
// of work inside; sub-benchmarks are kind=NAME/goroutines=G.
func benchmarkRWKinds(b *testing.B, writeEvery int) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range rwBenchKinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.name, g), func(b *testing.B) {
				benchmarkRW(b, k.new(), g, writeEvery, 10)
			})
		}
	}
}

// BenchmarkRWUncontended is one goroutine's RLock+RUnlock.
func BenchmarkRWUncontended(b *testing.B) {
	benchmarkRWUncontended(b, false)
}

// benchmarkRWUncontended times Lock+Unlock (write) or RLock+RUnlock, from one
// goroutine, on a padded lock of every rwBenchKinds entry; sub-benchmarks
// are kind=NAME. The branch on write is the same every iteration.
func benchmarkRWUncontended(b *testing.B, write bool) {
	for _, k := range rwBenchKinds {
		b.Run("kind="+k.name, func(b *testing.B) {
			p := &paddedRW{rw: k.new()}
			for b.Loop() {
				if write {
					p.rw.Lock()
					p.rw.Unlock()
				} else {
					p.rw.RLock()
					p.rw.RUnlock()
				}
			}
		})
	}
}

// lockShape describes one contended workload.
type lockShape struct {
	goroutines     int
	inside         int  // spinWork steps while holding the lock
	outside        int  // spinWork steps between acquisitions
	timeWaits      bool // time every Lock (two clock reads each)
	greedy         bool // goroutine 0 re-locks at once, untimed: the lockskew shape
	greedyWaitsToo bool // count the greedy goroutine's waits in the histogram
	// handle, if set, gives goroutine g its own locker for the lock (a
	// SharedMutex through its own Region handle: another owner token, as
	// another process would have); else every goroutine uses l.
	handle func(g int) sync.Locker
}

// workSteps converts a duration to spinWork steps, calibrated once.
func workSteps(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return max(1, int(math.Round(float64(d)/spinStepNs())))
}

// spinStepNs is the time of one spinWork step in nanoseconds: the fastest
// of five timed runs of 2^20 steps.
var spinStepNs = sync.OnceValue(func() float64 {
	const steps = 1 << 20
	best := time.Duration(math.MaxInt64)
	for range 5 {
		t0 := time.Now()
		sink += spinWork(steps) & 0
		best = min(best, time.Since(t0))
	}
	return float64(best) / steps
})

// benchmarkLockShape runs s.goroutines goroutines on l until they have made
// b.N acquisitions in all, and reports Macq/s, owner-changes/1000,
// max/min and, if s.timeWaits, p50-ms, p99-ms and max-ms: the wait of one
// Lock call (all goroutines, or all but the greedy one).
func benchmarkLockShape(b *testing.B, l sync.Locker, s lockShape) {
	p := &paddedLocker{l: l}
	in, out := s.inside, s.outside
	recs := make([]benchGoroutine, s.goroutines)
	total, changes, last := 0, 0, -1 // guarded by p.l
	var wg, started sync.WaitGroup
	start := make(chan struct{})
	for g := range s.goroutines {
		started.Add(1)
		greedy := s.greedy && g == 0
		timed := s.timeWaits && (!greedy || s.greedyWaitsToo)
		l := p.l
		if s.handle != nil {
			l = s.handle(g)
		}
		wg.Go(func() {
			r := &recs[g]
			local := 0
			started.Done()
			<-start
			for {
				var t0 time.Time
				if timed {
					t0 = time.Now()
				}
				l.Lock()
				if timed {
					r.hist.add(int64(time.Since(t0)))
				}
				if total >= b.N {
					l.Unlock()
					break
				}
				total++
				if last != g {
					changes++
					last = g
				}
				r.acquired++
				local += spinWork(in)
				l.Unlock()
				if !greedy {
					local += spinWork(out)
				}
			}
			sink += local & 0 // keep local live without a data race
		})
	}
	started.Wait()
	b.ResetTimer()
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	lo, hi := math.MaxInt, 0
	var h waitHist
	for i := range recs {
		lo, hi = min(lo, recs[i].acquired), max(hi, recs[i].acquired)
		h.merge(&recs[i].hist)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds()/1e6, "Macq/s")
	b.ReportMetric(1000*float64(changes)/float64(max(b.N, 1)), "owner-changes/1000")
	b.ReportMetric(float64(hi)/float64(max(lo, 1)), "max/min")
	if s.timeWaits {
		b.ReportMetric(h.quantile(0.50)/1e6, "p50-ms")
		b.ReportMetric(h.quantile(0.99)/1e6, "p99-ms")
		b.ReportMetric(float64(h.max)/1e6, "max-ms")
	}
}

// syncBuffer, captureSlog and awaitLogs are locktest's (the stuck reports'
// log capture, shared with package shm's tests).
type syncBuffer = locktest.SyncBuffer

func captureSlog(t *testing.T) *syncBuffer { return locktest.CaptureSlog(t) }

func awaitLogs(logs *syncBuffer, substr string, n int) string {
	return locktest.AwaitLogs(logs, substr, n)
}

// tornPayload is the Concurrency Kit seqlock payload: every consistent
// snapshot has b == a+1000 and c == a+b.
type tornPayload struct{ a, b, c uint64 }

func (p tornPayload) consistent() bool { return p.b == p.a+1000 && p.c == p.a+p.b }

type tornResult struct {
	reads, violations, backwards int
	distinct                     int // distinct values seen by reader 0
}

// checkTornReads runs writers that store consistent payloads with rising a,
// and readers that load through load until reads snapshots are checked.
// A violation is an inconsistent snapshot (a torn read); backwards counts a
// reader seeing a older than it saw before (with several writers, the Store
// order need not follow a, so only the single-writer check uses it).
func checkTornReads(s *SeqLock[tornPayload], load func() tornPayload, readers, writers, reads int) tornResult {
	defer watchdog("seqlock", 3*time.Minute)()
	var res tornResult
	var stop atomic.Bool
	var next atomic.Uint64 // values handed to writers; Stores of several writers are serialized
	var wwg, rwg sync.WaitGroup
	writing := make(chan struct{}) // closed after the first Store: readers overlap the writers
	var once sync.Once
	for range writers {
		wwg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				a := next.Add(1)
				s.Store(tornPayload{a, a + 1000, 2*a + 1000})
				once.Do(func() { close(writing) })
				if i%128 == 0 {
					runtime.Gosched() // let readers in when GOMAXPROCS=1
				}
			}
		})
	}
	if writers > 0 {
		<-writing // with none here, the writer is another process's
	}
	var violations, backwards atomic.Int64
	per := reads / readers
	for r := range readers {
		rwg.Go(func() {
			last, distinct, bad, back := uint64(0), 0, 0, 0
			for i := range per {
				if i%1024 == 0 {
					runtime.Gosched() // let the writer in when GOMAXPROCS=1
				}
				p := load()
				if !p.consistent() {
					bad++
				}
				if p.a < last {
					back++
				}
				if p.a != last {
					distinct++
				}
				last = p.a
			}
			violations.Add(int64(bad))
			backwards.Add(int64(back))
			if r == 0 {
				res.distinct = distinct
			}
		})
	}
	rwg.Wait()
	stop.Store(true)
	wwg.Wait()
	res.reads = per * readers
	res.violations = int(violations.Load())
	res.backwards = int(backwards.Load())
	return res
}

// loadNoRetry is a deliberately broken reader: it copies the payload once,
// skipping the sequence check and retry.
func loadNoRetry(s *SeqLock[tornPayload]) (v tornPayload) {
	s.c.CopyOut(&v)
	return v
}

// rwLocker is a reader-writer lock: RWMutex, sync.RWMutex, and the broken
// ones below.
type rwLocker interface {
	sync.Locker
	RLock()
	RUnlock()
}

// benchGoroutine is one goroutine's record, padded so that goroutines
// do not share cache lines.
type benchGoroutine struct {
	acquired int
	hist     waitHist
	_        [64]byte
}

// waitHist is a histogram of waits in nanoseconds with buckets that grow
// geometrically, 8 per power of two (12.5% wide), plus the exact maximum:
// enough for p50 and p99 without keeping every sample.
type waitHist struct {
	n   [64 * 8]uint64
	max int64
}

func (brokenLock) Lock()   {}
func (brokenLock) Unlock() {}
func (h *waitHist) add(ns int64) {
	if ns < 0 {
		ns = 0
	}
	h.max = max(h.max, ns)
	u := uint64(ns) | 1
	e := bits.Len64(u) - 1 // u is in [2^e, 2^(e+1))
	sub := 0
	if e >= 3 {
		sub = int(u>>(e-3)) & 7
	}
	h.n[e*8+sub]++
}

func (h *waitHist) merge(o *waitHist) {
	for i := range h.n {
		h.n[i] += o.n[i]
	}
	h.max = max(h.max, o.max)
}

// quantile returns the upper edge of the bucket holding quantile q.
func (h *waitHist) quantile(q float64) float64 {
	var total uint64
	for _, c := range h.n {
		total += c
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.n {
		seen += c
		if seen >= want && c > 0 {
			e, sub := i/8, i%8
			if e < 3 {
				return float64(uint64(1) << (e + 1))
			}
			return float64((uint64(8+sub+1) << (e - 3)))
		}
	}
	return float64(h.max)
}

// wakeCase and wakeKind are locktest's, with positional literals.
type (
	wakeCase = locktest.WakeCase
	wakeKind = locktest.WakeKind
)

func TestWakeLatency(t *testing.T) { locktest.CheckWakeLatency(t, wakeKinds) }
