package torture

// hammer, the harness that runs in-process workers and measures them, and
// the generic runner for any sync.Locker built on it.

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

// hammerRun is what hammer measured.
type hammerRun struct {
	perWorker []int64       // additions (= acquisitions) each worker completed
	elapsed   time.Duration // from releasing the workers to the last one finishing
}

// workerSlot is where a worker publishes how many additions it has
// completed, for the progress bar and, at the end, for the report. Each
// slot fills 128 bytes, so that no two workers' counters share a cache line
// (nor an adjacent-line prefetch pair) and publishing does not distort the
// throughput being measured.
type workerSlot struct {
	done atomic.Int64
	_    [120]byte // padding against false sharing
}

// doneSum returns the progress count of a run whose workers publish in
// slots: the sum of their done counters.
func doneSum(slots []workerSlot) func() int64 {
	return func() int64 {
		var n int64
		for i := range slots {
			n += slots[i].done.Load()
		}
		return n
	}
}

// stopAfterDuration sets stop once cfg.duration has passed, if the run is
// timed (else it does nothing), and returns the function that cancels
// that; callers defer it.
func stopAfterDuration(cfg *config, stop *atomic.Bool) func() {
	if !cfg.timed() {
		return func() {}
	}
	t := time.AfterFunc(cfg.duration, func() { stop.Store(true) })
	return func() { t.Stop() }
}

// publishMask sets how often a worker publishes its count: every 1024
// additions, rare enough to cost nothing measurable.
const publishMask = 1<<10 - 1

// hammer runs body in cfg.workers goroutines at once, cfg.iters times each
// or until cfg.duration elapses, and measures them. body receives the
// worker's id (1-based, so that 0 can mean "nobody") and the number of
// busy-work steps for this acquisition, drawn from 0..cfg.work; it must
// acquire and release the lock itself. label names the run on the progress
// bar. Kinds whose critical section is not the counter of the generic
// runner (a reader-writer lock, say) reuse hammer with their own body.
func hammer(cfg *config, label string, body func(id, steps int)) hammerRun {
	slots := make([]workerSlot, cfg.workers)
	var stop atomic.Bool
	gate := make(chan struct{})
	var wg sync.WaitGroup
	// A fresh seed per run: with -work, holding times (and so the
	// interleavings) differ from one run to the next.
	seed := rand.Uint64()
	for i := range slots {
		wg.Go(func() {
			// Workers wait at the gate so that starting goroutines is
			// not timed and all of them contend from the first moment.
			<-gate
			hammerWorker(cfg, i+1, &slots[i], &stop, body, seed)
		})
	}

	start := time.Now()
	spec := runProgress(cfg, label, start, int64(cfg.workers)*cfg.iters, doneSum(slots), "")
	close(gate)
	defer stopAfterDuration(cfg, &stop)()
	prog := startProgress(cfg.progress, spec)
	wg.Wait()
	elapsed := time.Since(start)
	prog.stop()

	run := hammerRun{perWorker: make([]int64, cfg.workers), elapsed: elapsed}
	for i := range slots {
		run.perWorker[i] = slots[i].done.Load()
	}
	return run
}

// hammerWorker is one worker's loop: draw the busy work, call body, count.
func hammerWorker(cfg *config, id int, slot *workerSlot, stop *atomic.Bool, body func(id, steps int), seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	work := cfg.work
	var n int64
	for {
		if cfg.timed() {
			if stop.Load() {
				break
			}
		} else if n >= cfg.iters {
			break
		}
		steps := 0
		if work > 0 {
			// Drawn outside the critical section: only the work itself
			// should lengthen the hold.
			steps = rng.IntN(work + 1)
		}
		body(id, steps)
		n++
		if n&publishMask == 0 {
			slot.done.Store(n)
		}
	}
	slot.done.Store(n)
}

// A lockerTarget is a lock for the generic runner, with what the report
// needs to know about it.
type lockerTarget struct {
	lock sync.Locker
	// stats returns the lock's statistics collected since the target was
	// made, or is nil when the lock keeps none; noStats then says why,
	// for the report's "Slow path: n/a (...)" line.
	stats   func() lockword.Stats
	noStats string
	// unprotected marks a lock that does not exclude (the none kind).
	// Its workers run sectionUnprotected, compiled without race
	// instrumentation, and yield in the middle of the update.
	unprotected bool
	// starvationLimit fails the run when the starvation check's waiting
	// goroutine waits this long or longer in every attempt (fairness.go);
	// 0: the check is information only.
	starvationLimit time.Duration
}

// lockerKind makes a kind that tortures any sync.Locker with the generic
// runner. newTarget is called once per run, so each run starts with a fresh
// lock and fresh statistics.
func lockerKind(name, desc string, inAll bool, newTarget func() lockerTarget) kind {
	return kind{
		name:  name,
		desc:  desc,
		inAll: inAll,
		run: func(cfg *config) (report, error) {
			return tortureLocker(cfg, name, newTarget()), nil
		},
	}
}

// tortureLocker is the generic runner: it hammers t.lock with the counter
// and owner-slot critical section and reports.
func tortureLocker(cfg *config, name string, t lockerTarget) *counterReport {
	a := new(arena)
	lock, value := t.lock, cfg.value
	m := newFairMeter(cfg)
	body := func(id, steps int) {
		m.lock(id, lock) // times one wait in sampleEvery
		a.section(id, value, steps, false)
		lock.Unlock()
		m.released(id)
	}
	if t.unprotected {
		body = func(id, steps int) {
			lock.Lock()
			a.sectionUnprotected(id, value, steps, true)
			lock.Unlock()
		}
	}
	h := hammer(cfg, name, body)

	// Every worker has finished (hammer waited for them), so the arena
	// may be read without the lock.
	r := newReport(cfg, name, h)
	r.actual = a.counter
	r.ownerViolations = a.violations.Load()
	if t.stats != nil {
		s := t.stats()
		frac := s.SlowPathFraction()
		r.slowPath = &frac
		r.statsAcquisitions = &s.Acquisitions
	} else {
		r.noStats = t.noStats
	}
	if !t.unprotected { // a lock that does not exclude has no fairness
		r.fair = m.summarize(h, lockerStarvation(lock, t.starvationLimit))
	}
	return r
}
