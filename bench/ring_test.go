package bench

// Single-producer single-consumer throughput of lockword's Ring against a
// buffered channel of the same capacity and xsync's SPSCQueue (another
// rigtorp ring, non-blocking only), in one run so that the ratios hold:
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench RingSPSC -cpu 2 -benchtime 200ms -count 5 ./bench
//
// One goroutine pushes b.N integers, another pops them and checks they
// arrive in order; ns/op is wall time per item and Mitems/s its inverse in
// millions per second. Each row also reports cores (CPU time over wall
// time: 2 when both goroutines ran all the time) and ping-M/s, the
// floor of a one-item hand-over measured in the same process just after
// the row (pingFor): a row whose ping falls far below the others' ran
// without two cores, and its ratio measures the scheduler. Kinds:
//
//	chan        ch <- v / <-ch
//	ring        lockword Ring Push / Pop (blocking: spin, then sleep)
//	ring-try    lockword Ring TryPush / TryPop, runtime.Gosched when full/empty
//	xsync       xsync SPSCQueue TryEnqueue / TryDequeue, runtime.Gosched when full/empty
//	ring-batchN lockword Ring PushSlice / PopSlice, batches of N = 16, 64,
//	            256 (one index store per batch on each side)
//	chan-batch64 a channel of [64]uint64 arrays with room for as many
//	            items: what one writes without a ring to batch a channel
//	ping        the floor: two goroutines hand one cache line back and
//	            forth (each writes it when it sees the other's write); an
//	            "item" is one one-way hand-over
//
// The xsync queue has no blocking calls; yielding on failure is what its
// own benchmark does.

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/puzpuzpuz/xsync/v4"
)

const ringCapacity = 1024

// spscKind is one queue under test: produce pushes 1..n, consume pops n
// items and returns how many arrived out of order.
type spscKind struct {
	name    string
	prepare func(capacity int) (produce func(n int), consume func(n int) (bad int))
}

var spscKinds = []spscKind{
	{"chan", func(capacity int) (func(int), func(int) int) {
		ch := make(chan uint64, capacity)
		return func(n int) {
				for i := 1; i <= n; i++ {
					ch <- uint64(i)
				}
			}, func(n int) (bad int) {
				for i := 1; i <= n; i++ {
					if <-ch != uint64(i) {
						bad++
					}
				}
				return bad
			}
	}},
	{"ring", func(capacity int) (func(int), func(int) int) {
		r := mustRing(capacity)
		ctx := context.Background()
		return func(n int) {
				for i := 1; i <= n; i++ {
					r.Push(ctx, uint64(i))
				}
			}, func(n int) (bad int) {
				for i := 1; i <= n; i++ {
					if v, _ := r.Pop(ctx); v != uint64(i) {
						bad++
					}
				}
				return bad
			}
	}},
	{"ring-try", func(capacity int) (func(int), func(int) int) {
		r := mustRing(capacity)
		return func(n int) {
				for i := 1; i <= n; i++ {
					for !r.TryPush(uint64(i)) {
						runtime.Gosched()
					}
				}
			}, func(n int) (bad int) {
				for i := 1; i <= n; i++ {
					v, ok := r.TryPop()
					for ; !ok; v, ok = r.TryPop() {
						runtime.Gosched()
					}
					if v != uint64(i) {
						bad++
					}
				}
				return bad
			}
	}},
	{"xsync", func(capacity int) (func(int), func(int) int) {
		q := xsync.NewSPSCQueue[uint64](capacity)
		return func(n int) {
				for i := 1; i <= n; i++ {
					for !q.TryEnqueue(uint64(i)) {
						runtime.Gosched()
					}
				}
			}, func(n int) (bad int) {
				for i := 1; i <= n; i++ {
					v, ok := q.TryDequeue()
					for ; !ok; v, ok = q.TryDequeue() {
						runtime.Gosched()
					}
					if v != uint64(i) {
						bad++
					}
				}
				return bad
			}
	}},
	batchKind(16),
	batchKind(64),
	batchKind(256),
	{"chan-batch64", func(capacity int) (func(int), func(int) int) {
		ch := make(chan [64]uint64, capacity/64)
		return func(n int) {
				for i := 1; i <= n; i += 64 {
					var b [64]uint64
					for j := range b {
						b[j] = uint64(i + j)
					}
					ch <- b
				}
			}, func(n int) (bad int) {
				for i := 1; i <= n; {
					b := <-ch
					for _, v := range b[:min(64, n-i+1)] {
						if v != uint64(i) {
							bad++
						}
						i++
					}
				}
				return bad
			}
	}},
	{"ping", func(int) (func(int), func(int) int) {
		var line struct {
			_ [64]byte
			w atomic.Uint64
			_ [64]byte
		}
		return func(n int) { // writes odd values
				for i := uint64(1); i <= uint64(n); i += 2 {
					awaitLine(&line.w, i-1)
					line.w.Store(i)
				}
			}, func(n int) int { // writes even values
				for i := uint64(2); i <= uint64(n); i += 2 {
					awaitLine(&line.w, i-1)
					line.w.Store(i)
				}
				return 0
			}
	}},
}

