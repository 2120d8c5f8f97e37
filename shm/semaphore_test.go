//go:build linux

package shm

import (
	"context"
	"errors"
	"github.com/lockword/lockword"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// semHandles opens n handles on one region (each attaches: a process-table
// slot of its own, so to the semaphore each is a process) and returns
// their semaphores named name with permits permits.
func semHandles(t *testing.T, n int, permits int64) (string, []*Semaphore) {
	t.Helper()
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	regions := []*Region{r}
	for range n - 1 {
		o, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		regions = append(regions, o)
	}
	var sems []*Semaphore
	for _, r := range regions {
		s, err := r.Semaphore("sem", permits)
		if err != nil {
			t.Fatal(err)
		}
		sems = append(sems, s)
	}
	return path, sems
}

// semWaiting waits until the semaphore counts n waiting processes.
func semWaiting(t *testing.T, s *Semaphore, n uint32) {
	t.Helper()
	for word32(s.obj, semObjWaiters).Load() != n {
		time.Sleep(time.Millisecond)
	}
}

func TestSharedSemaphoreBasic(t *testing.T) {
	_, sems := semHandles(t, 2, 4)
	a, b := sems[0], sems[1]
	ctx := context.Background()
	if a.Capacity() != 4 || !a.TryAcquire(3) || a.Held() != 3 {
		t.Fatalf("capacity %d, held %d after TryAcquire(3)", a.Capacity(), a.Held())
	}
	if b.TryAcquire(2) {
		t.Fatal("TryAcquire(2) with 1 free succeeded")
	}
	if err := b.Acquire(ctx, 1); err != nil || b.Held() != 1 {
		t.Fatalf("Acquire(1) with 1 free: %v, held %d", err, b.Held())
	}
	if err := a.r.Close(); !errors.Is(err, ErrRegionBusy) {
		t.Fatalf("Close while holding permits: %v, want ErrRegionBusy", err)
	}
	for _, n := range []int64{-1, 5} {
		var we *lockword.WeightError
		if err := a.Acquire(ctx, n); !errors.As(err, &we) || we.N != n {
			t.Fatalf("Acquire(%d): %v, want a lockword.WeightError", n, err)
		}
		if a.TryAcquire(n) {
			t.Fatalf("TryAcquire(%d) succeeded", n)
		}
	}
	if err := a.Acquire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p == nil || !strings.Contains(p.(string), "more permits than this process holds") {
				t.Fatalf("Release(2) holding 1: panic %v", p)
			}
		}()
		b.Release(2)
	}()
	a.Release(3)
	b.Release(1)
	if a.Held() != 0 || word32(a.obj, semObjInUse).Load() != 0 || word32(a.me, semSlotToken).Load() != 0 {
		t.Fatal("permits or the entry's token left after every release")
	}
	if _, err := a.r.Semaphore("sem", 5); !errors.Is(err, ErrPermitsMismatch) {
		t.Fatalf("Semaphore with other permits: %v, want ErrPermitsMismatch", err)
	}
	for _, n := range []int64{0, -1, lockword.MaxSemaphorePermits + 1} {
		if _, err := a.r.Semaphore("other", n); !errors.Is(err, lockword.ErrWeight) {
			t.Fatalf("Semaphore(%d permits): %v, want lockword.ErrWeight", n, err)
		}
	}
	if _, err := a.r.Mutex("sem"); !errors.Is(err, ErrObjectKind) {
		t.Fatalf("Mutex on a semaphore's name: %v", err)
	}
	if err := a.r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSharedSemaphoreFIFO checks the bound: once a waiter has drawn its
// ticket, no acquisition that starts later, in any process, is granted
// before it. Two processes stream Acquire(1)/Release(1) while a third
// asks for every permit; an acquisition that began after the large
// request was queued and got its permit before it is a violation. No
// timing assumption: the check compares the order of events only.
func TestSharedSemaphoreFIFO(t *testing.T) {
	if n := semFIFOViolations(t, 50*time.Millisecond); n != 0 {
		t.Fatalf("%d small requests that arrived after the queued large one were granted before it", n)
	}
}

// TestSharedSemaphoreFIFOCheckerFails: the same with newcomers allowed
// past the queue (testBrokenSemNoFIFO) must find violations.
func TestSharedSemaphoreFIFOCheckerFails(t *testing.T) {
	testBrokenSemNoFIFO = true
	defer func() { testBrokenSemNoFIFO = false }()
	if n := semFIFOViolations(t, 5*time.Second); n == 0 {
		t.Fatal("a semaphore that lets newcomers past its queue passed the FIFO check")
	}
}

