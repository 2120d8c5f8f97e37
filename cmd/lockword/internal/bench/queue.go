package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/puzpuzpuz/xsync/v4"
)

// Queue subjects: Params.Goroutines producers push for Params.Duration to
// a fixed number of consumers; then the producers stop, the queue is
// closed and drained. Ops counts the items that arrived, Elapsed runs
// until the consumers are done; one item in waitSampleEvery carries its
// push time, giving the wait per item (push to pop); PerWorker is each
// producer's items, for fairness.
const queueCapacity = 1024

// queueGrid is the producer counts of the queue groups.
var queueGrid = []int{4, 16, 64}

// An mpmc is one multi-producer multi-consumer queue under test. push
// returns once v is in; pop returns false once the queue is closed and
// drained; close is called after the last push returned. newPop, when not
// nil, replaces pop with one per consumer (one that keeps a batch).
type mpmc struct {
	push   func(v queueItem)
	pop    func() (queueItem, bool)
	close  func()
	newPop func() func() (queueItem, bool)
}

// queueItem is an item: for one in waitSampleEvery, the push time in ns
// since the sample's start (0 for the others).
type queueItem struct{ at int64 }

func chanMPMC() mpmc {
	ch := make(chan queueItem, queueCapacity)
	return mpmc{push: func(v queueItem) { ch <- v }, pop: func() (queueItem, bool) { v, ok := <-ch; return v, ok }, close: func() { close(ch) }}
}

func newLockwordQueue() *lockword.Queue[queueItem] {
	q, err := lockword.NewQueue[queueItem](queueCapacity)
	if err != nil {
		panic(err) // queueCapacity is a power of two
	}
	return q
}

func lockwordMPMC() mpmc {
	q := newLockwordQueue()
	ctx := context.Background()
	return mpmc{push: func(v queueItem) { q.Push(ctx, v) },
		pop: func() (queueItem, bool) { v, err := q.Pop(ctx); return v, err == nil }, close: q.Close}
}

// queuePopBatch is the most items one PopSlice of lockwordMPMCPopSlice takes.
const queuePopBatch = 64

// lockwordMPMCPopSlice is the Queue with producers pushing one item at a
// time and each consumer taking up to queuePopBatch items per PopSlice.
func lockwordMPMCPopSlice() mpmc {
	q := newLockwordQueue()
	ctx := context.Background()
	return mpmc{push: func(v queueItem) { q.Push(ctx, v) }, close: q.Close,
		newPop: func() func() (queueItem, bool) {
			var buf [queuePopBatch]queueItem
			next, n := 0, 0
			return func() (queueItem, bool) {
				if next == n {
					var err error
					if n, err = q.PopSlice(ctx, buf[:]); err != nil {
						return queueItem{}, false
					}
					next = 0
				}
				next++
				return buf[next-1], true
			}
		}}
}

// xsyncMPMC wraps xsync's MPMCQueue, which has no blocking calls: a side
// yields the processor while the queue is full (empty), as its own
// benchmarks do.
func xsyncMPMC() mpmc {
	q := xsync.NewMPMCQueue[queueItem](queueCapacity)
	var closed atomic.Bool
	return mpmc{push: func(v queueItem) {
		for !q.TryEnqueue(v) {
			runtime.Gosched()
		}
	}, pop: func() (queueItem, bool) {
		for {
			if v, ok := q.TryDequeue(); ok {
				return v, true
			}
			if closed.Load() { // set after the last push returned
				return q.TryDequeue()
			}
			runtime.Gosched()
		}
	}, close: func() { closed.Store(true) }}
}

// runMPMC measures one queue with p.Goroutines producers and consumers
// consumers.
func runMPMC(ctx context.Context, q mpmc, consumers int, p Params) (Sample, error) {
	producers := p.Goroutines
	var stop atomic.Bool
	pushed := make([]worker, producers)
	waits := make([]worker, consumers)
	var wgp, wgc sync.WaitGroup
	t0 := time.Now()
	for i := range producers {
		wgp.Go(func() {
			w := &pushed[i]
			for more := true; more; more = !stop.Load() { // one item at least, however late we start
				var v queueItem
				if w.n%waitSampleEvery == 0 {
					v.at = int64(time.Since(t0))
				}
				q.push(v)
				w.n++
			}
		})
	}
	for i := range consumers {
		pop := q.pop
		if q.newPop != nil {
			pop = q.newPop()
		}
		wgc.Go(func() {
			w := &waits[i]
			for {
				v, ok := pop()
				if !ok {
					return
				}
				if v.at != 0 {
					w.waits.Record(int64(time.Since(t0)) - v.at)
				}
			}
		})
	}
	var err error
	select {
	case <-time.After(p.Duration):
	case <-ctx.Done():
		err = ctx.Err()
	}
	stop.Store(true)
	wgp.Wait()
	q.close()
	wgc.Wait()
	s := Sample{Elapsed: time.Since(t0), Waits: new(Histogram), PerWorker: make([]int64, producers)}
	for i := range pushed {
		s.Ops += pushed[i].n
		s.PerWorker[i] = pushed[i].n
	}
	for i := range waits {
		s.Waits.Merge(&waits[i].waits)
	}
	return s, err
}

func mpmcSubject(name string, peers []string, consumers int, newQueue func() mpmc) Subject {
	return Subject{Name: name, Peers: peers, run: func(ctx context.Context, p Params) (Sample, error) {
		return runMPMC(ctx, newQueue(), consumers, p)
	}}
}

// queueGroups are the queue kind's groups: 1 and 4 consumers.
func queueGroups() []Group {
	var gs []Group
	for _, c := range []int{1, 4} {
		gs = append(gs, Group{Name: fmt.Sprintf("queue-c%d", c),
			Title: fmt.Sprintf("MPMC queues, capacity %d, %d consumer(s)", queueCapacity, c),
			Unit:  "items", Axis: "producers", Grid: queueGrid, Subjects: []Subject{
				mpmcSubject("chan", nil, c, chanMPMC),
				mpmcSubject("xsync MPMCQueue", nil, c, xsyncMPMC),
				mpmcSubject("Queue", []string{"chan", "xsync MPMCQueue"}, c, lockwordMPMC),
				// The peers have no batched pop: their rows pop one item at
				// a time, and the name says so beside the ratio.
				mpmcSubject(fmt.Sprintf("Queue batch-pop %d (peers pop 1)", queuePopBatch),
					[]string{"chan", "xsync MPMCQueue"}, c, lockwordMPMCPopSlice),
			}})
	}
	return gs
}
