package torture

// The semaphore kinds: -workers goroutines share a weighted semaphore of
// semTorturePermits permits; each acquires k of them (k from 1 to
// semTortureMaxWeight, varied), and while it holds them claims k of the
// permits' owner slots (CAS free → its id), adds k to a separate in-use
// counter and checks both on entry and exit. A semaphore that grants more
// than it has leaves a worker short of free slots or the counter above
// the permits; the totals (acquisitions, permits) are exact, and every
// permit is free again at the end.

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

const (
	semTorturePermits      = 4
	semTortureMaxWeight    = 3
	defaultSemAcquisitions = 400_000 // acquisitions in all unless -items says otherwise
)

func init() {
	register(
		kind{name: "semaphore", desc: fmt.Sprintf("lockword.Semaphore: %d permits, workers acquire 1-%d each, per-permit owner slots", semTorturePermits, semTortureMaxWeight),
			inAll: true,
			run: func(cfg *config) (report, error) {
				s := lockword.NewSemaphore(semTorturePermits)
				s.SetName("lockword torture: semaphore")
				s.EnableStats()
				r := tortureSemaphore(cfg, "semaphore", s)
				r.stats = s.Stats()
				r.freeAfter = s.Free()
				return r, nil
			}},
		kind{name: "semaphore-broken", desc: fmt.Sprintf("a semaphore that grants one permit too many (%d for %d): must FAIL", semTorturePermits+1, semTorturePermits),
			run: func(cfg *config) (report, error) {
				s := lockword.NewSemaphore(semTorturePermits + 1)
				r := tortureSemaphore(cfg, "semaphore-broken", s)
				r.freeAfter = s.Free() - 1
				return r, nil
			}},
	)
	kindHelp = append(kindHelp, fmt.Sprintf(`Semaphores:
  semaphore runs -workers goroutines on one Semaphore of %d permits; each
  acquires 1 to %d permits and, while holding them, claims that many of %d
  owner slots and adds them to an in-use counter, checking on entry and
  exit that no slot was taken twice and the count never exceeded %d.
  Acquisitions (%d unless -items says otherwise) and permits are exact, and
  every permit must be free at the end. semaphore-broken grants one permit
  too many and must FAIL.
`, semTorturePermits, semTortureMaxWeight, semTorturePermits, semTorturePermits, defaultSemAcquisitions))
}

// semReport is the outcome of one semaphore run.
type semReport struct {
	lock                  string
	workers               int
	want, acquisitions    int64
	permitsIn, permitsOut int64 // permits acquired and released
	violations            int64 // over-grants seen on entry or exit
	maxInUse              int64
	freeAfter             int64
	stats                 lockword.Stats
	elapsed               time.Duration
}

