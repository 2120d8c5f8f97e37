package torture

// The queue torture kinds: lockword's Queue (many producers, many
// consumers: every item arrives exactly once, and each consumer gets each
// producer's items in order) and queue-broken, a queue that frees each slot
// before it reads the item, which must FAIL.

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/locktest/brokenqueue"
)

const (
	defaultQueueItems    = 10_000_000 // items through the queue unless -items says otherwise
	queueTortureCapacity = 1024       // slots of the queue under test
	queueTortureBatch    = 16         // largest PushSlice/PopSlice batch
	queueSeqBits         = 40         // an item is producer<<queueSeqBits | sequence
)

func init() {
	register(
		kind{name: "queue", desc: "lockword.Queue: MPMC queue, -workers producers and half as many consumers",
			run: func(cfg *config) (report, error) {
				q, err := lockword.NewQueue[uint64](queueTortureCapacity)
				if err != nil {
					return nil, err
				}
				return tortureQueue(cfg, "queue", q), nil
			}},
		kind{name: "queue-broken", desc: "a queue that frees each slot before reading its item: must FAIL",
			run: func(cfg *config) (report, error) {
				return tortureQueue(cfg, "queue-broken", brokenqueue.New(queueTortureCapacity, brokenqueue.FreeBeforeRead, lockword.ErrQueueClosed)), nil
			}},
	)
	kindHelp = append(kindHelp, fmt.Sprintf(`Queues (not in all, which means the locks; name them with -lock):
  queue streams -items numbers (default %d) from -workers producer
  goroutines to max(1, workers/2) consumer goroutines through a Queue of
  %d slots, each side mixing single, batched (1..%d) and try calls. It
  checks that every item arrives exactly once and that each consumer gets
  each producer's items in the order pushed (by count and by the sums of
  each producer's sequence numbers and their squares). It prints
  Producers, Consumers, Items, Received, Out of order, Duplicates, Lost,
  Mismatched producers, Throughput
  (M items/s), the queue's sleeps and wake calls, and Result. A run that
  moves no item for %v fails as stalled. -value and -work do not apply.
  queue-broken must FAIL: it proves that the checks can.
`, defaultQueueItems, queueTortureCapacity, queueTortureBatch, stallTimeout))
}

// mpmcQueue is what the queue experiment drives: *lockword.Queue[uint64],
// or a brokenqueue.Queue.
type mpmcQueue interface {
	TryPush(uint64) bool
	TryPop() (uint64, bool)
	PushSlice(context.Context, []uint64) (int, error)
	PopSlice(context.Context, []uint64) (int, error)
	Push(context.Context, uint64) error
	Pop(context.Context) (uint64, error)
	Close()
}

// queueReport is the outcome of one queue run.
type queueReport struct {
	lock                 string
	producers, consumers int
	items                int64 // requested; 0 in a timed run
	pushed, received     int64
	outOfOrder, dups     int64
	lost                 int64
	elapsed              time.Duration
	stats                *lockword.QueueStats
	stalled              bool
	err                  error
	perProducer          int64   // items each producer pushes in a counted run
	pushedBy             []int64 // per producer, how many it pushed
	mismatched           int     // producers whose items arrived in the right number but not each once
	mu                   sync.Mutex
	got                  []seqSums // per producer, over all consumers
}

// seqSums sums what arrived of one producer's items 1..n: if each arrived
// exactly once, count is n, sum n(n+1)/2 and squares n(n+1)(2n+1)/6
// (all modulo 2^64). A lost item with a duplicate of another keeps the
// count but not the sums.
type seqSums struct{ count, sum, squares uint64 }

func (s *seqSums) add(v uint64) { s.count++; s.sum += v; s.squares += v * v }

// want is the sums of 1..n.
func wantSums(n uint64) seqSums {
	var w seqSums
	a, b, c := n, n+1, 2*n+1
	// n(n+1)/2 and n(n+1)(2n+1)/6 with the divisions done exactly.
	if a%2 == 0 {
		w.sum = a / 2 * b
	} else {
		w.sum = a * (b / 2)
	}
	x, y, z := a, b, c
	switch {
	case x%2 == 0:
		x /= 2
	default:
		y /= 2
	}
	switch {
	case x%3 == 0:
		x /= 3
	case y%3 == 0:
		y /= 3
	default:
		z /= 3
	}
	w.count, w.squares = n, x*y*z
	return w
}

