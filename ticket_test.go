package lockword

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// atRest checks the words of an idle TicketMutex: every ticket served,
// none left to skip, nobody parked, nothing recorded as abandoned.
func (t *TicketMutex) atRest() error { return ticketAtRest("TicketMutex", t.words()) }

func ticketAtRest(name string, r ticketRef) error {
	if n, s := r.next.Load(), r.serving.Load(); n != s {
		return fmt.Errorf("%s at rest: next %d, serving %d", name, n, s)
	}
	if a := r.aux.Load() & ticketAbandonedMask; a != 0 {
		return fmt.Errorf("%s at rest: %d abandoned tickets not skipped", name, a)
	}
	if n := recordedSkips(r.d); n != 0 {
		return fmt.Errorf("%s at rest: %d abandoned tickets still recorded", name, n)
	}
	if n := wait.Parked(r.serving); n != 0 {
		return fmt.Errorf("%s at rest: %d goroutines parked", name, n)
	}
	return nil
}

// recordedSkips counts the abandoned tickets a lock's ticketSkips holds.
func recordedSkips(d *diag) int {
	info := d.info.Load()
	if info == nil {
		return 0
	}
	info.skips.mu.Lock()
	defer info.skips.mu.Unlock()
	return len(info.skips.m)
}

// queued is how many tickets are outstanding beyond the holder's.
func (t *TicketMutex) queued() int { return int(t.next.Load()-t.serving.Load()) - 1 }

// parked is how many of its waiters are parked (not spinning).
func (t *TicketMutex) parked() int { return wait.Parked(&t.serving) }

func TestTicketMutexStateTable(t *testing.T) {
	var m TicketMutex
	words := func() [3]uint32 { return [3]uint32{m.next.Load(), m.serving.Load(), m.aux.Load()} }
	if w := words(); w != [3]uint32{0, 0, 0} {
		t.Fatalf("zero TicketMutex: next, serving, aux = %v", w)
	}
	m.Lock()
	if w := words(); w != [3]uint32{1, 0, 0} {
		t.Fatalf("locked: %v, want next 1 serving 0", w)
	}
	done := make(chan struct{})
	go func() { m.Lock(); m.Unlock(); close(done) }()
	for m.queued() != 1 {
		runtime.Gosched()
	}
	if w := words(); w != [3]uint32{2, 0, 0} {
		t.Fatalf("locked with a waiter: %v, want next 2 serving 0", w)
	}
	m.Unlock()
	<-done
	if w := words(); w != [3]uint32{2, 2, 0} {
		t.Fatalf("unlocked: %v, want next 2 serving 2", w)
	}
	if err := m.atRest(); err != nil {
		t.Fatal(err)
	}
	m.EnableStats()
	if m.aux.Load() != statsFlag {
		t.Fatalf("EnableStats: aux %#x, want the statistics flag", m.aux.Load())
	}
}

// lifoLock hands the lock to the newest waiter: a deliberately unfair lock
// that the FIFO checker must catch.
type lifoLock struct {
	mu    sync.Mutex
	held  bool
	stack []chan struct{}
}

func (l *lifoLock) Lock() {
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.mu.Unlock()
		return
	}
	c := make(chan struct{})
	l.stack = append(l.stack, c)
	l.mu.Unlock()
	<-c // ownership is handed over
}

func (l *lifoLock) Unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.stack); n > 0 {
		c := l.stack[n-1]
		l.stack = l.stack[:n-1]
		close(c)
		return
	}
	l.held = false
}

func (l *lifoLock) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.stack)
}

// acquisitionOrder holds l, starts n waiters one at a time, each queued
// (queued() counts it) before the next starts, then releases l and returns
// the order in which the waiters acquired it.
func acquisitionOrder(l sync.Locker, queued func() int, n int) []int {
	defer watchdog("acquisition order", time.Minute)()
	l.Lock()
	var order []int // guarded by l
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l.Lock()
			order = append(order, i)
			l.Unlock()
		})
		for queued() != i+1 {
			runtime.Gosched()
		}
	}
	l.Unlock()
	wg.Wait()
	return order
}

// fifoViolation reports the first place where order is not 0, 1, 2, ...
func fifoViolation(order []int) error {
	for i, v := range order {
		if v != i {
			return fmt.Errorf("waiter %d acquired %d'th: not FIFO (order %v)", v, i, order)
		}
	}
	return nil
}