// tortureSemaphore runs cfg.workers goroutines against s, which must hold
// semTorturePermits permits (the broken twin holds one more).
func tortureSemaphore(cfg *config, name string, s *lockword.Semaphore) *semReport {
	total := cfg.items
	if total == 0 {
		total = defaultSemAcquisitions
	}
	r := &semReport{lock: name, workers: cfg.workers, want: total}
	var slots [semTorturePermits]atomic.Int64
	var inUse, maxInUse, violations, acquisitions, in, out atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := 1; w <= cfg.workers; w++ {
		n := total / int64(cfg.workers)
		if int64(w-1) < total%int64(cfg.workers) {
			n++
		}
		wg.Go(func() {
			rnd := uint32(w) * 2654435761
			var claimed [semTortureMaxWeight + 1]int
			for range n {
				rnd ^= rnd << 13
				rnd ^= rnd >> 17
				rnd ^= rnd << 5
				k := int64(1 + rnd%semTortureMaxWeight)
				if err := s.Acquire(context.Background(), k); err != nil {
					violations.Add(1)
					continue
				}
				in.Add(k)
				bad := int64(0)
				now := inUse.Add(k)
				if now > semTorturePermits {
					bad++
				}
				for m := maxInUse.Load(); now > m && !maxInUse.CompareAndSwap(m, now); m = maxInUse.Load() {
				}
				got := 0
				for i := range slots {
					if int64(got) == k {
						break
					}
					if slots[i].CompareAndSwap(0, int64(w)) {
						claimed[got] = i
						got++
					}
				}
				if int64(got) < k {
					bad++ // granted more permits than exist
				}
				switch {
				case rnd%64 == 0:
					runtime.Gosched()
				case rnd%4 == 0:
					busyWork(uint64(rnd), int(rnd>>8)%32)
				}
				for _, i := range claimed[:got] {
					if !slots[i].CompareAndSwap(int64(w), 0) {
						bad++
					}
				}
				inUse.Add(-k)
				out.Add(k)
				s.Release(k)
				acquisitions.Add(1)
				violations.Add(bad)
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.acquisitions, r.permitsIn, r.permitsOut = acquisitions.Load(), in.Load(), out.Load()
	r.violations, r.maxInUse = violations.Load(), maxInUse.Load()
	return r
}

func (r *semReport) failures() []string {
	var why []string
	if r.violations > 0 {
		why = append(why, fmt.Sprintf("%d over-grants (more than %d permits in use, or an owner slot taken twice)", r.violations, semTorturePermits))
	}
	if r.acquisitions != r.want {
		why = append(why, fmt.Sprintf("%d acquisitions, want %d", r.acquisitions, r.want))
	}
	if r.permitsIn != r.permitsOut {
		why = append(why, fmt.Sprintf("%d permits acquired, %d released", r.permitsIn, r.permitsOut))
	}
	if r.freeAfter != semTorturePermits {
		why = append(why, fmt.Sprintf("%d of %d permits free at the end", r.freeAfter, semTorturePermits))
	}
	return why
}

func (r *semReport) passed() bool { return len(r.failures()) == 0 }

func (r *semReport) rate() float64 { return millionsPerSecond(r.acquisitions, r.elapsed) }

// millionsPerSecond is a report's throughput: n in d, in millions per
// second (0 before any time passed).
func millionsPerSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e6
}

// semJSONTail closes the JSON line of every semaphore kind: how long it
// ran and the verdict (semTail fills it).
type semJSONTail struct {
	DurationS float64  `json:"duration_s"`
	Result    string   `json:"result"`
	Failures  []string `json:"failures,omitempty"`
}

func semTail(elapsed time.Duration, failures []string) semJSONTail {
	return semJSONTail{elapsed.Seconds(), verdict(failures), failures}
}

// semJSONHead opens the JSON line of the semaphore kinds that count
// workers in one process or cluster: what ran and how much it had to do.
type semJSONHead struct {
	Lock         string `json:"lock"`
	Workers      int    `json:"workers"`
	Permits      int    `json:"permits"`
	Acquisitions int64  `json:"acquisitions"`
	Want         int64  `json:"want"`
}

func (r *semReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: %s\n", r.lock)
	fmt.Fprintf(w, "Workers: %d\n", r.workers)
	fmt.Fprintf(w, "Permits: %d (weights 1-%d)\n", semTorturePermits, semTortureMaxWeight)
	fmt.Fprintf(w, "Acquisitions: %d (want %d)\n", r.acquisitions, r.want)
	fmt.Fprintf(w, "Permits acquired/released: %d/%d\n", r.permitsIn, r.permitsOut)
	fmt.Fprintf(w, "Most permits in use at once: %d\n", r.maxInUse)
	fmt.Fprintf(w, "Over-grants: %d\n", r.violations)
	fmt.Fprintf(w, "Free at the end: %d\n", r.freeAfter)
	fmt.Fprintf(w, "Throughput: %.2f M acquisitions/s\n", r.rate())
	if r.stats.Acquisitions > 0 {
		fmt.Fprintf(w, "Slow path: %.1f%% of acquisitions; longest wait %v\n", 100*r.stats.SlowPathFraction(), r.stats.WaitMax.Round(time.Microsecond))
	}
	writeResult(w, r.failures())
}

func (r *semReport) writeJSON(w io.Writer) error {
	return writeJSONLine(w, struct {
		semJSONHead
		PermitsIn  int64   `json:"permits_acquired"`
		PermitsOut int64   `json:"permits_released"`
		MaxInUse   int64   `json:"max_in_use"`
		OverGrants int64   `json:"over_grants"`
		FreeAfter  int64   `json:"free_after"`
		MPerS      float64 `json:"throughput_macq_s"`
		WaitMaxNs  int64   `json:"wait_max_ns"`
		semJSONTail
	}{semJSONHead{r.lock, r.workers, semTorturePermits, r.acquisitions, r.want}, r.permitsIn, r.permitsOut, r.maxInUse,
		r.violations, r.freeAfter, r.rate(), r.stats.WaitMax.Nanoseconds(), semTail(r.elapsed, r.failures())})
}