// tortureQueue streams items through q and checks what arrives.
func tortureQueue(cfg *config, name string, q mpmcQueue) *queueReport {
	producers := max(1, cfg.workers)
	r := &queueReport{lock: name, producers: producers, consumers: max(1, producers/2)}
	if !cfg.timed() {
		r.items = cfg.items
		if r.items == 0 {
			r.items = defaultQueueItems
		}
		r.perProducer = max(1, r.items/int64(producers))
		r.items = r.perProducer * int64(producers)
	} else {
		r.perProducer = 1<<queueSeqBits - 1
	}
	r.pushedBy = make([]int64, producers)
	r.got = make([]seqSums, producers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stop atomic.Bool
	defer stopAfterDuration(cfg, &stop)()
	var pushed, received atomic.Int64
	start := time.Now()
	prog := startProgress(cfg.progress, runProgress(cfg, name, start, r.items, received.Load, "items"))
	stopWatch := watchStall(received.Load, func() { r.stalled = true; cancel() })

	var wgp, wgc sync.WaitGroup
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { r.err = err }) }
	for p := range producers {
		wgp.Go(func() {
			n, err := r.produce(ctx, q, uint64(p), &stop)
			r.pushedBy[p] = n
			pushed.Add(n)
			if err != nil {
				fail(fmt.Errorf("producer %d: %w", p, err))
			}
		})
	}
	for c := range r.consumers {
		wgc.Go(func() {
			if err := r.consume(ctx, q, c, &received); err != nil {
				fail(fmt.Errorf("consumer %d: %w", c, err))
			}
		})
	}
	wgp.Wait()
	q.Close()
	wgc.Wait()
	r.elapsed = time.Since(start)
	stopWatch()
	prog.stop()
	r.pushed, r.received = pushed.Load(), received.Load()
	r.account()
	if s, ok := q.(interface{ Stats() lockword.QueueStats }); ok {
		st := s.Stats()
		r.stats = &st
	}
	return r
}

