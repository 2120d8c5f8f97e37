package lockword

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
	"github.com/lockword/lockword/internal/locktest/brokenqueue"
)

// mpmcQueue is what the stream checker drives: Queue[uint64] and the broken
// twin below.
type mpmcQueue interface {
	TryPush(v uint64) bool
	TryPop() (uint64, bool)
	Push(ctx context.Context, v uint64) error
	Pop(ctx context.Context) (uint64, error)
	PushSlice(ctx context.Context, src []uint64) (int, error)
	PopSlice(ctx context.Context, dst []uint64) (int, error)
	Close()
}

// mpmcResult is what a checked stream found.
type mpmcResult struct {
	want, got        int // items pushed, items popped
	lost, duplicated int // items never popped, items popped twice or more
	outOfOrder       int // items a consumer got before an earlier one of the same producer
	timedOut         bool
}

func (r mpmcResult) ok() bool {
	return r.got == r.want && r.lost == 0 && r.duplicated == 0 && r.outOfOrder == 0 && !r.timedOut
}

func (r mpmcResult) String() string {
	return fmt.Sprintf("pushed %d, popped %d, lost %d, duplicated %d, out of order %d, timed out %v",
		r.want, r.got, r.lost, r.duplicated, r.outOfOrder, r.timedOut)
}

// checkMPMC streams perProducer items from each of producers goroutines to
// consumers goroutines, each side cycling through single, batched and try
// calls, closes the queue when every producer is done, and checks that
// every item arrived exactly once and that each consumer got each
// producer's items in order. An item is producer<<32 | sequence, from 1.
// A run still going at ctx's end is reported timed out.
func checkMPMC(ctx context.Context, q mpmcQueue, producers, consumers, perProducer int) mpmcResult {
	seen := make([][]atomic.Uint32, producers)
	for p := range seen {
		seen[p] = make([]atomic.Uint32, perProducer+1)
	}
	var pushed, popped, outOfOrder atomic.Int64
	var wgp, wgc sync.WaitGroup
	for p := range producers {
		wgp.Go(func() {
			batch := make([]uint64, 0, 8)
			for i := 1; i <= perProducer && ctx.Err() == nil; {
				v := uint64(p)<<32 | uint64(i)
				switch i % 3 {
				case 0:
					if q.Push(ctx, v) == nil {
						pushed.Add(1)
						i++
					}
				case 1:
					batch = batch[:0]
					for j := i; j <= perProducer && len(batch) < 1+i%7; j++ {
						batch = append(batch, uint64(p)<<32|uint64(j))
					}
					n, _ := q.PushSlice(ctx, batch)
					pushed.Add(int64(n))
					i += n
				default:
					if q.TryPush(v) {
						pushed.Add(1)
						i++
					} else {
						runtime.Gosched()
					}
				}
			}
		})
	}
	for c := range consumers {
		wgc.Go(func() {
			last := make([]uint64, producers)
			buf := make([]uint64, 8)
			take := func(v uint64) {
				p, s := v>>32, v&(1<<32-1)
				if p >= uint64(producers) || s == 0 || s > uint64(perProducer) {
					outOfOrder.Add(1) // not an item we pushed
					return
				}
				seen[p][s].Add(1)
				if s <= last[p] {
					outOfOrder.Add(1)
				}
				last[p] = s
				popped.Add(1)
			}
			for k := c; ctx.Err() == nil; k++ {
				switch k % 3 {
				case 0:
					v, err := q.Pop(ctx)
					if err != nil {
						return
					}
					take(v)
				case 1:
					n, err := q.PopSlice(ctx, buf[:1+k%8])
					if err != nil {
						return
					}
					for _, v := range buf[:n] {
						take(v)
					}
				default:
					if v, ok := q.TryPop(); ok {
						take(v)
					}
				}
			}
		})
	}
	wgp.Wait()
	q.Close()
	wgc.Wait()
	r := mpmcResult{want: producers * perProducer, got: int(popped.Load()), outOfOrder: int(outOfOrder.Load()),
		timedOut: ctx.Err() != nil || int(pushed.Load()) != producers*perProducer}
	for p := range seen {
		for s := 1; s <= perProducer; s++ {
			switch n := seen[p][s].Load(); {
			case n == 0:
				r.lost++
			case n > 1:
				r.duplicated++
			}
		}
	}
	return r
}

// TestQueueStream is the MPMC stress check: more goroutines than cores,
// over a grid of producer and consumer counts, with the race detector in
// the everyday race run. Exact totals, every item exactly once, and each
// producer's order kept per consumer.
func TestQueueStream(t *testing.T) {
	for _, shape := range []struct{ producers, consumers, capacity int }{
		{1, 1, 2}, {4, 1, 16}, {4, 4, 2}, {16, 4, 64}, {64, 1, 1024}, {64, 4, 8},
	} {
		t.Run(fmt.Sprintf("p=%d/c=%d/cap=%d", shape.producers, shape.consumers, shape.capacity), func(t *testing.T) {
			q := mustQueue[uint64](t, shape.capacity)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			per := max(scaled(200_000)/shape.producers, 50)
			r := checkMPMC(ctx, q, shape.producers, shape.consumers, per)
			if !r.ok() {
				t.Fatalf("%v", r)
			}
			t.Logf("%v; %+v", r, q.Stats())
		})
	}
}

