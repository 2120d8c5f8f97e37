package locktest

import (
	"math"
	"math/bits"
	"sync"
	"testing"
	"time"
)

// The contended-lock benchmark shapes that package lockword's and package
// shm's benchmarks share. Unlike RunShared, which gives each goroutine its
// share of b.N (so that with an unfair lock the favoured goroutines finish
// early and the rest run uncontended), BenchLockShape keeps one count of
// b.N acquisitions under the lock, and every goroutine contends until it
// is reached.

// LockShape describes one contended workload of BenchLockShape.
type LockShape struct {
	Goroutines     int
	Inside         int  // SpinWork steps while holding the lock
	Outside        int  // SpinWork steps between acquisitions
	TimeWaits      bool // time every Lock (two clock reads each)
	Greedy         bool // goroutine 0 re-locks at once, untimed: the lockskew shape
	GreedyWaitsToo bool // count the greedy goroutine's waits in the histogram
	P999           bool // with TimeWaits, also report p99.9-ms
	// Handle, if set, gives goroutine g its own locker for the lock (a
	// shm.Mutex through its own Region handle: another owner token, as
	// another process would have); else every goroutine uses l.
	Handle func(g int) sync.Locker
}

// paddedLocker keeps the lock alone on its cache lines, so that false
// sharing with the benchmark's own variables does not pollute the figure.
type paddedLocker struct {
	_ [128]byte
	l sync.Locker
	_ [128]byte
}

var sink int

// benchGoroutine is one goroutine's record, padded so that goroutines
// do not share cache lines.
type benchGoroutine struct {
	acquired int
	hist     waitHist
	_        [64]byte
}

// BenchLockShape runs s.Goroutines goroutines on l until they have made
// b.N acquisitions in all, and reports Macq/s, owner-changes/1000 (how
// often the lock passed to another goroutine, per 1,000 acquisitions),
// max/min (the most acquisitions by one goroutine over the fewest) and,
// if s.TimeWaits, p50-ms, p99-ms, p99.9-ms if s.P999, and max-ms: the
// wait of one Lock call (all goroutines, or all but the greedy one).
func BenchLockShape(b *testing.B, l sync.Locker, s LockShape) {
	p := &paddedLocker{l: l}
	in, out := s.Inside, s.Outside
	recs := make([]benchGoroutine, s.Goroutines)
	total, changes, last := 0, 0, -1 // guarded by p.l
	var wg, started sync.WaitGroup
	start := make(chan struct{})
	for g := range s.Goroutines {
		started.Add(1)
		greedy := s.Greedy && g == 0
		timed := s.TimeWaits && (!greedy || s.GreedyWaitsToo)
		l := p.l
		if s.Handle != nil {
			l = s.Handle(g)
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
				local += SpinWork(in)
				l.Unlock()
				if !greedy {
					local += SpinWork(out)
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
	if s.TimeWaits {
		b.ReportMetric(h.quantile(0.50)/1e6, "p50-ms")
		b.ReportMetric(h.quantile(0.99)/1e6, "p99-ms")
		if s.P999 {
			b.ReportMetric(h.quantile(0.999)/1e6, "p99.9-ms")
		}
		b.ReportMetric(float64(h.max)/1e6, "max-ms")
	}
}

// WorkSteps converts a duration to SpinWork steps, calibrated once.
func WorkSteps(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return max(1, int(math.Round(float64(d)/spinStepNs())))
}

// spinStepNs is the time of one SpinWork step in nanoseconds: the fastest
// of five timed runs of 2^20 steps.
var spinStepNs = sync.OnceValue(func() float64 {
	const steps = 1 << 20
	best := time.Duration(math.MaxInt64)
	for range 5 {
		t0 := time.Now()
		sink += SpinWork(steps) & 0
		best = min(best, time.Since(t0))
	}
	return float64(best) / steps
})

// waitHist is a histogram of waits in nanoseconds with buckets that grow
// geometrically, 8 per power of two (12.5% wide), plus the exact maximum:
// enough for p50 and p99 without keeping every sample.
type waitHist struct {
	n   [64 * 8]uint64
	max int64
}

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
