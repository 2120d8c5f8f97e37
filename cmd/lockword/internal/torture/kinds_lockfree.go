package torture

// The lock-free torture kinds: lockword's Ring (a stream that must arrive
// whole and in order) and SeqLock (snapshots that must never be torn), each
// with a deliberately broken twin that must FAIL, as none does for the
// locks. Neither is a sync.Locker, so each brings its own experiment and
// its own report (a report of its own shape); they are not in all, which means the locks.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

const (
	defaultRingItems    = 100_000_000 // items through the ring unless -items says otherwise
	defaultSeqLockReads = 10_000_000  // snapshots read unless -items says otherwise
	ringTortureCapacity = 1024        // slots of the ring under test
	ringTortureMaxBatch = 64          // largest PushSlice/PopSlice batch
	publishEvery        = 1024        // items between updates of the progress counters
)

// stallTimeout is how long a ring run may go without moving an item before
// it is declared stalled (a lost wake-up leaves a side asleep for ever). A
// variable so that tests can shorten it.
var stallTimeout = 10 * time.Second

func init() {
	register(
		kind{name: "ring", desc: "lockword.Ring: SPSC ring, one producer and one consumer, single and batched calls",
			acrossProcs: "shared-ring",
			run: func(cfg *config) (report, error) {
				r, err := lockword.NewRing[uint64](ringTortureCapacity)
				if err != nil {
					return nil, err
				}
				return tortureRing(cfg, "ring", r), nil
			}},
		kind{name: "ring-broken", desc: "a ring that publishes each item before writing it: must FAIL",
			run: func(cfg *config) (report, error) {
				return tortureRing(cfg, "ring-broken", newBrokenRing(ringTortureCapacity)), nil
			}},
		kind{name: "seqlock", desc: "lockword.SeqLock: one writer, -workers readers checking every snapshot",
			run: func(cfg *config) (report, error) {
				s, err := lockword.NewSeqLock(consistentPayload(0))
				if err != nil {
					return nil, err
				}
				return tortureSeqLock(cfg, "seqlock", s), nil
			}},
		kind{name: "seqlock-broken", desc: "a seqlock without its sequence check: must FAIL",
			run: func(cfg *config) (report, error) {
				b := new(brokenSeqLock)
				b.Store(consistentPayload(0))
				return tortureSeqLock(cfg, "seqlock-broken", b), nil
			}},
	)
	kindHelp = append(kindHelp, fmt.Sprintf(`Rings and seqlocks (not in all, which means the locks; name them with -lock):
  ring streams the numbers 1..N (N = -items, default %d) from one
  producer goroutine to one consumer through a Ring of %d slots, mixing
  single Push and Pop with PushSlice and PopSlice batches of 1..%d, and
  checks that every number arrives exactly once and in order. It prints
  Items, Received, Out of order, Duplicates, Lost, Throughput (M items/s),
  the ring's sleeps and wake calls, and Result. A run that moves no item
  for %v fails as stalled (a side asleep that nobody woke). -workers,
  -value and -work do not apply.
  seqlock runs one writer that keeps storing the payload {a, a+1000,
  2a+1000} with rising a, and -workers readers that load -items snapshots
  in all (default %d) and check that b == a+1000 and c == a+b (no torn
  read) and that a never goes backwards for a reader. It prints Readers,
  Reads, Stores, Torn reads, Backwards, Throughput (M reads/s, M stores/s)
  and Result.
  ring-broken and seqlock-broken must FAIL: they prove that the checks can.
  With -json each prints one object per kind: lock, items (ring) or reads
  and readers (seqlock), the counts above in snake_case, duration_s,
  result and failures.
`, defaultRingItems, ringTortureCapacity, ringTortureMaxBatch, stallTimeout, defaultSeqLockReads))
}

// ---- ring ----

// streamQueue is what the ring experiment drives: *lockword.Ring[uint64],
// or brokenRing.
type streamQueue interface {
	Push(context.Context, uint64) error
	Pop(context.Context) (uint64, error)
	PushSlice(context.Context, []uint64) (int, error)
	PopSlice(context.Context, []uint64) (int, error)
	Close()
}

