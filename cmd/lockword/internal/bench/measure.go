package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Section is the shape of the work around each acquisition: Inside is
// spent holding the lock, Outside between releasing it and asking again.
// Both are busy loops calibrated in nanoseconds (see calibrate), not
// sleeps: a sleeping goroutine frees its core, a working one does not. The
// zero Section is the empty critical section, the harshest contention.
type Section struct {
	Inside, Outside time.Duration
}

// ParseSection parses "empty" (or "0") and "INSIDE/OUTSIDE" with Go
// durations, such as "100ns/1us".
func ParseSection(s string) (Section, error) {
	if s == "empty" || s == "0" {
		return Section{}, nil
	}
	in, out, ok := strings.Cut(s, "/")
	if !ok {
		return Section{}, fmt.Errorf("section %q: want empty or INSIDE/OUTSIDE, such as 100ns/1us", s)
	}
	var sec Section
	var err error
	if sec.Inside, err = time.ParseDuration(in); err != nil {
		return Section{}, fmt.Errorf("section %q: inside: %v", s, err)
	}
	if sec.Outside, err = time.ParseDuration(out); err != nil {
		return Section{}, fmt.Errorf("section %q: outside: %v", s, err)
	}
	if sec.Inside < 0 || sec.Outside < 0 || sec.Inside > time.Millisecond || sec.Outside > time.Millisecond {
		return Section{}, fmt.Errorf("section %q: each side must be 0..1ms", s)
	}
	return sec, nil
}

// String is the form ParseSection reads.
func (s Section) String() string {
	if s == (Section{}) {
		return "empty"
	}
	return s.Inside.String() + "/" + s.Outside.String()
}

// steps converts the section to spin steps at stepsPerNs.
func (s Section) steps(stepsPerNs float64) (inside, outside int) {
	return int(float64(s.Inside) * stepsPerNs), int(float64(s.Outside) * stepsPerNs)
}

// spin burns n steps of dependent integer work.
//
//go:noinline
func spin(n int) int {
	x := 1
	for i := 0; i < n; i++ {
		x = x*31 + i
	}
	return x
}

// calibrate returns how many spin steps this machine does per nanosecond:
// the fastest of a few 1 ms-ish rounds, so that a round slowed by another
// process does not make every section shorter than asked.
func calibrate() float64 {
	const n = 1 << 20
	best := time.Duration(1 << 62)
	for range 5 {
		t0 := time.Now()
		sinkInt.Add(int64(spin(n) & 1))
		best = min(best, time.Since(t0))
	}
	return float64(n) / float64(max(best, 1))
}

var sinkInt atomic.Int64 // keeps spin's results live

// A Sample is what one timed run of one subject measured.
type Sample struct {
	Ops     int64         // acquisitions (items, for a ring) completed in Elapsed
	Elapsed time.Duration // from the release of the workers to the stop
	// Waits holds the time sampled acquisitions (one in waitSampleEvery
	// per worker) waited in Lock (RLock), from the call to its return, in
	// ns; nil where not timed (one goroutine: uncontended ns/op is
	// measured without the clock; rings).
	Waits *Histogram
	// PerWorker is each worker's (process's) acquisitions, for fairness;
	// nil where it means nothing (rings).
	PerWorker []int64
	// ServerCPU is the server's CPU time over the sample (the etcd
	// kinds); 0 where there is no server.
	ServerCPU time.Duration
}

// OpsPerSec is the sample's throughput.
func (s *Sample) OpsPerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Elapsed.Seconds()
}

// A Locker is a lock as the harness drives it: sync.Locker for
// exclusive locks; for reader-writer locks RLock and RUnlock as well.
type Locker = sync.Locker

// An RWLocker is a reader-writer lock.
type RWLocker interface {
	sync.Locker
	RLock()
	RUnlock()
}

// padded keeps a lock alone on its cache lines, so that false sharing with
// the harness's own words does not pollute the figure.
type padded[L any] struct {
	_ [128]byte
	l L
	_ [128]byte
}

// worker is one goroutine's private counters, padded apart.
type worker struct {
	n     int64
	waits Histogram
	_     [128]byte
}

// Params are what every subject's run is given.
type Params struct {
	Goroutines   int           // workers (processes, for cross-process subjects)
	Duration     time.Duration // how long to measure
	Section      Section       // the critical-section shape
	ReadFraction float64       // reader-writer subjects: share of acquisitions that read
	StepsPerNs   float64       // spin calibration (see calibrate)
}

// waitSampleEvery is how often a contended worker times its Lock: one
// acquisition in this many (the first, then every waitSampleEvery'th). A
// clock read costs 20 ns on most machines but over 100 ns on VMs without
// a fast user-space clock, more than a contended handover: timing every
// acquisition would measure the clock. Sampled, the quantiles are
// estimates from about Ops/waitSampleEvery waits and the max is that of
// the sample; the clock's cost falls on the sampled acquisitions only.
const waitSampleEvery = 32

