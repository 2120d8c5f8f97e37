package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/lockword/lockword"
	"github.com/puzpuzpuz/xsync/v4"
)

// Ring subjects: one goroutine produces, another consumes, for
// Params.Duration; the producer then closes the queue and the consumer
// drains it. Ops counts the items that arrived, Elapsed runs until the
// consumer is done, and the consumer checks that items arrive in order.
const (
	ringCapacity = 1024 // slots of the ring, and of the channel peer
	ringBatch    = 64   // items per batch in the batch subjects
)

// A queue is one single-producer single-consumer queue under test:
// produce pushes 1, 2, ... until stop, then closes; consume pops until
// closed and returns how many items it got and how many came out of order.
type queue struct {
	produce func(stop *atomic.Bool)
	consume func() (n, bad int64)
}

// runQueue measures one queue.
func runQueue(ctx context.Context, q queue, p Params) (Sample, error) {
	var bad atomic.Int64
	s, err := runWorkers(ctx, 2, p.Duration, false, func(i int, w *worker, stop *atomic.Bool) {
		if i == 0 {
			q.produce(stop)
			return
		}
		n, b := q.consume()
		w.n = n
		bad.Store(b)
	})
	s.PerWorker = nil
	if err == nil && bad.Load() != 0 {
		err = fmt.Errorf("%d of %d items arrived out of order", bad.Load(), s.Ops)
	}
	return s, err
}

func chanQueue() queue {
	ch := make(chan uint64, ringCapacity)
	return queue{
		produce: func(stop *atomic.Bool) {
			for i := uint64(1); !stop.Load(); i++ {
				ch <- i
			}
			close(ch)
		},
		consume: func() (n, bad int64) {
			for v := range ch {
				n++
				if v != uint64(n) {
					bad++
				}
			}
			return n, bad
		},
	}
}

func ringQueue() queue {
	r, err := lockword.NewRing[uint64](ringCapacity)
	if err != nil {
		panic(err) // ringCapacity is a power of two
	}
	ctx := context.Background()
	return queue{
		produce: func(stop *atomic.Bool) {
			for i := uint64(1); !stop.Load(); i++ {
				if r.Push(ctx, i) != nil {
					break
				}
			}
			r.Close()
		},
		consume: func() (n, bad int64) {
			for {
				v, err := r.Pop(ctx)
				if err != nil {
					return n, bad
				}
				n++
				if v != uint64(n) {
					bad++
				}
			}
		},
	}
}

// xsyncQueue is xsync's SPSCQueue, which has no blocking calls: a side
// yields the processor while it is full (empty), as its own benchmarks do.
func xsyncQueue() queue {
	q := xsync.NewSPSCQueue[uint64](ringCapacity)
	var closed atomic.Bool
	return queue{
		produce: func(stop *atomic.Bool) {
			for i := uint64(1); !stop.Load(); i++ {
				for !q.TryEnqueue(i) {
					runtime.Gosched()
				}
			}
			closed.Store(true)
		},
		consume: func() (n, bad int64) {
			for {
				v, ok := q.TryDequeue()
				if !ok {
					if closed.Load() { // set after the last push
						if v, ok = q.TryDequeue(); !ok {
							return n, bad
						}
					} else {
						runtime.Gosched()
						continue
					}
				}
				n++
				if v != uint64(n) {
					bad++
				}
			}
		},
	}
}

// chanBatchQueue sends arrays of ringBatch items through a channel with
// room for the same number of items as the ring: what one would write
// without a ring to amortize the channel's cost.
func chanBatchQueue() queue {
	ch := make(chan [ringBatch]uint64, ringCapacity/ringBatch)
	return queue{
		produce: func(stop *atomic.Bool) {
			next := uint64(1)
			for !stop.Load() {
				var b [ringBatch]uint64
				for j := range b {
					b[j] = next
					next++
				}
				ch <- b
			}
			close(ch)
		},
		consume: func() (n, bad int64) {
			for b := range ch {
				for _, v := range b {
					n++
					if v != uint64(n) {
						bad++
					}
				}
			}
			return n, bad
		},
	}
}

func ringBatchQueue() queue {
	r, err := lockword.NewRing[uint64](ringCapacity)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	return queue{
		produce: func(stop *atomic.Bool) {
			var b [ringBatch]uint64
			next := uint64(1)
			for !stop.Load() {
				for j := range b {
					b[j] = next
					next++
				}
				if _, err := r.PushSlice(ctx, b[:]); err != nil {
					break
				}
			}
			r.Close()
		},
		consume: func() (n, bad int64) {
			var b [ringBatch]uint64
			for {
				k, err := r.PopSlice(ctx, b[:])
				for _, v := range b[:k] {
					n++
					if v != uint64(n) {
						bad++
					}
				}
				if err != nil && k == 0 {
					return n, bad
				}
			}
		},
	}
}
