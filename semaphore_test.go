package lockword

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A weighted semaphore's hammer: workers acquire k of N permits (k varied)
// and, while they hold them, claim k of N owner slots (one per permit,
// CAS 0→worker) and add k to an in-use count. A semaphore that over-grants
// leaves a worker short of free slots or the count above N; either is a
// violation. Every acquisition and every permit is counted, so the totals
// are exact.

// semaphoreLike is what the hammer drives: Semaphore, or the broken twin.
type semaphoreLike interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}

type permitCheck struct {
	slots []atomic.Int64
	inUse atomic.Int64
	max   int64
}

// enter claims n slots for id and returns how many violations it saw.
func (c *permitCheck) enter(id int64, n int64) (claimed []int, violations int) {
	if c.inUse.Add(n) > c.max {
		violations++
	}
	for i := range c.slots {
		if int64(len(claimed)) == n {
			break
		}
		if c.slots[i].CompareAndSwap(0, id) {
			claimed = append(claimed, i)
		}
	}
	if int64(len(claimed)) < n {
		violations++ // more permits granted than there are
	}
	return claimed, violations
}

func (c *permitCheck) exit(id int64, n int64, claimed []int) (violations int) {
	for _, i := range claimed {
		if !c.slots[i].CompareAndSwap(id, 0) {
			violations++ // someone took a slot we held
		}
	}
	c.inUse.Add(-n)
	return violations
}

type semHammerResult struct {
	acquisitions, wantAcquisitions int64
	violations                     int64
	freeAfter, capacity            int64
}

func (r semHammerResult) String() string {
	return fmt.Sprintf("acquisitions %d, want %d, violations %d, free after %d of %d",
		r.acquisitions, r.wantAcquisitions, r.violations, r.freeAfter, r.capacity)
}

// hammerSemaphore runs workers goroutines of iters acquisitions each, of
// 1 to maxWeight permits, on s of capacity permits.
func hammerSemaphore(s semaphoreLike, capacity int64, workers, iters int, maxWeight int64) semHammerResult {
	defer watchdog("semaphore hammer", 2*time.Minute)()
	c := &permitCheck{slots: make([]atomic.Int64, capacity), max: capacity}
	var acquisitions, violations atomic.Int64
	var wg sync.WaitGroup
	for w := 1; w <= workers; w++ {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for range iters {
				n := 1 + rnd.Int64N(maxWeight)
				if err := s.Acquire(context.Background(), n); err != nil {
					violations.Add(1)
					continue
				}
				claimed, bad := c.enter(int64(w), n)
				switch r := rnd.Uint32(); {
				case r%64 == 0:
					runtime.Gosched()
				case r%4 == 0:
					spinWork(int(r>>8) % 32)
				}
				bad += c.exit(int64(w), n, claimed)
				s.Release(n)
				acquisitions.Add(1)
				violations.Add(int64(bad))
			}
		})
	}
	wg.Wait()
	r := semHammerResult{acquisitions: acquisitions.Load(), wantAcquisitions: int64(workers * iters),
		violations: violations.Load(), capacity: capacity}
	if real, ok := s.(*Semaphore); ok {
		r.freeAfter = real.Free()
	}
	return r
}

// TestSemaphoreHammer: more goroutines than cores, weights from 1 to the
// capacity, exact totals, no over-grant, every permit back at the end.
func TestSemaphoreHammer(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, c := range []struct {
			capacity, maxWeight int64
			workers             int
		}{{1, 1, 8}, {4, 4, 16}, {16, 5, 64}} {
			t.Run(fmt.Sprintf("P%d/N%d/k%d/G%d", procs, c.capacity, c.maxWeight, c.workers), func(t *testing.T) {
				withGOMAXPROCS(t, procs)
				s := NewSemaphore(c.capacity)
				r := hammerSemaphore(s, c.capacity, c.workers, scaled(10_000), c.maxWeight)
				if r.acquisitions != r.wantAcquisitions || r.violations != 0 || r.freeAfter != c.capacity {
					t.Fatal(r)
				}
			})
		}
	}
}

// brokenSemaphore over-grants by one: the off-by-one of a count checked
// with > where ≥ was meant. The checker, told the capacity, must see one
// holder too many.
func brokenSemaphore(capacity int64) *Semaphore { return NewSemaphore(capacity + 1) }