// TestQueueStreamCatchesBrokenQueue: the checker must fail a queue whose
// claim is not atomic, in at least one of a few short runs (the double
// claim needs two producers between the check and the move of tail, which
// the Gosched in the window makes common). A doubly claimed slot is
// written twice: an item is lost, or a slot already popped is published
// again and the queue stops (the run then times out after 1 s, a failure
// too).
func TestQueueStreamCatchesBrokenQueue(t *testing.T) {
	for attempt := 1; attempt <= 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r := checkMPMC(ctx, brokenqueue.New(16, brokenqueue.SplitClaim, ErrQueueClosed), 8, 2, 2000)
		cancel()
		if !r.ok() {
			t.Logf("caught on attempt %d: %v", attempt, r)
			return
		}
	}
	t.Fatal("the checker passed a queue whose claim is not atomic in 5 runs: it cannot fail")
}

// cpuTicks returns this process's user plus system time in clock ticks,
// from /proc/self/stat (fields 14 and 15).
func cpuTicks(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc/self/stat:", err)
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: field 3 is the first after ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("parsing /proc/self/stat: %v %v", err1, err2)
	}
	return utime + stime
}

// idleTicks is the CPU time this process takes over one second while the
// goroutines that start runs are blocked.
func idleTicks(t *testing.T, start func(ctx context.Context)) int64 {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start(ctx)
	time.Sleep(100 * time.Millisecond) // past the spin phases (microseconds)
	before := cpuTicks(t)
	time.Sleep(time.Second)
	return cpuTicks(t) - before
}

// TestBlockedQueueAndRingUseNoCPU: a consumer blocked on an empty Queue and
// one on an empty Ring, and a producer blocked on a full one of each,
// sleep: the process takes almost no CPU time over a second. The bound, 3
// ticks of usually 10 ms, leaves room for the runtime's background work
// and the coarse clock (blocked calls measured 0). The timing assumption:
// a busy-waiting goroutine gets more than 3% of a CPU, even on a loaded
// machine (two of them took 100-200 ticks on an idle host, 10 at load
// 20); the check fails two consumers that busy-poll TryPop.
func TestBlockedQueueAndRingUseNoCPU(t *testing.T) {
	const bound = 3
	blocked := func(ctx context.Context) {
		empty, full := mustQueue[int](t, 2), mustQueue[int](t, 2)
		full.TryPushSlice([]int{1, 2})
		go empty.Pop(ctx)
		go full.Push(ctx, 3)
		re, rf := mustRing[int](t, 2), mustRing[int](t, 1)
		rf.TryPush(1)
		go re.Pop(ctx)
		go rf.Push(ctx, 2)
	}
	var ticks int64
	for attempt := 1; attempt <= 3; attempt++ {
		if ticks = idleTicks(t, blocked); ticks <= bound {
			break
		}
		t.Logf("attempt %d: %d ticks", attempt, ticks)
	}
	if ticks > bound {
		t.Fatalf("blocked calls took %d clock ticks of CPU over 1 s, want at most %d: they busy-wait", ticks, bound)
	}
	t.Logf("%d ticks of CPU over 1 s with 4 calls blocked", ticks)
	t.Run("catches-busy-wait", func(t *testing.T) {
		busy := idleTicks(t, func(ctx context.Context) {
			q := mustQueue[int](t, 2)
			for range 2 {
				go func() {
					for ctx.Err() == nil {
						q.TryPop()
					}
				}()
			}
		})
		if busy <= bound {
			t.Fatalf("two busy-polling consumers took only %d ticks over 1 s: the check cannot fail", busy)
		}
		t.Logf("caught: two busy-polling consumers took %d ticks", busy)
	})
}

// TestQueueAndRingWakeLatency: a consumer parked on an empty Queue or Ring
// runs soon after an item arrives (the hand-over of wakelatency_test.go: a
// wake-up readies the consumer on the pushing goroutine's P, which then
// blocks; a lost wake-up parks it for ever and costs the sample's whole
// 20 ms cap). The bound is the locks' 1 ms, not the 50 µs median the
// queues are designed for (5-14 µs on a quiet host; BENCHMARKS.md): at load
// 30 under -race the median of a correct Queue was 52-59 µs, while a lost
// wake-up still puts it at the cap, 20 times the bound.
func TestQueueAndRingWakeLatency(t *testing.T) {
	const bound = time.Millisecond
	locktest.CheckWakeLatency(t, []locktest.WakeKind{
		{Name: "Queue", Bound: bound, New: func(t *testing.T) locktest.WakeCase {
			q := mustQueue[int](t, 2)
			return locktest.WakeCase{Lock: func() {}, Unlock: func() { q.TryPush(1) },
				Wait: func(ctx context.Context) error { _, err := q.Pop(ctx); return err }, WaitUnlock: func() {}}
		}},
		{Name: "Ring", Bound: bound, New: func(t *testing.T) locktest.WakeCase {
			r := mustRing[int](t, 2)
			return locktest.WakeCase{Lock: func() {}, Unlock: func() { r.TryPush(1) },
				Wait: func(ctx context.Context) error { _, err := r.Pop(ctx); return err }, WaitUnlock: func() {}}
		}},
	})
}