func TestTicketMutexFIFO(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			m := new(TicketMutex)
			if err := fifoViolation(acquisitionOrder(m, m.queued, 32)); err != nil {
				t.Fatal(err)
			}
			if err := m.atRest(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFIFOCheckerCatchesUnfairLock shows that the FIFO check can fail.
func TestFIFOCheckerCatchesUnfairLock(t *testing.T) {
	l := new(lifoLock)
	if err := fifoViolation(acquisitionOrder(l, l.queued, 8)); err == nil {
		t.Fatal("a LIFO lock passed the FIFO check: the check cannot fail")
	}
}

// ctxLock is what the cancellation checks need of a lock.
type ctxLock interface {
	sync.Locker
	LockContext(context.Context) error
}

// queueTwoWaiters queues, on the held l, first a waiter that locks with
// ctx (it unlocks at once if it gets the lock, and sends LockContext's
// result on first), then a plain waiter that locks, unlocks and closes
// second; it returns once queued counts both.
func queueTwoWaiters(ctx context.Context, l ctxLock, queued func() int) (first chan error, second chan struct{}) {
	first = make(chan error, 1)
	go func() {
		err := l.LockContext(ctx)
		if err == nil {
			l.Unlock() // its turn came before the cancellation
		}
		first <- err
	}()
	for queued() < 1 {
		runtime.Gosched()
	}
	second = make(chan struct{})
	go func() { l.Lock(); l.Unlock(); close(second) }()
	for queued() < 2 {
		runtime.Gosched()
	}
	return first, second
}

// strandedAfterCancel holds l with a waiter next in line whose context is
// cancelled at a random moment (before Unlock, racing with it, or a little
// after it, while the waiter parks, spins or is being woken, or once both
// waiters are parked), and a plain
// waiter behind it. It returns an error if the plain waiter does not get
// the lock within patience: the cancelled waiter stalled the queue. On
// error it calls unstick, which must let the stranded waiter through.
func strandedAfterCancel(l ctxLock, queued, parked func() int, rounds int, patience time.Duration, unstick func()) error {
	for i := range rounds {
		l.Lock()
		ctx, cancel := context.WithCancel(context.Background())
		first, second := queueTwoWaiters(ctx, l, queued)
		switch i % 4 {
		case 0:
			cancel()
			l.Unlock()
		case 1:
			go cancel()
			l.Unlock()
		case 2:
			// Both waiters parked, and the first has given up before
			// Unlock: the cancellation, not the handover, ends its wait,
			// so a lock that loses abandoned turns is caught here however
			// the scheduler runs the goroutines. (Without waiting for it
			// to return, a slow first waiter woken by the cancellation
			// can still be dequeued by Unlock's wake-up first and take
			// its turn: correct, and under load it happened every time.)
			for end := time.Now().Add(time.Second); parked() < 2 && time.Now().Before(end); {
				time.Sleep(20 * time.Microsecond)
			}
			cancel()
			err := <-first
			first <- err
			l.Unlock()
		case 3:
			go func() {
				time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
				cancel()
			}()
			time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
			l.Unlock()
		}
		select {
		case <-second:
		case <-time.After(patience):
			unstick()
			<-second
			cancel()
			<-first
			return fmt.Errorf("round %d: the waiter behind a cancelled one was stranded", i)
		}
		cancel()
		if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("round %d: LockContext = %v", i, err)
		}
	}
	return nil
}

func TestTicketMutexCancelNextInLine(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			m := new(TicketMutex)
			if err := strandedAfterCancel(m, m.queued, m.parked, scaled(4000), 10*time.Second, func() {}); err != nil {
				t.Fatal(err)
			}
			if err := m.atRest(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// hookTicket is the ticket protocol on its own words, run with
// ticketAbandonHook set to hook for the test's duration, so that a test
// can break one part of it.
type hookTicket struct {
	next, serving, aux atomic.Uint32
	diag
}

func newHookTicket(t *testing.T, hook func(r ticketRef, ticket uint32)) *hookTicket {
	ticketAbandonHook = hook
	t.Cleanup(func() { ticketAbandonHook = nil })
	return new(hookTicket)
}

func (e *hookTicket) stuckInfo() (string, *diag) { return "hookTicket", &e.diag }
func (e *hookTicket) ref() ticketRef             { return ticketRef{&e.next, &e.serving, &e.aux, &e.diag} }
func (e *hookTicket) Lock()                      { e.LockContext(context.Background()) }
func (e *hookTicket) Unlock()                    { e.ref().unlock("hookTicket") }
func (e *hookTicket) queued() int                { return int(e.next.Load()-e.serving.Load()) - 1 }
func (e *hookTicket) parked() int                { return wait.Parked(&e.serving) }

func (e *hookTicket) LockContext(ctx context.Context) error {
	ticket := e.next.Add(1) - 1
	tr := e.trackNoted(e)
	if err := e.ref().await(ctx, ticket, &tr, "hookTicket"); err != nil {
		tr.abandoned()
		return err
	}
	tr.acquired()
	return nil
}

// loseSkip forgets an abandoned ticket as soon as it is recorded: the bug
// of a ticket lock whose cancelled waiters simply leave.
func loseSkip(r ticketRef, ticket uint32) { r.removeSkip(ticket) }

// TestCancelCheckerCatchesLostTurn shows that the cancellation check can
// fail: with abandoned tickets forgotten, the waiter behind a cancelled
// one waits for a turn that nobody passes on.
func TestCancelCheckerCatchesLostTurn(t *testing.T) {
	e := newHookTicket(t, loseSkip)
	unstick := func() {
		// Serve the forgotten ticket by hand.
		e.ref().unlock("hookTicket")
	}
	if err := strandedAfterCancel(e, e.queued, e.parked, 40, 200*time.Millisecond, unstick); err == nil {
		t.Fatal("a ticket lock that forgets cancelled tickets passed: the check cannot fail")
	}
}

// cancelStress runs workers of which every other one locks with a context
// that ends at a random moment, some ending almost at once, with holds of
// varied length, and checks exact totals and the owner slot.
func cancelStress(t *testing.T, l ctxLock, workers, rounds int) (acquired, cancelled int64) {
	return cancelStressShaped(t, l, ticketCancelShape, workers, rounds)
}

// cancelShape is how cancelStressShaped mixes its workers: one worker in
// ctxEvery locks with a context that ends within maxWait (one in
// doneEvery of those contexts is done before the call; 0: none), and one
// acquisition in longEvery holds the lock for longHold, so that waiters
// park. idStride separates the owner-slot ids of the workers.
type cancelShape struct {
	ctxEvery, doneEvery, longEvery int
	maxWait, longHold              time.Duration
	idStride                       int
}

// ticketCancelShape is cancelStress's mix; mutexCancelShape is
// TestCancelledWaitersNeverStrandOthers' (a third of the workers, no
// contexts done in advance).
var (
	ticketCancelShape = cancelShape{ctxEvery: 2, doneEvery: 7, longEvery: 499, maxWait: 300 * time.Microsecond, longHold: 30 * time.Microsecond, idStride: 1_000_000}
	mutexCancelShape  = cancelShape{ctxEvery: 3, longEvery: 997, maxWait: 400 * time.Microsecond, longHold: 50 * time.Microsecond, idStride: 1000}
)

// cancelStressShaped is cancelStress with the mix given by sh.
func cancelStressShaped(t *testing.T, l ctxLock, sh cancelShape, workers, rounds int) (acquired, cancelled int64) {
	defer watchdog("cancellation stress", 2*time.Minute)()
	var g guarded
	var violations, acq, canc atomic.Int64
	var wg sync.WaitGroup
	// A short run (-short) on a loaded host may see every context outlive
	// its wait and exercise no cancellation: run again (five passes at
	// most) rather than drop the requirement. Totals add up over passes.
	for pass := 0; pass < 5 && canc.Load() == 0; pass++ {
		for w := 1; w <= workers; w++ {
			wg.Go(func() {
				for i := range rounds {
					rnd := rand.Uint32()
					if w%sh.ctxEvery == 0 {
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rnd%uint32(sh.maxWait/time.Microsecond))*time.Microsecond)
						if sh.doneEvery != 0 && rnd%uint32(sh.doneEvery) == 0 {
							cancel() // done before it even starts
						}
						err := l.LockContext(ctx)
						cancel()
						if err != nil {
							// context.Canceled only where a context was done before the call.
							if !errors.Is(err, context.DeadlineExceeded) && (sh.doneEvery == 0 || !errors.Is(err, context.Canceled)) {
								t.Errorf("LockContext: %v", err)
							}
							canc.Add(1)
							continue
						}
					} else {
						l.Lock()
					}
					violations.Add(int64(g.critical(w*sh.idStride+i, rnd)))
					if rnd%uint32(sh.longEvery) == 0 {
						time.Sleep(sh.longHold) // a long hold: waiters park
					}
					acq.Add(1)
					l.Unlock()
				}
			})
		}
		wg.Wait()
	}
	if int64(g.counter) != acq.Load() || violations.Load() != 0 {
		t.Fatalf("counter %d, acquisitions %d, owner-slot violations %d", g.counter, acq.Load(), violations.Load())
	}
	if canc.Load() == 0 {
		t.Error("no waiter was cancelled: the test did not exercise cancellation")
	}
	return acq.Load(), canc.Load()
}

func TestTicketMutexCancelStress(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			m := new(TicketMutex)
			a, c := cancelStress(t, m, 12, scaled(200_000)/12)
			t.Logf("%d acquisitions, %d cancelled", a, c)
			if err := m.atRest(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTicketMutexWrap starts both counters just below 2^32, so that order,
// exclusion, cancellation and misuse detection are all exercised across
// the wrap.
func TestTicketMutexWrap(t *testing.T) {
	start := uint32(1<<32 - 20)
	fresh := func() *TicketMutex {
		m := new(TicketMutex)
		m.next.Store(start)
		m.serving.Store(start)
		return m
	}
	m := fresh()
	if err := fifoViolation(acquisitionOrder(m, m.queued, 40)); err != nil {
		t.Fatal("across the wrap:", err)
	}
	if s := m.serving.Load(); s != start+41 {
		t.Fatalf("serving = %d after 41 acquisitions from %d: did not wrap", s, start)
	}
	m = fresh()
	if r := hammerLocker(m, 4, 1000); r.total != r.want || r.violations != 0 {
		t.Fatalf("hammer across the wrap: %v", r)
	}
	m = fresh()
	if err := strandedAfterCancel(m, m.queued, m.parked, 40, 10*time.Second, func() {}); err != nil {
		t.Fatal("across the wrap:", err)
	}
	m = fresh()
	cancelStress(t, m, 6, 2000)
	if err := m.atRest(); err != nil {
		t.Fatal(err)
	}
	if m.serving.Load() >= start {
		t.Fatal("the stress did not cross the wrap")
	}
	// Unlock of the unlocked lock is still detected right at the wrap.
	m = new(TicketMutex)
	m.next.Store(1<<32 - 1)
	m.serving.Store(1<<32 - 1)
	func() {
		defer func() {
			if r := recover(); r != "lockword: Unlock of unlocked TicketMutex" {
				t.Fatalf("Unlock of unlocked at the wrap: recovered %v", r)
			}
		}()
		m.Unlock()
	}()
	if err := m.atRest(); err != nil {
		t.Fatal("after the detected misuse:", err)
	}
}

// fairShares runs workers that take turns on l until total acquisitions
// are made, and returns each worker's share and the fraction of
// acquisitions that came in turn: after exactly workers-1 acquisitions by
// the others (workers-2 counts too: one other worker may be away). A
// FIFO lock with every worker queued gives every acquisition in turn.
func fairShares(l sync.Locker, workers, total int) (shares []int, inTurn float64) {
	defer watchdog("fair shares", 2*time.Minute)()
	counts := make([]paddedCount, workers)
	turns := make([]paddedCount, workers)
	made := 0 // guarded by l
	var started sync.WaitGroup
	var wg sync.WaitGroup
	l.Lock()
	for w := range workers {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			last := -1
			for {
				l.Lock()
				if made >= total {
					l.Unlock()
					return
				}
				if gap := made - last - 1; last >= 0 && gap >= workers-2 && gap <= workers-1 {
					turns[w].n++
				}
				last = made
				made++
				counts[w].n++
				l.Unlock()
			}
		})
	}
	started.Wait()
	// Let them all reach Lock before the first Unlock: a worker that
	// queues late misses turns, which no lock can give back. A lock that
	// counts its queue is waited for (under a host's load the workers'
	// thread may not run for a long while); another gets 20 ms.
	if q, ok := l.(interface{ queued() int }); ok {
		for q.queued() < workers {
			time.Sleep(time.Millisecond)
		}
	} else {
		time.Sleep(20 * time.Millisecond)
	}
	l.Unlock()
	wg.Wait()
	shares = make([]int, workers)
	inTurns := 0
	for i := range counts {
		shares[i] = counts[i].n
		inTurns += turns[i].n
	}
	return shares, float64(inTurns) / float64(total)
}

// maxMin is the largest share over the smallest (+Inf if one is 0).
func maxMin(shares []int) float64 {
	lo, hi := shares[0], shares[0]
	for _, s := range shares {
		lo, hi = min(lo, s), max(hi, s)
	}
	return float64(hi) / float64(lo)
}

// TestTicketMutexFairShares: eight goroutines taking turns on a TicketMutex
// get equal shares (max/min ≤ 1.05 on one processor).
//
// Its assumption: a worker is away from the lock's queue only between its
// Unlock and its next Lock, a few instructions. The Go scheduler breaks it
// under a host's load: it preempts a goroutine every 10 ms of wall time,
// and one preempted between Unlock and Lock waits in the global run queue
// while the others hand the processor to each other; at load 20 a share
// lost 10-25 % that way (max/min 1.08-1.37, three tries in a row). So when
// three tries miss the bound, the run is judged by what the lock decides:
// at least 95 % of acquisitions must come in turn (after the seven others,
// or six while one is away). Unfairness of the lock's own making fails
// both: Mutex (checker-catches-Mutex) comes in turn in well under half of
// its acquisitions, and an Unlock that yields (see ticketSpinIterations;
// max/min 31,747 when it was tried) lets one worker re-lock alone, out of
// turn, for a whole time slice.
func TestTicketMutexFairShares(t *testing.T) {
	total := scaled(400_000)
	for _, c := range []struct {
		procs int
		bound float64
	}{{1, 1.05}, {2, 2}} {
		t.Run(fmt.Sprintf("procs=%d", c.procs), func(t *testing.T) {
			withGOMAXPROCS(t, c.procs)
			shares, inTurn := fairShares(new(TicketMutex), 8, total)
			for try := 1; try < 3 && maxMin(shares) > c.bound; try++ {
				t.Logf("try %d: max/min %.3f, %.1f%% in turn, shares %v: again", try, maxMin(shares), 100*inTurn, shares)
				shares, inTurn = fairShares(new(TicketMutex), 8, total)
			}
			switch r := maxMin(shares); {
			case r <= c.bound:
				t.Logf("max/min %.4f, %.1f%% in turn, shares %v", r, 100*inTurn, shares)
			case inTurn >= 0.95:
				t.Logf("max/min %.3f > %.2f in three tries, but %.1f%% of acquisitions came in turn: workers were preempted outside the queue (host load), shares %v", r, c.bound, 100*inTurn, shares)
			default:
				t.Fatalf("max/min = %.3f > %.2f and only %.1f%% of acquisitions in turn: shares %v", r, c.bound, 100*inTurn, shares)
			}
		})
	}
	t.Run("checker-catches-Mutex", func(t *testing.T) {
		withGOMAXPROCS(t, 1)
		shares, inTurn := fairShares(new(Mutex), 8, total)
		if r := maxMin(shares); r <= 2 {
			t.Fatalf("Mutex (unfair by design) has max/min %.3f: the fairness check cannot fail", r)
		}
		if inTurn >= 0.95 {
			t.Fatalf("Mutex (unfair by design) came in turn in %.1f%% of acquisitions: the in-turn check cannot fail", 100*inTurn)
		}
		t.Logf("Mutex: %.1f%% in turn", 100*inTurn)
	})
}

// TestTicketMutexTryLockTakesNoTicket: TryLock on a held lock must not
// queue (a queued ticket nobody waits for would stall the lock).
func TestTicketMutexTryLockTakesNoTicket(t *testing.T) {
	var m TicketMutex
	m.Lock()
	for range 100 {
		if m.TryLock() {
			t.Fatal("TryLock succeeded on a held lock")
		}
	}
	if q := m.queued(); q != 0 {
		t.Fatalf("TryLock left %d tickets queued", q)
	}
	m.Unlock()
	if !m.TryLock() {
		t.Fatal("TryLock on a free lock failed")
	}
	m.Unlock()
	if err := m.atRest(); err != nil {
		t.Fatal(err)
	}
}

// yieldAfterSkip yields the processor right after an abandoned ticket is
// recorded: it holds open the window between an abandoning waiter's record
// and its check of serving, where a wrong order of counting and recording
// once let an unlocker uncount another waiter's ticket and the queue stall
// behind it.
func yieldAfterSkip(ticketRef, uint32) { runtime.Gosched() }

// TestTicketAbandonRacesUnlock drives many abandonments against unlocks
// with that window held open; a stall is reported by the watchdog.
func TestTicketAbandonRacesUnlock(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			e := newHookTicket(t, yieldAfterSkip)
			cancelStress(t, e, 12, scaled(100_000)/12)
			if err := ticketAtRest("hookTicket", e.ref()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