// awaitLine spins until *w == v, yielding now and then so that a peer on
// the same P (a loaded machine) can run.
func awaitLine(w *atomic.Uint64, v uint64) {
	for spins := 0; w.Load() != v; spins++ {
		if spins%1024 == 1023 {
			runtime.Gosched()
		}
	}
}

// batchKind moves items with PushSlice and PopSlice in batches of size:
// one index store per batch on each side.
func batchKind(size int) spscKind {
	return spscKind{fmt.Sprintf("ring-batch%d", size), func(capacity int) (func(int), func(int) int) {
		r := mustRing(capacity)
		ctx := context.Background()
		return func(n int) {
				batch := make([]uint64, size)
				for i := 1; i <= n; {
					k := min(size, n-i+1)
					for j := range k {
						batch[j] = uint64(i + j)
					}
					r.PushSlice(ctx, batch[:k])
					i += k
				}
			}, func(n int) (bad int) {
				batch := make([]uint64, size)
				for i := 1; i <= n; {
					k, _ := r.PopSlice(ctx, batch[:min(size, n-i+1)])
					for _, v := range batch[:k] {
						if v != uint64(i) {
							bad++
						}
						i++
					}
				}
				return bad
			}
	}}
}

func mustRing(capacity int) *lockword.Ring[uint64] {
	r, err := lockword.NewRing[uint64](capacity)
	if err != nil {
		panic(err)
	}
	return r
}

// benchmarkSPSC moves b.N items from a producer goroutine to the
// benchmark's goroutine.
func benchmarkSPSC(b *testing.B, k spscKind, capacity int) {
	produce, consume := k.prepare(capacity)
	start := make(chan struct{})
	done := make(chan struct{})
	go func() {
		<-start
		produce(b.N)
		close(done)
	}()
	b.ResetTimer()
	t0 := time.Now()
	cpu0, cpuOK := processCPU()
	close(start)
	bad := consume(b.N)
	<-done
	elapsed := time.Since(t0)
	cpu1, _ := processCPU()
	b.StopTimer()
	if bad != 0 {
		b.Fatalf("%s: %d of %d items out of order", k.name, bad, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds()/1e6, "Mitems/s")
	reportCPU(b, cpu1-cpu0, cpuOK, int64(b.N))
	if cpuOK {
		// Cores busy: 2 when both goroutines ran all the time.
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(elapsed.Nanoseconds()), "cores")
	}
	b.ReportMetric(pingFor(pingWindow)/1e6, "ping-M/s")
}

// pingWindow is how long pingFor measures after each row: long enough for
// thousands of hand-overs on an idle pair of cores, short against a row.
const pingWindow = 20 * time.Millisecond

