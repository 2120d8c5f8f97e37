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
// any producer pushed over the fewest (1 is perfectly fair). Kinds claims
// and claimslots are bare designs: the two claimed positions alone
// (claimsFloor), and those plus moving the items through sequenced slots,
// with no waiting protocol (claimSlotsFloor); both retry a lost claim at
// once, which the Queue does not. Kind queue-try is the Queue's
// TryPush and TryPop yielding when they fail, as the xsync peer does: the
// Queue without parking. Kind queue-pop64 is the Queue with consumers
// taking up to 64 items per PopSlice while producers push one at a time;
// the channel and xsync peers have no batched pop, so they still pop one
// item at a time in their rows. cpu-ns/item is the process's CPU time per
// item; for the Queue, parks/Mitem and wakes/Mitem count its parks and
// wake calls per million items (QueueStats).

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
// returns lockword's counts of parks and wake calls. newPop, when not nil,
// gives each consumer its own pop (one that keeps a batch between calls);
// otherwise the consumers share pop.
type mpmcOps struct {
	push   func(v mpmcItem)
	pop    func() (mpmcItem, bool)
	close  func()
	stats  func() lockword.QueueStats
	newPop func() func() (mpmcItem, bool)
}

var mpmcKinds = []mpmcKind{
	{"chan", func(capacity int) mpmcOps {
		ch := make(chan mpmcItem, capacity)
		return mpmcOps{push: func(v mpmcItem) { ch <- v },
			pop:   func() (mpmcItem, bool) { v, ok := <-ch; return v, ok },
			close: func() { close(ch) }}
	}},
	{"queue", func(capacity int) mpmcOps {
		q := mustQueue(capacity)
		ctx := context.Background()
		return mpmcOps{push: func(v mpmcItem) { q.Push(ctx, v) },
			pop:   func() (mpmcItem, bool) { v, err := q.Pop(ctx); return v, err == nil },
			close: q.Close, stats: q.Stats}
	}},
	{"queue-try", func(capacity int) mpmcOps {
		q := mustQueue(capacity)
		return mpmcOps{push: func(v mpmcItem) {
			for !q.TryPush(v) {
				runtime.Gosched()
			}
		}, pop: func() (mpmcItem, bool) {
			for {
				if v, ok := q.TryPop(); ok {
					return v, true
				}
				if q.Closed() { // closed after the last push returned
					return q.TryPop()
				}
				runtime.Gosched()
			}
		}, close: q.Close, stats: q.Stats}
	}},
	{"queue-pop64", func(capacity int) mpmcOps {
		q := mustQueue(capacity)
		ctx := context.Background()
		return mpmcOps{push: func(v mpmcItem) { q.Push(ctx, v) },
			newPop: func() func() (mpmcItem, bool) {
				var buf [64]mpmcItem
				next, n := 0, 0
				return func() (mpmcItem, bool) {
					if next == n {
						var err error
						if n, err = q.PopSlice(ctx, buf[:]); err != nil {
							return mpmcItem{}, false
						}
						next = 0
					}
					next++
					return buf[next-1], true
				}
			}, close: q.Close, stats: q.Stats}
	}},
	{"xsync", func(capacity int) mpmcOps {
		q := xsync.NewMPMCQueue[mpmcItem](capacity)
		var closed atomic.Bool
		return mpmcOps{push: func(v mpmcItem) {
			for !q.TryEnqueue(v) {
				runtime.Gosched()
			}
		}, pop: func() (mpmcItem, bool) {
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
		}, close: func() { closed.Store(true) }}
	}},
	{"claims", claimsFloor},
	{"claimslots", claimSlotsFloor},
}

func mustQueue(capacity int) *lockword.Queue[mpmcItem] {
	q, err := lockword.NewQueue[mpmcItem](capacity)
	if err != nil {
		panic(err)
	}
	return q
}

// claimWords are the floors' two claimed positions, each on its own
// cache lines as the Queue's are, and the flag that close sets.
type claimWords struct {
	_          [128]byte
	tail       atomic.Uint64
	_          [120]byte
	head       atomic.Uint64
	_          [120]byte
	closedFlag atomic.Bool
}

// claimsFloor is the floor of a queue built on two claimed positions:
// producers claim tail and consumers head with a CAS, as lockword's Queue
// and xsync's MPMCQueue do, and nothing else: no slots, no items (pop
// returns zero items, so it reports no wait), yielding when full or empty
// as the xsync peer does. Its Mitems/s is what the two contended words
// alone allow in the same shape.
func claimsFloor(capacity int) mpmcOps {
	var w claimWords
	c := uint64(capacity)
	return mpmcOps{push: func(mpmcItem) {
		for {
			if t := w.tail.Load(); t-w.head.Load() < c && w.tail.CompareAndSwap(t, t+1) {
				return
			}
			runtime.Gosched()
		}
	}, pop: func() (mpmcItem, bool) {
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
	}, close: func() { w.closedFlag.Store(true) }}
}

// claimSlotsFloor is the floor of a queue that moves items through slots
// with per-slot sequences (Vyukov's, as lockword's Queue and xsync's
// MPMCQueue): the claims of claimsFloor, plus writing each item and its
// slot's sequence and reading them back, one slot per 128 bytes. It has
// no waiting protocol at all: a side that finds the queue full (empty)
// yields, as the xsync peer does, and never parks or looks for sleepers;
// a lost claim is retried at once, where the Queue's Push and Pop yield.
func claimSlotsFloor(capacity int) mpmcOps {
	type slot struct {
		seq atomic.Uint64
		v   mpmcItem
		_   [128 - 8 - 16]byte // 128 bytes per slot, as the Queue's
	}
	var w claimWords
	slots := make([]slot, capacity)
	for i := range slots {
		slots[i].seq.Store(uint64(i))
	}
	mask := uint64(capacity - 1)
	return mpmcOps{push: func(v mpmcItem) {
		for {
			t := w.tail.Load()
			s := &slots[t&mask]
			if s.seq.Load() == t && w.tail.CompareAndSwap(t, t+1) {
				s.v = v
				s.seq.Store(t + 1)
				return
			}
			if int64(s.seq.Load()-t) < 0 { // full
				runtime.Gosched()
			}
		}
	}, pop: func() (mpmcItem, bool) {
		for {
			done := w.closedFlag.Load() // set after the last push returned
			h := w.head.Load()
			s := &slots[h&mask]
			if d := int64(s.seq.Load() - (h + 1)); d == 0 {
				if w.head.CompareAndSwap(h, h+1) {
					v := s.v
					s.seq.Store(h + uint64(len(slots)))
					return v, true
				}
				continue
			} else if d > 0 { // another consumer took h: look again
				continue
			}
			if done && h >= w.tail.Load() {
				return mpmcItem{}, false
			}
			runtime.Gosched()
		}
	}, close: func() { w.closedFlag.Store(true) }}
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
		pop := pop
		if ops.newPop != nil {
			pop = ops.newPop()
		}
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
