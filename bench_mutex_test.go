package lockword

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"testing"
	"time"
)

// Benchmarks of issue 11.1, Mutex's starvation bound: every mutual
// exclusion lock beside sync.Mutex in the same benchmark, so that one
// benchstat run compares them (the commands are in BENCHMARKS.md):
//
//	go test -run '^$' -bench 'WaitTail|Starve|ContendedWork' -cpu 2 -count 6 | tee new.txt
//	benchstat -col /kind new.txt
//
// Unlike benchmarkContended, which gives each goroutine b.N/goroutines
// acquisitions (so that with an unfair lock the favoured goroutines finish
// early and the rest run uncontended), these shapes share one count of b.N
// acquisitions, kept under the lock, and every goroutine contends until
// it is reached. Besides Macq/s each reports owner-changes/1000 (how often
// the lock passed to another goroutine, per 1,000 acquisitions; 1000 is a
// strict round robin, an unfair lock that lets a goroutine re-lock at once
// shows few) and max/min (the most acquisitions by one goroutine over the
// fewest).

// mutexBenchKinds are the mutual exclusion locks of issue 11.1.
var mutexBenchKinds = []benchKind{
	{"sync", func() sync.Locker { return new(sync.Mutex) }},
	{"mutex", func() sync.Locker { return new(Mutex) }},
	{"spin", func() sync.Locker { return new(SpinMutex) }},
}

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

// benchGoroutine is one goroutine's record, padded so that goroutines
// do not share cache lines.
type benchGoroutine struct {
	acquired int
	hist     waitHist
	_        [64]byte
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
// max/min and, if s.timeWaits, p50-ms, p99-ms, p99.9-ms and max-ms: the
// wait of one Lock call (all goroutines, or all but the greedy one).
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
		b.ReportMetric(h.quantile(0.999)/1e6, "p99.9-ms")
		b.ReportMetric(float64(h.max)/1e6, "max-ms")
	}
}

// BenchmarkWaitTail is the wait of every acquisition, empty critical
// section, nothing between: p50, p99, p99.9 and the worst wait at 2, 4,
// 16 and 64 goroutines. Run it with -benchtime 200ms, 1s and 3s.
func BenchmarkWaitTail(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range mutexBenchKinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.name, g), func(b *testing.B) {
				benchmarkLockShape(b, k.new(), lockShape{goroutines: g, timeWaits: true})
			})
		}
	}
}

// BenchmarkStarve is the lockskew shape: goroutine 0 re-locks in a tight
// loop (Unlock, Lock, nothing between) beside 1 or 3 others that work
// 1 µs between acquisitions; the waits are those of the others, the
// victims of an unfair lock.
func BenchmarkStarve(b *testing.B) {
	for _, others := range []int{1, 3} {
		for _, k := range mutexBenchKinds {
			b.Run(fmt.Sprintf("kind=%s/others=%d", k.name, others), func(b *testing.B) {
				benchmarkLockShape(b, k.new(), lockShape{
					goroutines: others + 1, outside: workSteps(time.Microsecond), timeWaits: true, greedy: true,
				})
			})
		}
	}
}

// contendedWorkShapes are BenchmarkContendedWork's critical sections:
// none at all, the 20 steps inside and 100 outside that bench/all.sh has
// always run, and issue 11.1's 100 ns inside with 100 ns or 1 µs outside.
var contendedWorkShapes = []struct {
	name            string
	inside, outside time.Duration
	insideSteps     int // when set, steps instead of durations
	outsideSteps    int
}{
	{name: "none"},
	{name: "in20steps-out100steps", insideSteps: 20, outsideSteps: 100},
	{name: "in100ns-out100ns", inside: 100 * time.Nanosecond, outside: 100 * time.Nanosecond},
	{name: "in100ns-out1us", inside: 100 * time.Nanosecond, outside: time.Microsecond},
}

// BenchmarkContendedWork holds the lock for a short critical section and
// works between acquisitions, a shape closer to real services, at 2, 4,
// 16 and 64 goroutines, every lock beside sync.Mutex.
func BenchmarkContendedWork(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range benchKinds {
			for _, w := range contendedWorkShapes {
				b.Run(fmt.Sprintf("kind=%s/goroutines=%d/work=%s", k.name, g, w.name), func(b *testing.B) {
					s := lockShape{goroutines: g, inside: w.insideSteps, outside: w.outsideSteps}
					if w.inside > 0 || w.outside > 0 {
						s.inside, s.outside = workSteps(w.inside), workSteps(w.outside)
					}
					benchmarkLockShape(b, k.new(), s)
				})
			}
		}
	}
}