// A waitSampler times one Lock in waitSampleEvery for one worker: call
// before just before Lock and after just after it returns.
type waitSampler struct {
	n  uint      // Locks so far
	on bool      // this one is timed
	t0 time.Time // when it was asked for
}

func (s *waitSampler) before() {
	s.on = s.n%waitSampleEvery == 0
	s.n++
	if s.on {
		s.t0 = time.Now()
	}
}

// after records the wait in h if this Lock was timed, and returns the
// time read (the zero Time if it was not).
func (s *waitSampler) after(h *Histogram) time.Time {
	if !s.on {
		return time.Time{}
	}
	now := time.Now()
	h.Record(int64(now.Sub(s.t0)))
	return now
}

// uncontendedBatch is how many Lock/Unlock pairs the single goroutine
// does between looks at the stop flag.
const uncontendedBatch = 256

// runLocker measures l under p: one goroutine without the clock (ns/op),
// or p.Goroutines workers that each time every Lock. It returns early,
// with ctx's error, if ctx ends first.
func runLocker(ctx context.Context, l Locker, p Params) (Sample, error) {
	pl := &padded[Locker]{l: l}
	in, out := p.Section.steps(p.StepsPerNs)
	if p.Goroutines == 1 {
		return runWorkers(ctx, 1, p.Duration, false, func(_ int, w *worker, stop *atomic.Bool) {
			local := 0
			for !stop.Load() {
				for range uncontendedBatch {
					pl.l.Lock()
					local += spin(in)
					pl.l.Unlock()
					local += spin(out)
				}
				w.n += uncontendedBatch
			}
			sinkInt.Add(int64(local & 1))
		})
	}
	return runWorkers(ctx, p.Goroutines, p.Duration, true, func(_ int, w *worker, stop *atomic.Bool) {
		local := 0
		var ws waitSampler
		for {
			ws.before()
			pl.l.Lock()
			ws.after(&w.waits)
			if stop.Load() {
				pl.l.Unlock()
				break
			}
			local += spin(in)
			pl.l.Unlock()
			w.n++
			local += spin(out)
		}
		sinkInt.Add(int64(local & 1))
	})
}

// runRW measures rw under p: each acquisition reads (RLock) with
// probability p.ReadFraction and writes (Lock) otherwise, drawn from a
// per-worker generator; both hold the lock for p.Section.Inside.
func runRW(ctx context.Context, rw RWLocker, p Params) (Sample, error) {
	pl := &padded[RWLocker]{l: rw}
	in, out := p.Section.steps(p.StepsPerNs)
	writeBelow := uint32((1 - p.ReadFraction) * (1 << 32)) // write when the draw is below this
	if p.ReadFraction <= 0 {
		writeBelow = 1<<32 - 1
	}
	timed := p.Goroutines > 1
	var seed atomic.Uint32
	return runWorkers(ctx, p.Goroutines, p.Duration, timed, func(_ int, w *worker, stop *atomic.Bool) {
		x := seed.Add(0x9e3779b9) | 1 // xorshift32 state, distinct per worker
		local := 0
		var ws waitSampler
		for {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			write := x < writeBelow
			if timed {
				ws.before()
			}
			if write {
				pl.l.Lock()
			} else {
				pl.l.RLock()
			}
			if timed {
				ws.after(&w.waits)
			}
			done := stop.Load()
			if !done {
				local += spin(in)
			}
			if write {
				pl.l.Unlock()
			} else {
				pl.l.RUnlock()
			}
			if done {
				break
			}
			w.n++
			local += spin(out)
		}
		sinkInt.Add(int64(local & 1))
	})
}

// runWorkers starts n goroutines running body, releases them together,
// sets the stop flag after d (or when ctx ends), and waits for them. With
// timed, the sample's Elapsed runs from the release to the stop, and
// bodies count no acquisition made after it (they check the flag after
// acquiring); otherwise bodies count all they make and Elapsed runs until
// the last returns.
func runWorkers(ctx context.Context, n int, d time.Duration, timed bool, body func(i int, w *worker, stop *atomic.Bool)) (Sample, error) {
	var stop atomic.Bool
	workers := make([]worker, n)
	var wg, ready sync.WaitGroup
	start := make(chan struct{})
	for i := range workers {
		ready.Add(1)
		wg.Go(func() {
			ready.Done()
			<-start
			body(i, &workers[i], &stop)
		})
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	timer := time.NewTimer(d)
	var err error
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
		err = ctx.Err()
	}
	stop.Store(true)
	elapsed := time.Since(t0)
	wg.Wait()
	if !timed {
		// The untimed bodies count every acquisition they make, the
		// ones after the stop included: time until they return.
		elapsed = time.Since(t0)
	}
	s := Sample{Elapsed: elapsed, PerWorker: make([]int64, n)}
	if timed {
		s.Waits = new(Histogram)
	}
	for i := range workers {
		s.Ops += workers[i].n
		s.PerWorker[i] = workers[i].n
		if timed {
			s.Waits.Merge(&workers[i].waits)
		}
	}
	return s, err
}