// pingFor measures the floor of a one-item hand-over in the same process,
// just after a row, so that each row carries the floor of its own moment:
// one cache line handed back and forth between two goroutines, as
// kind=ping, for d. It returns one-way hand-overs per second. When the two
// goroutines do not get a core each (a loaded machine, GOMAXPROCS below 2),
// it falls by orders of magnitude, which marks the row's ratios as the
// scheduler's rather than the queue's.
func pingFor(d time.Duration) float64 {
	var line struct {
		_    [64]byte
		w    atomic.Uint64
		_    [56]byte
		stop atomic.Bool
	}
	// side hands the line over whenever it holds a value of its parity
	// (odd for the helper, even for us), until stop.
	side := func(odd uint64) uint64 {
		n := uint64(0)
		for spins := 0; !line.stop.Load(); spins++ {
			if v := line.w.Load(); v%2 == odd {
				line.w.Store(v + 1)
				n++
				spins = 0
			} else if spins%1024 == 1023 {
				runtime.Gosched() // a peer on our P must run
			}
		}
		return n
	}
	done := make(chan uint64)
	go func() { done <- side(1) }()
	t0 := time.Now()
	time.AfterFunc(d, func() { line.stop.Store(true) })
	n := side(0)
	n += <-done
	return float64(n) / time.Since(t0).Seconds()
}

// reportCPU reports the process's CPU time per item (cpu-ns/item, both
// sides together, over items), which a loaded machine disturbs less than
// wall time.
func reportCPU(b *testing.B, cpu time.Duration, ok bool, items int64) {
	if ok && items > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(items), "cpu-ns/item")
	}
}

func BenchmarkRingSPSC(b *testing.B) {
	for _, k := range spscKinds {
		b.Run(fmt.Sprintf("kind=%s/cap=%d", k.name, ringCapacity), func(b *testing.B) {
			benchmarkSPSC(b, k, ringCapacity)
		})
	}
}

// BenchmarkRingBatchShape is ring-batch64 with what explains its figure:
// items each PopSlice got (64 is the most), and the sleeps and wake-up
// calls of both sides per million items (RingStats). With -cpuprofile it
// is the profile of the batch shape (BENCHMARKS.md, Ring):
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench RingBatchShape -cpu 2 -benchtime 2s -cpuprofile /tmp/ringbatch.prof ./bench
func BenchmarkRingBatchShape(b *testing.B) {
	const size = 64
	r := mustRing(ringCapacity)
	ctx := context.Background()
	done := make(chan struct{})
	b.ResetTimer()
	t0 := time.Now()
	go func() {
		defer close(done)
		batch := make([]uint64, size)
		for i := 1; i <= b.N; {
			k := min(size, b.N-i+1)
			for j := range k {
				batch[j] = uint64(i + j)
			}
			r.PushSlice(ctx, batch[:k])
			i += k
		}
	}()
	batch := make([]uint64, size)
	pops, bad := 0, 0
	for i := 1; i <= b.N; {
		k, _ := r.PopSlice(ctx, batch[:min(size, b.N-i+1)])
		pops++
		for _, v := range batch[:k] {
			if v != uint64(i) {
				bad++
			}
			i++
		}
	}
	<-done
	elapsed := time.Since(t0)
	b.StopTimer()
	if bad != 0 {
		b.Fatalf("%d of %d items out of order", bad, b.N)
	}
	st := r.Stats()
	perM := 1e6 / float64(b.N)
	b.ReportMetric(float64(b.N)/elapsed.Seconds()/1e6, "Mitems/s")
	b.ReportMetric(float64(b.N)/float64(pops), "items/pop")
	b.ReportMetric(float64(st.ProducerSleeps)*perM, "psleeps/Mitem")
	b.ReportMetric(float64(st.ConsumerSleeps)*perM, "csleeps/Mitem")
	b.ReportMetric(float64(st.Wakes)*perM, "wakes/Mitem")
}