// TestSemaphoreHammerCatchesOverGrant: the checker must fail a semaphore
// that over-grants (several runs: on a loaded host the workers may run one
// after another and never overlap).
func TestSemaphoreHammerCatchesOverGrant(t *testing.T) {
	for run := 1; ; run++ {
		r := hammerSemaphore(brokenSemaphore(4), 4, 8, scaled(20_000), 2)
		if r.violations > 0 {
			return
		}
		if run == 5 {
			t.Fatalf("broken semaphore: no violation in 5 runs (last: %v): the checker cannot fail", r)
		}
	}
}

// waitQueued waits until s has n waiters queued (test helper).
func waitQueued(t *testing.T, s *Semaphore, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s.queue.mu.Lock()
		k := 0
		for w := s.queue.head; w != nil; w = w.next {
			k++
		}
		s.queue.mu.Unlock()
		if k == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters queued after a minute, want %d", k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSemaphoreFIFO: a large request at the front is not overtaken by
// small ones that would fit, and it gets its permits when enough are free.
func TestSemaphoreFIFO(t *testing.T) {
	s := NewSemaphore(4)
	if err := s.Acquire(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	go func() {
		s.Acquire(context.Background(), 4)
		order <- "big"
		s.Release(4)
	}()
	waitQueued(t, s, 1)
	go func() {
		s.Acquire(context.Background(), 1) // 1 is free, but big is first
		order <- "small"
		s.Release(1)
	}()
	waitQueued(t, s, 2)
	if s.TryAcquire(1) {
		t.Fatal("TryAcquire(1) overtook the queue")
	}
	s.Release(3)
	if first, second := <-order, <-order; first != "big" || second != "small" {
		t.Fatalf("served %s then %s, want big then small", first, second)
	}
	if got := s.Free(); got != 4 {
		t.Fatalf("Free() = %d after all released, want 4", got)
	}
}

// TestSemaphoreCancelledFrontWakesBehind: the front waiter's context ends;
// the waiter behind it, which fits in what is free, is granted at once
// (golang/go#37852: x/sync left it waiting for the next Release).
func TestSemaphoreCancelledFrontWakesBehind(t *testing.T) {
	s := NewSemaphore(2)
	if err := s.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	bigErr := make(chan error, 1)
	go func() { bigErr <- s.Acquire(ctx, 2) }()
	waitQueued(t, s, 1)
	small := make(chan error, 1)
	go func() { small <- s.Acquire(context.Background(), 1) }()
	waitQueued(t, s, 2)
	cancel()
	if err := <-bigErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("front waiter: %v, want context.Canceled", err)
	}
	select {
	case err := <-small:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter behind a cancelled front waiter was not granted the free permit")
	}
	s.Release(1)
	s.Release(1)
	if got := s.Free(); got != 2 {
		t.Fatalf("Free() = %d, want 2", got)
	}
}

// TestSemaphoreCancelRacesGrant: waiters give up at random moments while
// others release; a waiter holds its permits exactly when Acquire returned
// nil, and at the end every permit is free again (none stranded, none
// duplicated).
func TestSemaphoreCancelRacesGrant(t *testing.T) {
	defer watchdog("cancel race", 2*time.Minute)()
	const capacity = 3
	s := NewSemaphore(capacity)
	c := &permitCheck{slots: make([]atomic.Int64, capacity), max: capacity}
	var got, gaveUp, violations atomic.Int64
	var wg sync.WaitGroup
	for w := 1; w <= 12; w++ {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 11))
			for range scaled(5_000) {
				n := 1 + rnd.Int64N(capacity)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rnd.IntN(50))*time.Microsecond)
				err := s.Acquire(ctx, n)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						violations.Add(1)
					}
					gaveUp.Add(1)
					continue
				}
				claimed, bad := c.enter(int64(w), n)
				bad += c.exit(int64(w), n, claimed)
				violations.Add(int64(bad))
				got.Add(1)
				s.Release(n)
			}
		})
	}
	wg.Wait()
	if violations.Load() != 0 || s.Free() != capacity {
		t.Fatalf("violations %d, free %d of %d (acquired %d, gave up %d)", violations.Load(), s.Free(), capacity, got.Load(), gaveUp.Load())
	}
	if got.Load() == 0 || gaveUp.Load() == 0 {
		t.Logf("acquired %d, gave up %d: one side never happened this run", got.Load(), gaveUp.Load())
	}
}

