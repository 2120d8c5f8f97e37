package torture

// The fair kinds: TicketMutex through the generic runner, RWMutex with
// readers and writers (half and half, and 99% reads), and Cond passing
// items through a queue of capacity 1.

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

// ticketStarvationLimit is the bound on the starvation check for the
// FIFO lock: a goroutine never waits 10 ms behind one that re-locks in a
// tight loop.
const ticketStarvationLimit = 10 * time.Millisecond

func init() {
	register(
		lockerKind("ticket", "lockword.TicketMutex: FIFO ticket lock; waiters park, woken by ticket", true,
			func() lockerTarget {
				t := new(lockword.TicketMutex)
				t.SetName("lockword torture: ticket")
				t.EnableStats()
				return lockerTarget{lock: t, stats: t.Stats, starvationLimit: ticketStarvationLimit}
			}),
		rwKind("rw", "lockword.RWMutex, phase-fair: every other acquisition a read, the rest writes", 2),
		rwKind("rw-read-mostly", "lockword.RWMutex: 99 reads to 1 write", 100),
		kind{
			name:  "cond",
			desc:  "lockword.Cond: items through a queue of capacity 1 (Mutex, two Conds, Signal only)",
			inAll: true,
			run:   func(cfg *config) (report, error) { return tortureCond(cfg), nil },
		},
	)
}

// rwWriterActivity is what a writer adds to the activity word; a reader
// adds 1. Inside a read section the word must stay below it, inside a
// write section it must equal it.
const rwWriterActivity = 10000

// paddedTally is a worker's own sum, on its own cache lines.
type paddedTally struct {
	n int64
	_ [120]byte
}

// rwKind tortures an RWMutex where every writeEvery'th acquisition of each
// worker is a write (adding -value to the shared counter, with the owner
// slot, as the generic runner does) and the others are reads. A reader
// adds 1 to an activity word (a writer 10000), checks that no writer is
// inside, reads the shared counter twice around its busy work and checks
// it did not move, and adds -value to its own tally: so every acquisition
// adds -value, and Expected is the usual workers × additions × value.
func rwKind(name, desc string, writeEvery int) kind {
	return kind{
		name:  name,
		desc:  desc,
		inAll: true,
		run:   func(cfg *config) (report, error) { return tortureRW(cfg, name, writeEvery), nil },
	}
}

func tortureRW(cfg *config, name string, writeEvery int) *counterReport {
	rw := new(lockword.RWMutex)
	rw.SetName("lockword torture: " + name)
	rw.EnableStats()
	return tortureRWLock(cfg, name, writeEvery, rw, rw.Stats, false)
}

// rwLock is what tortureRWLock needs: an RWMutex, or (in tests) a broken
// reader-writer lock.
type rwLock interface {
	Lock()
	Unlock()
	RLock()
	RUnlock()
}

// readSide locks an rwLock for reading, for fairMeter.lock.
type readSide struct{ rw rwLock }

func (r *readSide) Lock() { r.rw.RLock() }

// yield makes readers yield the processor inside their section, as a
// preempted reader would: for tests that run a broken lock, so that the
// overlap shows even on few cores.
func tortureRWLock(cfg *config, name string, writeEvery int, rw rwLock, stats func() lockword.Stats, yield bool) *counterReport {
	reader := &readSide{rw}
	a := new(arena)
	var activity atomic.Int64
	var overlaps, reads atomic.Int64
	tallies := make([]paddedTally, cfg.workers)
	m := newFairMeter(cfg)
	value := cfg.value
	body := func(id, steps int) {
		if (m.workers[id-1].n+int64(id))%int64(writeEvery) == 0 {
			m.lock(id, rw)
			if activity.Add(rwWriterActivity) != rwWriterActivity {
				overlaps.Add(1) // a reader or writer is inside
			}
			a.section(id, value, steps, false)
			if activity.Add(-rwWriterActivity) != 0 {
				overlaps.Add(1)
			}
			rw.Unlock()
		} else {
			m.lock(id, reader)
			if activity.Add(1) >= rwWriterActivity {
				overlaps.Add(1) // a writer is inside
			}
			before := a.counter // plain read: writers are excluded
			if yield {
				runtime.Gosched()
			}
			_ = busyWork(uint64(steps), steps)
			if a.counter != before {
				overlaps.Add(1) // a writer changed it under us
			}
			if activity.Add(-1) >= rwWriterActivity {
				overlaps.Add(1)
			}
			tallies[id-1].n += value
			rw.RUnlock()
			reads.Add(1)
		}
		m.released(id)
	}
	h := hammer(cfg, name, body)

	r := newReport(cfg, name, h)
	r.actual = a.counter
	for i := range tallies {
		r.actual += tallies[i].n
	}
	r.ownerViolations = a.violations.Load()
	if stats != nil {
		s := stats()
		frac := s.SlowPathFraction()
		r.slowPath, r.statsAcquisitions = &frac, &s.Acquisitions
	} else {
		r.noStats = "this lock keeps no statistics"
	}

	// The starvation check: with half writes, a reader waits behind a
	// writer re-locking in a tight loop; read-mostly, a writer waits
	// behind a reader re-locking in a tight loop.
	check := new(lockword.RWMutex)
	write := func() { check.Lock(); check.Unlock() }
	read := func() { check.RLock(); check.RUnlock() }
	var starve *starvation
	if writeEvery <= 2 {
		starve = starvationCheck("one writer re-locking in a tight loop while a reader locks", 0, write, read)
	} else {
		starve = starvationCheck("one reader re-locking in a tight loop while a writer locks", 0, read, write)
	}
	r.fair = m.summarize(h, starve)
	n := reads.Load()
	r.fair.extra = append(r.fair.extra, fmt.Sprintf("Reads: %d, writes: %d; reader-writer overlaps seen: %d", n, r.total()-n, overlaps.Load()))
	if v := overlaps.Load(); v != 0 {
		r.fair.failures = append(r.fair.failures, fmt.Sprintf("%d reader-writer overlaps", v))
	}
	return r
}