// ringReport is the outcome of one ring run.
type ringReport struct {
	lock       string
	items      int64         // requested; 0 in a timed run
	duration   time.Duration // requested; 0 in a counted run
	pushed     int64         // items the producer pushed
	received   int64         // items the consumer popped
	outOfOrder int64         // items that were not the next number expected
	duplicates int64         // items at or below one already received
	lost       int64         // numbers pushed but never received
	reached    int64         // the highest number received in order (the consumer's want-1)
	elapsed    time.Duration
	stats      *lockword.RingStats // nil for a ring that keeps none
	stalled    bool                // no item moved for stallTimeout
	err        error               // a side stopped early, other than by Close
}

// tortureRing streams numbers through q and checks what arrives.
func tortureRing(cfg *config, name string, q streamQueue) *ringReport {
	items := cfg.items
	if items == 0 && !cfg.timed() {
		items = defaultRingItems
	}
	r := &ringReport{lock: name, items: items, duration: cfg.duration}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stop atomic.Bool
	var received atomic.Int64 // for progress and the stall watch
	seed := rand.Uint64()

	var perr error
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() { r.pushed, perr = produce(ctx, q, items, &stop, seed) })
	defer stopAfterDuration(cfg, &stop)()
	prog := startProgress(cfg.progress, runProgress(cfg, name, start, items, received.Load, "items"))
	stopWatch := watchStall(received.Load, func() {
		r.stalled = true
		cancel() // both sides return with ctx's error
	})

	cerr := r.consume(ctx, q, &received, seed)
	if cerr != nil {
		q.Close() // release the producer
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	stopWatch()
	prog.stop()

	// Numbers skipped over were counted as lost by consume; those never
	// reached at all (the stream ended early) are lost too.
	r.lost += max(0, r.pushed-r.reached)
	switch {
	case cerr != nil:
		r.err = fmt.Errorf("consumer: %w", cerr)
	case perr != nil:
		r.err = fmt.Errorf("producer: %w", perr)
	}
	if s, ok := q.(interface{ Stats() lockword.RingStats }); ok {
		st := s.Stats()
		r.stats = &st
	}
	return r
}

// produce pushes 1, 2, 3, ... until items are pushed (or stop, in a timed
// run), in runs of single Pushes and PushSlice batches, then closes q. It
// returns how many it pushed.
func produce(ctx context.Context, q streamQueue, items int64, stop *atomic.Bool, seed uint64) (int64, error) {
	defer q.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	var batch [ringTortureMaxBatch]uint64
	next := int64(1) // the next number to push
	for {
		k := int64(1 + rng.IntN(ringTortureMaxBatch))
		if items > 0 {
			k = min(k, items-next+1)
		}
		if k <= 0 || (items == 0 && stop.Load()) {
			return next - 1, nil
		}
		if rng.IntN(2) == 0 {
			for i := range k {
				batch[i] = uint64(next + i)
			}
			n, err := q.PushSlice(ctx, batch[:k])
			next += int64(n)
			if err != nil {
				return next - 1, err
			}
			continue
		}
		for range k {
			if err := q.Push(ctx, uint64(next)); err != nil {
				return next - 1, err
			}
			next++
		}
	}
}

// checkSeq counts sequence number v, received when next was the one
// expected: in order; at or below one already received (a duplicate, out
// of order); or above it (out of order, the numbers skipped lost). It
// returns the number expected after v. The ring kinds, in process and
// shared, account for their streams with it.
func checkSeq(v, next uint64, outOfOrder, duplicates, lost *int64) uint64 {
	switch {
	case v == next:
		return next + 1
	case v < next:
		*duplicates++
		*outOfOrder++
		return next
	default:
		*outOfOrder++
		*lost += int64(v - next)
		return v + 1
	}
}