func TestSemaphoreWeights(t *testing.T) {
	s := NewSemaphore(4)
	ctx := context.Background()
	for _, n := range []int64{-1, 5, 1 << 40} {
		err := s.Acquire(ctx, n)
		var we *WeightError
		if !errors.Is(err, ErrWeight) || !errors.As(err, &we) || we.N != n || we.Capacity != 4 {
			t.Errorf("Acquire(%d) = %v, want a *WeightError matching ErrWeight", n, err)
		}
		if s.TryAcquire(n) {
			t.Errorf("TryAcquire(%d) = true", n)
		}
	}
	if err := s.Acquire(ctx, 0); err != nil {
		t.Errorf("Acquire(0) = %v", err)
	}
	if err := s.Acquire(nil, 1); !errors.Is(err, ErrNilContext) { //nolint:staticcheck // the nil context is the test
		t.Errorf("Acquire(nil, 1) = %v, want ErrNilContext", err)
	}
	if s.Free() != 4 {
		t.Fatalf("Free() = %d after refused weights, want 4", s.Free())
	}
	var zero Semaphore
	if err := zero.Acquire(ctx, 1); !errors.Is(err, ErrWeight) {
		t.Errorf("zero Semaphore: Acquire(1) = %v, want ErrWeight", err)
	}
}

func TestSemaphoreReleaseMisusePanics(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(s *Semaphore)
		want string
	}{
		{"over", func(s *Semaphore) { s.Release(1) }, "Release of more permits than are held by Semaphore"},
		{"over-queued", func(s *Semaphore) {
			s.Acquire(context.Background(), 2)
			// A waiter queues, so Release takes the slow path; it
			// leaves when the test ends, so that no parked waiter
			// outlives the test (the stuck watcher's tests count them).
			ctx, cancel := context.WithCancel(context.Background())
			left := make(chan error)
			go func() { left <- s.Acquire(ctx, 2) }()
			t.Cleanup(func() { cancel(); <-left })
			for s.state.Load()&semQueued == 0 {
				runtime.Gosched()
			}
			s.Release(3)
		}, "Release of more permits than are held by Semaphore"},
		{"negative", func(s *Semaphore) { s.Release(-1) }, "negative weight"},
		{"lock zero", func(*Semaphore) { var z Semaphore; z.Lock() }, "Lock of Semaphore"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSemaphore(2)
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, c.want) {
					t.Fatalf("panic %v, want one containing %q", r, c.want)
				}
			}()
			c.f(s)
		})
	}
}

func TestSemaphoreStats(t *testing.T) {
	s := NewSemaphore(1)
	s.EnableStats()
	s.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.LockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Lock(); s.Unlock(); close(done) }()
	waitQueued(t, s, 1)
	s.Unlock()
	<-done
	st := s.Stats()
	if st.Acquisitions != 2 || st.SlowPath != 1 || st.GiveUps != 1 || st.Parks < 1 {
		t.Fatalf("stats %+v: want 2 acquisitions, 1 slow, 1 give-up, ≥ 1 park", st)
	}
	if s.Free() != 1 {
		t.Fatalf("Free() = %d, want 1", s.Free())
	}
}

func TestSemaphoreNoCopy(t *testing.T) {
	// go vet's copylocks check catches copies: Semaphore embeds noCopy.
	var s Semaphore
	_ = &s
}

// TestSemaphoreStuckReport: a waiter past the threshold logs one report
// naming the semaphore, as every lockword lock does.
func TestSemaphoreStuckReport(t *testing.T) {
	logs := captureSlog(t)
	s := NewSemaphore(2)
	s.SetName("gpu-jobs")
	s.SetStuckThreshold(40 * time.Millisecond)
	s.Acquire(context.Background(), 2)
	done := make(chan struct{})
	go func() { s.Acquire(context.Background(), 1); s.Release(1); close(done) }()
	waitQueued(t, s, 1)
	// The watcher samples the parked waiters; give it time past the
	// threshold (a deadline for the report, not an assumption of speed).
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(logs.String(), "level=WARN") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s.Release(2)
	<-done
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Fatalf("%d warnings, want exactly 1:\n%s", n, out)
	}
	for _, want := range []string{"lock=gpu-jobs", "kind=Semaphore", "threshold=40ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("stuck report lacks %q:\n%s", want, out)
		}
	}
}