// tortureCond passes items through a queue of capacity 1 guarded by a
// Mutex with two Conds (not full, not empty), Signal only: -workers
// producers each put -iters items (or put until -duration ends), and as
// many consumers take items until every one put has been taken. Both
// critical sections check the owner slot; the consumer adds -value to the
// counter, so Expected is the usual workers × additions × value, an
// addition being one item. The wait timed is a consumer's, for an item,
// and the fairness shares are the consumers': they compete for items.
func tortureCond(cfg *config) *counterReport {
	mu := new(lockword.Mutex)
	mu.SetName("lockword torture: cond")
	notFull, notEmpty := lockword.NewCond(mu), lockword.NewCond(mu)
	// Guarded by mu.
	var (
		full     bool
		taken    int64
		closed   bool  // producers are done: consumers stop once the queue is empty
		expected int64 // items to take in a counted run
	)
	if !cfg.timed() {
		expected = int64(cfg.workers) * cfg.iters
	}
	a := new(arena)
	value := cfg.value
	producers := make([]workerSlot, cfg.workers)
	consumed := make([]workerSlot, cfg.workers)
	m := newFairMeter(cfg)
	var stop atomic.Bool
	gate := make(chan struct{})
	var prod, cons sync.WaitGroup
	for i := range cfg.workers {
		id := i + 1
		prod.Go(func() {
			<-gate
			rng := rand.New(rand.NewPCG(uint64(id), 1))
			var n int64
			for cfg.timed() && !stop.Load() || !cfg.timed() && n < cfg.iters {
				steps := 0
				if cfg.work > 0 {
					steps = rng.IntN(cfg.work + 1)
				}
				mu.Lock()
				for full {
					notFull.Wait()
				}
				a.section(id, 0, steps, false)
				full = true
				notEmpty.Signal()
				mu.Unlock()
				n++
				if n&publishMask == 0 {
					producers[i].done.Store(n)
				}
			}
			producers[i].done.Store(n)
		})
		cons.Go(func() {
			<-gate
			var n int64
			for {
				t0, timed := m.begin(id)
				mu.Lock()
				for !full && !closed && (cfg.timed() || taken < expected) {
					notEmpty.Wait()
				}
				if !full {
					// Done: pass the news on to a consumer still asleep.
					notEmpty.Signal()
					mu.Unlock()
					m.workers[id-1].n-- // begin counted a take that did not happen
					consumed[i].done.Store(n)
					return
				}
				m.acquired(id, t0, timed)
				a.section(cfg.workers+id, value, 0, false)
				full = false
				taken++
				notFull.Signal()
				mu.Unlock()
				n++
				if n&publishMask == 0 {
					consumed[i].done.Store(n)
				}
			}
		})
	}
	start := time.Now()
	spec := runProgress(cfg, "cond", start, expected, doneSum(consumed), "")
	close(gate)
	defer stopAfterDuration(cfg, &stop)()
	prog := startProgress(cfg.progress, spec)
	prod.Wait()
	mu.Lock()
	closed = true
	notEmpty.Signal() // a consumer asleep on an empty queue: time to go
	mu.Unlock()
	cons.Wait()
	elapsed := time.Since(start)
	prog.stop()

	h := hammerRun{perWorker: make([]int64, cfg.workers), elapsed: elapsed}
	shares := hammerRun{perWorker: make([]int64, cfg.workers)}
	for i := range producers {
		h.perWorker[i] = producers[i].done.Load()
		shares.perWorker[i] = consumed[i].done.Load()
	}
	r := newReport(cfg, "cond", h)
	r.actual = a.counter
	r.ownerViolations = a.violations.Load()
	r.noStats = "each item takes two acquisitions of the Cond's Mutex; see the mutex kind"

	// The starvation check: one goroutine signals in a tight loop while
	// another waits for a Signal.
	var cmu lockword.Mutex
	c := lockword.NewCond(&cmu)
	signal := func() { cmu.Lock(); c.Signal(); cmu.Unlock() }
	waitOne := func() { cmu.Lock(); c.Wait(); cmu.Unlock() }
	// Consumers never call m.released, so the shares are final counts.
	r.fair = m.summarize(shares, starvationCheck("one goroutine signalling in a tight loop while another waits for a Signal", 0, signal, waitOne))
	r.fair.sharesWhat = "items taken per consumer"
	r.fair.extra = append(r.fair.extra, fmt.Sprintf("Items: %d, each put by one of %d producers and taken by one of %d consumers", taken, cfg.workers, cfg.workers))
	if taken != r.total() {
		r.fair.failures = append(r.fair.failures, fmt.Sprintf("%d items put, %d taken", r.total(), taken))
	}
	return r
}
