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
// drained; close is called after the last push returned.
type mpmc struct {
	push  func(v queueItem)
	pop   func() (queueItem, bool)
	close func()
}

// queueItem is an item: for one in waitSampleEvery, the push time in ns
// since the sample's start (0 for the others).
type queueItem struct{ at int64 }

func chanMPMC() mpmc {
	ch := make(chan queueItem, queueCapacity)
	return mpmc{func(v queueItem) { ch <- v }, func() (queueItem, bool) { v, ok := <-ch; return v, ok }, func() { close(ch) }}
}

func lockwordMPMC() mpmc {
	q, err := lockword.NewQueue[queueItem](queueCapacity)
	if err != nil {
		panic(err) // queueCapacity is a power of two
	}
	ctx := context.Background()
	return mpmc{func(v queueItem) { q.Push(ctx, v) },
		func() (queueItem, bool) { v, err := q.Pop(ctx); return v, err == nil }, q.Close}
}

// xsyncMPMC wraps xsync's MPMCQueue, which has no blocking calls: a side
// yields the processor while the queue is full (empty), as its own
// benchmarks do.
func xsyncMPMC() mpmc {
	q := xsync.NewMPMCQueue[queueItem](queueCapacity)
	var closed atomic.Bool
	return mpmc{func(v queueItem) {
		for !q.TryEnqueue(v) {
			runtime.Gosched()
		}
	}, func() (queueItem, bool) {
		for {
			if v, ok := q.TryDequeue(); ok {
				return v, true
			}
			if closed.Load() { // set after the last push returned
				return q.TryDequeue()
			}
			runtime.Gosched()
		}
	}, func() { closed.Store(true) }}
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
		wgc.Go(func() {
			w := &waits[i]
			for {
				v, ok := q.pop()
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
			}})
	}
	return gs
}