// consume pops until q is closed and drained, checking that the numbers
// arrive in order, and publishes its count in received.
func (r *ringReport) consume(ctx context.Context, q streamQueue, received *atomic.Int64, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 2))
	var batch [ringTortureMaxBatch]uint64
	want := uint64(1)
	n := int64(0)
	defer func() { received.Store(n) }()
	check := func(v uint64) {
		n++
		want = checkSeq(v, want, &r.outOfOrder, &r.duplicates, &r.lost)
		if n%publishEvery == 0 {
			received.Store(n)
		}
	}
	defer func() { r.received, r.reached = n, int64(want-1) }()
	for {
		k := 1 + rng.IntN(ringTortureMaxBatch)
		if rng.IntN(2) == 0 {
			got, err := q.PopSlice(ctx, batch[:k])
			if err != nil {
				return endOfStream(err, lockword.ErrRingClosed)
			}
			for _, v := range batch[:got] {
				check(v)
			}
			continue
		}
		for range k {
			v, err := q.Pop(ctx)
			if err != nil {
				return endOfStream(err, lockword.ErrRingClosed)
			}
			check(v)
		}
	}
}

func (r *ringReport) failures() []string {
	why := streamFailures("items", r.outOfOrder, r.duplicates, r.lost)
	if r.stalled {
		why = append(why, stalledFailure("item"))
	} else if r.err != nil {
		why = append(why, r.err.Error())
	}
	if r.items > 0 && r.pushed != r.items && r.err == nil {
		why = append(why, fmt.Sprintf("the producer pushed %d of %d items", r.pushed, r.items))
	}
	return why
}

func (r *ringReport) passed() bool { return len(r.failures()) == 0 }

func (r *ringReport) throughput() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.received) / r.elapsed.Seconds() / 1e6
}

func (r *ringReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: %s\n", r.lock)
	fmt.Fprintf(w, "Producer and consumer: 1 each; capacity %d; single and batched (1..%d) calls\n",
		ringTortureCapacity, ringTortureMaxBatch)
	if r.duration > 0 {
		fmt.Fprintf(w, "Duration: %v\n", r.duration)
		fmt.Fprintf(w, "Items: %d (pushed in that time)\n", r.pushed)
	} else {
		fmt.Fprintf(w, "Items: %d\n", r.items)
	}
	writeStreamCounts(w, r.received, r.outOfOrder, r.duplicates, r.lost)
	fmt.Fprintf(w, "Throughput: %.1f M items/s\n", r.throughput())
	if r.stats != nil {
		fmt.Fprintf(w, "Sleeps: producer %d, consumer %d; wake calls %d\n",
			r.stats.ProducerSleeps, r.stats.ConsumerSleeps, r.stats.Wakes)
	} else {
		fmt.Fprintln(w, "Sleeps: n/a (this ring keeps no statistics)")
	}
	writeResult(w, r.failures())
}

func (r *ringReport) writeJSON(w io.Writer) error {
	j := struct {
		Lock           string   `json:"lock"`
		Items          int64    `json:"items"`
		Received       int64    `json:"received"`
		OutOfOrder     int64    `json:"out_of_order"`
		Duplicates     int64    `json:"duplicates"`
		Lost           int64    `json:"lost"`
		Capacity       int      `json:"capacity"`
		ThroughputM    float64  `json:"throughput_mitems_s"`
		ProducerSleeps *uint64  `json:"producer_sleeps"`
		ConsumerSleeps *uint64  `json:"consumer_sleeps"`
		WakeCalls      *uint64  `json:"wake_calls"`
		DurationS      float64  `json:"duration_s"`
		Result         string   `json:"result"`
		Failures       []string `json:"failures,omitempty"`
	}{
		Lock: r.lock, Items: r.pushed, Received: r.received, OutOfOrder: r.outOfOrder,
		Duplicates: r.duplicates, Lost: r.lost, Capacity: ringTortureCapacity,
		ThroughputM: r.throughput(), DurationS: r.elapsed.Seconds(),
		Result: verdict(r.failures()), Failures: r.failures(),
	}
	if r.stats != nil {
		j.ProducerSleeps, j.ConsumerSleeps, j.WakeCalls = &r.stats.ProducerSleeps, &r.stats.ConsumerSleeps, &r.stats.Wakes
	}
	return writeJSONLine(w, j)
}