// watchStall calls stalled once done has not moved for stallTimeout, and
// returns the function that ends the watch.
func watchStall(done func() int64, stalled func()) (stop func()) {
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(stallTimeout / 20)
		defer tick.Stop()
		last, since := int64(-1), time.Now()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if n := done(); n != last {
				last, since = n, time.Now()
			} else if time.Since(since) >= stallTimeout {
				stalled()
				return
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// produce pushes producer p's items 1, 2, ... (perProducer of them, or
// until stop), in single, batched and try calls; it returns how many.
func (r *queueReport) produce(ctx context.Context, q mpmcQueue, p uint64, stop *atomic.Bool) (int64, error) {
	var batch [queueTortureBatch]uint64
	next := int64(1)
	for k := 0; next <= r.perProducer && (r.items > 0 || !stop.Load()); k++ {
		v := p<<queueSeqBits | uint64(next)
		switch k % 3 {
		case 0:
			if err := q.Push(ctx, v); err != nil {
				return next - 1, err
			}
			next++
		case 1:
			n := min(int64(1+k%queueTortureBatch), r.perProducer-next+1)
			for i := range n {
				batch[i] = v + uint64(i)
			}
			got, err := q.PushSlice(ctx, batch[:n])
			next += int64(got)
			if err != nil {
				return next - 1, err
			}
		default:
			if q.TryPush(v) {
				next++
			} else {
				runtime.Gosched()
			}
		}
	}
	return next - 1, nil
}

// consume pops until q is closed and drained, marking each item seen and
// checking each producer's order as this consumer sees it.
func (r *queueReport) consume(ctx context.Context, q mpmcQueue, c int, received *atomic.Int64) error {
	last := make([]uint64, r.producers)
	sums := make([]seqSums, r.producers)
	defer func() {
		r.mu.Lock()
		for p := range sums {
			r.got[p].count += sums[p].count
			r.got[p].sum += sums[p].sum
			r.got[p].squares += sums[p].squares
		}
		r.mu.Unlock()
	}()
	var batch [queueTortureBatch]uint64
	n := int64(0)
	defer func() { received.Add(n % publishEvery) }()
	take := func(v uint64) {
		if n++; n%publishEvery == 0 {
			received.Add(publishEvery)
		}
		p, s := v>>queueSeqBits, v&(1<<queueSeqBits-1)
		if p >= uint64(r.producers) || s == 0 {
			atomic.AddInt64(&r.outOfOrder, 1) // not an item anyone pushed
			return
		}
		if s <= last[p] {
			atomic.AddInt64(&r.outOfOrder, 1)
		}
		last[p] = max(last[p], s)
		sums[p].add(s)
	}
	for k := c; ; k++ {
		switch k % 3 {
		case 0:
			v, err := q.Pop(ctx)
			if err != nil {
				return endOfStream(err, lockword.ErrQueueClosed)
			}
			take(v)
		case 1:
			got, err := q.PopSlice(ctx, batch[:1+k%queueTortureBatch])
			if err != nil {
				return endOfStream(err, lockword.ErrQueueClosed)
			}
			for _, v := range batch[:got] {
				take(v)
			}
		default:
			if v, ok := q.TryPop(); ok {
				take(v)
			} else if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
}

// account compares what arrived of each producer's items with what it
// pushed.
func (r *queueReport) account() {
	for p, n := range r.pushedBy {
		got, want := r.got[p], wantSums(uint64(n))
		switch {
		case got.count > want.count:
			r.dups += int64(got.count - want.count)
		case got.count < want.count:
			r.lost += int64(want.count - got.count)
		case got != want:
			r.mismatched++
		}
	}
}

func (r *queueReport) failures() []string {
	why := streamFailures("items", r.outOfOrder, r.dups, r.lost)
	if r.mismatched > 0 {
		why = append(why, fmt.Sprintf("%d producers' items arrived in the right number but not each once", r.mismatched))
	}
	if r.stalled {
		why = append(why, stalledFailure("item"))
	} else if r.err != nil {
		why = append(why, r.err.Error())
	}
	if r.items > 0 && r.pushed != r.items && r.err == nil && !r.stalled {
		why = append(why, fmt.Sprintf("the producers pushed %d of %d items", r.pushed, r.items))
	}
	return why
}

func (r *queueReport) passed() bool { return len(r.failures()) == 0 }

func (r *queueReport) throughput() float64 { return millionsPerSecond(r.received, r.elapsed) }

func (r *queueReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: %s\n", r.lock)
	fmt.Fprintf(w, "Producers: %d\nConsumers: %d\n", r.producers, r.consumers)
	fmt.Fprintf(w, "Capacity: %d; single, batched (1..%d) and try calls\n", queueTortureCapacity, queueTortureBatch)
	fmt.Fprintf(w, "Items: %d\n", r.pushed)
	writeStreamCounts(w, r.received, r.outOfOrder, r.dups, r.lost)
	fmt.Fprintf(w, "Mismatched producers: %d\n", r.mismatched)
	fmt.Fprintf(w, "Throughput: %.1f M items/s\n", r.throughput())
	if r.stats != nil {
		fmt.Fprintf(w, "Sleeps: producers %d, consumers %d; wake calls %d\n",
			r.stats.PushSleeps, r.stats.PopSleeps, r.stats.Wakes)
	} else {
		fmt.Fprintln(w, "Sleeps: n/a (this queue keeps no statistics)")
	}
	writeResult(w, r.failures())
}

func (r *queueReport) writeJSON(w io.Writer) error {
	j := struct {
		Lock        string   `json:"lock"`
		Producers   int      `json:"producers"`
		Consumers   int      `json:"consumers"`
		Items       int64    `json:"items"`
		Received    int64    `json:"received"`
		OutOfOrder  int64    `json:"out_of_order"`
		Duplicates  int64    `json:"duplicates"`
		Lost        int64    `json:"lost"`
		Mismatched  int      `json:"mismatched_producers"`
		Capacity    int      `json:"capacity"`
		ThroughputM float64  `json:"throughput_mitems_s"`
		PushSleeps  *uint64  `json:"push_sleeps"`
		PopSleeps   *uint64  `json:"pop_sleeps"`
		WakeCalls   *uint64  `json:"wake_calls"`
		DurationS   float64  `json:"duration_s"`
		Result      string   `json:"result"`
		Failures    []string `json:"failures,omitempty"`
	}{
		Lock: r.lock, Producers: r.producers, Consumers: r.consumers, Items: r.pushed, Received: r.received,
		OutOfOrder: r.outOfOrder, Duplicates: r.dups, Lost: r.lost, Mismatched: r.mismatched, Capacity: queueTortureCapacity,
		ThroughputM: r.throughput(), DurationS: r.elapsed.Seconds(),
		Result: verdict(r.failures()), Failures: r.failures(),
	}
	if r.stats != nil {
		j.PushSleeps, j.PopSleeps, j.WakeCalls = &r.stats.PushSleeps, &r.stats.PopSleeps, &r.stats.Wakes
	}
	return writeJSONLine(w, j)
}