// semFIFOViolations runs the streams against the queued request for up to
// window (less once a violation is seen) before the holder releases, and
// returns the violations counted.
func semFIFOViolations(t *testing.T, window time.Duration) int {
	defer watchdog("shared semaphore FIFO", 2*time.Minute)()
	_, sems := semHandles(t, 4, 4)
	big, holder := sems[0], sems[1]
	ctx := context.Background()
	if err := holder.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var (
		events   atomic.Int64 // orders the starts of small requests and the big one's queueing
		queuedAt atomic.Int64 // events at the big request's queueing; 0: not yet
		granted  atomic.Bool
		bad      atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for _, s := range sems[2:] {
		wg.Go(func() {
			for !stop.Load() {
				start := events.Add(1)
				if err := s.Acquire(ctx, 1); err != nil {
					t.Error(err)
					return
				}
				if q := queuedAt.Load(); q != 0 && start > q && !granted.Load() {
					bad.Add(1)
				}
				s.Release(1)
			}
		})
	}
	done := make(chan error)
	go func() {
		err := big.Acquire(ctx, 4)
		granted.Store(true)
		done <- err
	}()
	// The big request is queued once its entry has a ticket: a small
	// request that starts after this look drew its ticket later.
	for word32(big.me, semSlotTicket).Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("Acquire(4) returned %v with 2 permits held elsewhere", err)
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
	queuedAt.Store(events.Add(1))
	for end := time.Now().Add(window); time.Now().Before(end) && bad.Load() == 0; {
		time.Sleep(time.Millisecond) // let the streams try to pass
	}
	holder.Release(2)
	var err error
	select {
	case err = <-done:
	case <-time.After(200 * time.Millisecond):
		// Past a queue that does not hold them back, the streams could
		// starve the large request for ever: stop them.
		stop.Store(true)
		err = <-done
	}
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the streams wait again, now behind a holder of all
	big.Release(4)
	stop.Store(true)
	wg.Wait()
	return int(bad.Load())
}

// TestSharedSemaphoreCancel: a waiter at the front that gives up leaves
// no ticket and lets the waiter behind it, which fits, in at once.
func TestSharedSemaphoreCancel(t *testing.T) {
	defer watchdog("shared semaphore cancel", 2*time.Minute)()
	_, sems := semHandles(t, 3, 4)
	holder, front, behind := sems[0], sems[1], sems[2]
	if err := holder.Acquire(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	frontDone := make(chan error)
	go func() { frontDone <- front.Acquire(ctx, 4) }()
	semWaiting(t, holder, 1)
	behindDone := make(chan error)
	go func() { behindDone <- behind.Acquire(context.Background(), 1) }()
	semWaiting(t, holder, 2)
	select {
	case err := <-behindDone:
		t.Fatalf("Acquire(1) behind a queued Acquire(4) returned %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	if err := <-frontDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if err := <-behindDone; err != nil {
		t.Fatalf("the waiter behind a cancelled one: %v", err)
	}
	semWaiting(t, holder, 0)
	if front.Held() != 0 || behind.Held() != 1 || word32(holder.obj, semObjInUse).Load() != 4 {
		t.Fatalf("held %d, %d, in use %d", front.Held(), behind.Held(), word32(holder.obj, semObjInUse).Load())
	}
	holder.Release(3)
	behind.Release(1)
	// A deadline while queued: the same, through the context's deadline.
	holder.Acquire(context.Background(), 4)
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	if err := front.Acquire(dctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline: %v", err)
	}
	semWaiting(t, holder, 0)
	holder.Release(4)
}

// TestSharedSemaphoreCorrupt: words that no valid history produces give
// lockword.ErrCorrupt, within the context, holding nothing.
func TestSharedSemaphoreCorrupt(t *testing.T) {
	defer watchdog("shared semaphore corrupt", 2*time.Minute)()
	cases := []struct {
		name  string
		write func(s *Semaphore)
	}{
		{"in use above capacity", func(s *Semaphore) { word32(s.obj, semObjInUse).Store(5) }},
		{"in use without holders", func(s *Semaphore) { word32(s.obj, semObjInUse).Store(4) }},
		{"waiters beyond the process table", func(s *Semaphore) { word32(s.obj, semObjWaiters).Store(5000) }},
		{"entry with a token of another slot", func(s *Semaphore) {
			e := s.obj[semSlotOff(7):]
			word32(e, semSlotToken).Store(makeToken(8, 1))
			word32(e, semSlotHeld).Store(4)
			word32(s.obj, semObjInUse).Store(4)
		}},
		{"entry holding for no process", func(s *Semaphore) {
			word32(s.obj[semSlotOff(9):], semSlotHeld).Store(4)
			word32(s.obj, semObjInUse).Store(4)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, sems := semHandles(t, 1, 4)
			s := sems[0]
			c.write(s)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.Acquire(ctx, 1)
			if !errors.Is(err, lockword.ErrCorrupt) {
				t.Fatalf("Acquire: %v, want lockword.ErrCorrupt", err)
			}
			if s.Held() != 0 {
				t.Fatalf("holds %d after lockword.ErrCorrupt", s.Held())
			}
			t.Log(err)
		})
	}
}

// TestSharedSemaphoreOwnSlotReused: permits that a previous incarnation of
// this process's slot left in its entry (it died; the slot was reclaimed
// by this process, with a new generation) are taken back by this
// process's next Acquire, reported with PID 0 (its identity went with the
// slot), once, and never mistaken for this process's own holds.
func TestSharedSemaphoreOwnSlotReused(t *testing.T) {
	_, sems := semHandles(t, 1, 4)
	s := sems[0]
	old := makeToken(s.r.slot, tokenGen(s.r.token)-1)
	if tokenGen(old) == 0 {
		old = makeToken(s.r.slot, ownerGenMax)
	}
	word32(s.me, semSlotToken).Store(old)
	word32(s.me, semSlotHeld).Store(3)
	word32(s.obj, semObjInUse).Store(3)
	if s.Held() != 0 {
		t.Fatalf("Held() counts %d permits of a previous incarnation", s.Held())
	}
	err := s.Acquire(context.Background(), 2)
	var de *SemaphoreOwnerDeadError
	if !errors.As(err, &de) || de.PID != 0 || de.Permits != 3 {
		t.Fatalf("Acquire over a dead previous incarnation's 3 permits: %v", err)
	}
	if s.Held() != 2 || word32(s.obj, semObjInUse).Load() != 2 {
		t.Fatalf("held %d, in use %d after the recovery", s.Held(), word32(s.obj, semObjInUse).Load())
	}
	if err := s.Acquire(context.Background(), 2); err != nil {
		t.Fatalf("second Acquire: %v (recovered once)", err)
	}
	s.Release(4)
}

// TestSharedSemaphoreWakeLatency: a Release wakes the waiter asleep in the
// kernel at once, not at the end of its 10 ms slice. Each round the
// releaser waits until the waiter has announced that it sleeps, and 2 ms
// more, then releases: a lost wake-up then costs about 8 ms, a wake-up
// microseconds. Timing assumption: on a loaded host some rounds are late,
// so the test asks that the median round is under 4 ms and repeats the
// measurement (never the requirement) up to three times.
func TestSharedSemaphoreWakeLatency(t *testing.T) {
	if d := semWakeMedian(t); d >= 4*time.Millisecond {
		t.Fatalf("median wake latency %v over three measurements: a lost wake-up hidden by the 10 ms slices?", d)
	}
}

// TestSharedSemaphoreWakeLatencyCheckerFails: with the wake-up dropped
// (testBrokenSemNoWake), or sent to the ticket behind the front
// (testBrokenSemWrongWake), the same measurement must fail.
func TestSharedSemaphoreWakeLatencyCheckerFails(t *testing.T) {
	for _, broken := range []*bool{&testBrokenSemNoWake, &testBrokenSemWrongWake} {
		*broken = true
		d := semWakeMedian(t)
		*broken = false
		if d < 4*time.Millisecond {
			t.Fatalf("median wake latency %v with the wake-up lost: the check cannot fail", d)
		}
	}
}

// TestSharedSemaphoreWakesFrontOnly: a Release with three processes
// queued wakes the front ticket's process, not the two behind it (which
// can only go after the front). Timing assumption: the two sleep through
// the round unless their 10 ms liveness slice ends in it (a loaded host
// makes that likely in some rounds), so the measurement is repeated up to
// ten times and one clean round passes; a wake-all fails every round.
func TestSharedSemaphoreWakesFrontOnly(t *testing.T) {
	if n := semBehindWakes(t); n != 0 {
		t.Fatalf("every round woke the waiters behind the front (%d wake-ups in the best): each change wakes every process", n)
	}
}

// semBehindWakes returns the wake-ups of the two waiters behind the front
// during a Release and the front's grant, in the best of up to ten rounds.
func semBehindWakes(t *testing.T) int64 {
	defer watchdog("shared semaphore front-only wake", 2*time.Minute)()
	_, sems := semHandles(t, 4, 1)
	holder, queued := sems[0], sems[1:]
	var woke [3]atomic.Int64
	testSemWoke = func(s *Semaphore) {
		for i, q := range queued {
			if q == s {
				woke[i].Add(1)
			}
		}
	}
	defer func() { testSemWoke = nil }()
	ctx := context.Background()
	best := int64(1 << 62)
	for round := 0; round < 10 && best != 0; round++ {
		if err := holder.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		got := make([]chan struct{}, len(queued))
		for i, q := range queued {
			got[i] = make(chan struct{})
			go func() {
				if err := q.Acquire(ctx, 1); err != nil {
					t.Error(err)
				}
				close(got[i])
			}()
			semWaiting(t, holder, uint32(i+1)) // tickets in the order of queued
		}
		time.Sleep(2 * time.Millisecond) // let them fall asleep
		woke[1].Store(0)
		woke[2].Store(0)
		holder.Release(1)
		<-got[0]
		time.Sleep(time.Millisecond) // a woken sleeper counts when it runs
		best = min(best, woke[1].Load()+woke[2].Load())
		for i, q := range queued {
			if i > 0 {
				<-got[i]
			}
			q.Release(1)
		}
	}
	return best
}

// semWakeMedian returns the best of up to three medians of 15 rounds,
// stopping at the first under 4 ms.
func semWakeMedian(t *testing.T) time.Duration {
	defer watchdog("shared semaphore wake latency", 2*time.Minute)()
	_, sems := semHandles(t, 2, 1)
	holder, waiter := sems[0], sems[1]
	best := time.Hour
	for try := 0; try < 3 && best >= 4*time.Millisecond; try++ {
		var lat []time.Duration
		for range 15 {
			if err := holder.Acquire(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			done := make(chan time.Time)
			go func() {
				if err := waiter.Acquire(context.Background(), 1); err != nil {
					t.Error(err)
				}
				done <- time.Now()
			}()
			for word32(holder.obj, semObjSeq).Load()&semSleepers == 0 {
				time.Sleep(100 * time.Microsecond)
			}
			time.Sleep(2 * time.Millisecond)
			released := time.Now()
			holder.Release(1)
			lat = append(lat, (<-done).Sub(released))
			waiter.Release(1)
		}
		slices.Sort(lat)
		best = min(best, lat[len(lat)/2])
		t.Logf("try %d: median %v, max %v", try+1, lat[len(lat)/2], lat[len(lat)-1])
	}
	return best
}

// TestSharedSemaphoreGateOrder pins the order the type's doc states: FIFO
// by ticket, one ticket per process. With one permit held, process A's
// first waiter draws a ticket and its second parks on A's gate, holding
// none; process B's waiter, arriving after both, draws the second ticket
// and is granted before A's second waiter. Each step waits for the words
// that show the previous one done (the tickets, A's goroutines in a slow
// path), so the order does not depend on timing.
func TestSharedSemaphoreGateOrder(t *testing.T) {
	defer watchdog("shared semaphore gate order", time.Minute)()
	_, sems := semHandles(t, 3, 1)
	holder, a, b := sems[0], sems[1], sems[2]
	ctx := context.Background()
	if err := holder.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	granted := make(chan string, 3)
	acquire := func(s *Semaphore, name string) {
		if err := s.Acquire(ctx, 1); err != nil {
			t.Error(name, err)
			return
		}
		granted <- name
		s.Release(1)
	}
	go acquire(a, "A1")
	semWaiting(t, a, 1) // A1 holds A's ticket
	go acquire(a, "A2")
	for a.r.waiting.Load() != 2 { // A2 is in A's slow path, behind A1 at the gate
		time.Sleep(time.Millisecond)
	}
	go acquire(b, "B1")
	semWaiting(t, a, 2) // B1 holds the second ticket
	holder.Release(1)
	var order []string
	for range 3 {
		order = append(order, <-granted)
	}
	if got := strings.Join(order, " "); got != "A1 B1 A2" {
		t.Fatalf("grants in order %s, want A1 B1 A2: FIFO by ticket, A2 ticketless at A's gate until A1 is granted", got)
	}
}
