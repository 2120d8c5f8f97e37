package bench

// Multi-producer multi-consumer throughput of lockword's Queue against a
// buffered channel of the same capacity and xsync's MPMCQueue (Vyukov's
// design too, non-blocking only: its peer yields when full or empty), in
// one interleaved run so that the ratios hold:
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench QueueMPMC -cpu 2 -benchtime 200ms -count 5 ./bench
//
// P producers push until the consumers have together popped b.N items;
// then the producers stop, the queue is closed and drained. ns/op is wall
// time per popped item, Mitems/s its inverse in millions per second.
// Every 16th item carries its push time, and the consumers report the
// wait per item (push to pop): p99-µs and max-µs. fair is the most items
// any producer pushed over the fewest (1 is perfectly fair). Kind claims
// is the floor: the two claimed positions alone (claimsFloor). cpu-ns/item
// is the process's CPU time per item; for the Queue, parks/Mitem and
// wakes/Mitem count its parks and wake calls per million items
// (QueueStats).

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/puzpuzpuz/xsync/v4"
)

// mpmcItem is one item: its producer and sequence, and for every 16th its
// push time in nanoseconds since the run's start (0 for the others).
type mpmcItem struct {
	id uint64
	at int64
}

// mpmcKind is one queue under test. push blocks (or yields) until v is in;
// pop returns false once the queue is closed and drained; close is called
// after every producer has returned.
type mpmcKind struct {
	name    string
	prepare func(capacity int) mpmcOps
}

// mpmcOps are one prepared queue's calls; stats, nil for the peers,
// returns lockword's counts of parks and wake calls.
type mpmcOps struct {
	push  func(v mpmcItem)
	pop   func() (mpmcItem, bool)
	close func()
	stats func() lockword.QueueStats
}

var mpmcKinds = []mpmcKind{
	{"chan", func(capacity int) mpmcOps {
		ch := make(chan mpmcItem, capacity)
		return mpmcOps{func(v mpmcItem) { ch <- v },
			func() (mpmcItem, bool) { v, ok := <-ch; return v, ok },
			func() { close(ch) }, nil}
	}},
	{"queue", func(capacity int) mpmcOps {
		q, err := lockword.NewQueue[mpmcItem](capacity)
		if err != nil {
			panic(err)
		}
		ctx := context.Background()
		return mpmcOps{func(v mpmcItem) { q.Push(ctx, v) },
			func() (mpmcItem, bool) { v, err := q.Pop(ctx); return v, err == nil },
			q.Close, q.Stats}
	}},
	{"xsync", func(capacity int) mpmcOps {
		q := xsync.NewMPMCQueue[mpmcItem](capacity)
		var closed atomic.Bool
		return mpmcOps{func(v mpmcItem) {
			for !q.TryEnqueue(v) {
				runtime.Gosched()
			}
		}, func() (mpmcItem, bool) {
			for {
				if v, ok := q.TryDequeue(); ok {
					return v, true
				}
				if closed.Load() { // set after the last push returned
					v, ok := q.TryDequeue()
					return v, ok
				}
				runtime.Gosched()
			}
		}, func() { closed.Store(true) }, nil}
	}},
	{"claims", claimsFloor},
}

// claimsFloor is the floor of a queue built on two claimed positions:
// producers claim tail and consumers head with a CAS, as lockword's Queue
// and xsync's MPMCQueue do, and nothing else: no slots, no items (pop
// returns zero items, so it reports no wait), yielding when full or empty
// as the xsync peer does. Its Mitems/s is what the two contended words
// alone allow in the same shape.
func claimsFloor(capacity int) mpmcOps {
	var w struct {
		_          [128]byte
		tail       atomic.Uint64
		_          [120]byte
		head       atomic.Uint64
		_          [120]byte
		closedFlag atomic.Bool
	}
	c := uint64(capacity)
	return mpmcOps{func(mpmcItem) {
		for {
			if t := w.tail.Load(); t-w.head.Load() < c && w.tail.CompareAndSwap(t, t+1) {
				return
			}
			runtime.Gosched()
		}
	}, func() (mpmcItem, bool) {
		for {
			done := w.closedFlag.Load() // set after the last push returned
			if h := w.head.Load(); h < w.tail.Load() {
				if w.head.CompareAndSwap(h, h+1) {
					return mpmcItem{}, true
				}
				continue
			}
			if done {
				return mpmcItem{}, false
			}
			runtime.Gosched()
		}
	}, func() { w.closedFlag.Store(true) }, nil}
}

// benchmarkMPMC runs one kind with producers and consumers goroutines.
func benchmarkMPMC(b *testing.B, k mpmcKind, producers, consumers, capacity int) {
	ops := k.prepare(capacity)
	push, pop := ops.push, ops.pop
	var stop atomic.Bool
	var popped atomic.Int64
	pushed := make([]int64, producers)
	lat := make([][]int64, consumers)
	start := time.Now()
	cpu0, cpuOK := processCPU()
	var wgp, wgc sync.WaitGroup
	b.ResetTimer()
	for p := range producers {
		wgp.Go(func() {
			n := int64(0)
			for !stop.Load() {
				v := mpmcItem{id: uint64(p)<<32 | uint64(n)}
				if n%16 == 0 {
					v.at = int64(time.Since(start))
				}
				push(v)
				n++
			}
			pushed[p] = n
		})
	}
	for c := range consumers {
		wgc.Go(func() {
			local := int64(0)
			for {
				v, ok := pop()
				if !ok {
					return
				}
				if v.at != 0 {
					lat[c] = append(lat[c], int64(time.Since(start))-v.at)
				}
				if local++; local == 256 {
					if popped.Add(local) >= int64(b.N) {
						stop.Store(true)
					}
					local = 0
				}
			}
		})
	}
	wgp.Wait()
	ops.close()
	wgc.Wait()
	elapsed := time.Since(start)
	cpu1, _ := processCPU()
	b.StopTimer()
	var total int64
	for _, n := range pushed {
		total += n
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(total)/elapsed.Seconds()/1e6, "Mitems/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(total), "ns/op")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100])/1e3, "p99-µs")
		b.ReportMetric(float64(all[len(all)-1])/1e3, "max-µs")
	}
	b.ReportMetric(float64(slices.Max(pushed))/float64(max(1, slices.Min(pushed))), "fair")
	reportCPU(b, cpu1-cpu0, cpuOK, total)
	if ops.stats != nil && total > 0 {
		st := ops.stats()
		perM := 1e6 / float64(total)
		b.ReportMetric(float64(st.PushSleeps+st.PopSleeps)*perM, "parks/Mitem")
		b.ReportMetric(float64(st.Wakes)*perM, "wakes/Mitem")
	}
}

// BenchmarkQueueMPMC interleaves the kinds at each shape, capacity 1024.
func BenchmarkQueueMPMC(b *testing.B) {
	for _, p := range []int{4, 16, 64} {
		for _, c := range []int{1, 4} {
			for _, k := range mpmcKinds {
				b.Run(fmt.Sprintf("p=%d/c=%d/kind=%s", p, c, k.name), func(b *testing.B) {
					benchmarkMPMC(b, k, p, c, ringCapacity)
				})
			}
		}
	}
}
