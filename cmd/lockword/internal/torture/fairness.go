package torture

// Fairness, reported for every kind: how evenly the workers shared the
// lock, how long acquisitions waited, and whether a goroutine can be
// starved by another that re-locks in a tight loop. As the Linux kernel's
// locktorture does, an uneven share is flagged, not failed: Mutex and
// sync.Mutex are unfair on purpose and their figures are information. Only
// a kind that promises order (TicketMutex) fails when the starvation check
// exceeds its limit.

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// sampleEvery is how often an acquisition's wait is timed: one in 16 per
// worker. Two clock reads on every acquisition would cost more than a
// whole uncontended Lock and Unlock and distort the throughput; a sample
// of every 16th is unbiased for the percentiles (the maximum is the
// sample's maximum, and says so).
const sampleEvery = 16

// starvationRun is how long the starvation check lets one goroutine
// re-lock in a tight loop while another tries to acquire.
const starvationRun = 200 * time.Millisecond

// starvationPause is the other goroutine's pause between its attempts.
const starvationPause = 50 * time.Microsecond

// A fairMeter follows each worker's acquisitions during a run.
type fairMeter struct {
	cfg     *config
	workers []workerFair
	// Shares are counted over the window in which every worker contends:
	// from the moment the last worker first reaches the lock (baseline;
	// goroutines that have not started yet are in no lock's queue, so
	// their lateness says nothing about the lock) to the moment the first
	// worker finishes, in a counted run (snapshot: at the end every
	// worker has exactly -iters), or to the end of a timed run.
	contending   atomic.Int64
	baselineOnce sync.Once
	baseline     []int64
	once         sync.Once
	snapshot     []int64
}

// workerFair is one worker's part, written only by that worker except
// published, which others read for the baseline and the snapshot.
type workerFair struct {
	n         int64           // acquisitions so far
	published atomic.Int64    // n, for the others to read: one store to our own cache line
	waits     []time.Duration // sampled waits
	_         [64]byte        // keep workers' counters off each other's cache lines
}

func newFairMeter(cfg *config) *fairMeter {
	return &fairMeter{cfg: cfg, workers: make([]workerFair, cfg.workers)}
}

// begin counts an acquisition by worker id (1-based) that is about to
// wait, and reports whether to time it, with its start.
func (m *fairMeter) begin(id int) (t0 time.Time, timed bool) {
	w := &m.workers[id-1]
	w.n++
	w.published.Store(w.n - 1) // acquisitions completed
	if w.n == 1 && m.contending.Add(1) == int64(len(m.workers)) {
		m.baselineOnce.Do(func() { m.baseline = m.published() })
	}
	if w.n%sampleEvery != 0 {
		return time.Time{}, false
	}
	return time.Now(), true
}

// acquired ends the wait that begin started.
func (m *fairMeter) acquired(id int, t0 time.Time, timed bool) {
	if !timed {
		return
	}
	w := &m.workers[id-1]
	w.waits = append(w.waits, time.Since(t0))
}

// lock takes l for worker id, timing the wait when sampled.
func (m *fairMeter) lock(id int, l interface{ Lock() }) {
	t0, timed := m.begin(id)
	l.Lock()
	m.acquired(id, t0, timed)
}

// released is called after each acquisition's release: in a counted run,
// the first worker to finish takes the snapshot of everyone's progress.
func (m *fairMeter) released(id int) {
	w := &m.workers[id-1]
	if m.cfg.timed() || w.n != m.cfg.iters {
		return
	}
	m.once.Do(func() {
		m.snapshot = m.published()
		m.snapshot[id-1] = w.n // the finisher's own count is exact
	})
}

// published reads every worker's count of completed acquisitions.
func (m *fairMeter) published() []int64 {
	p := make([]int64, len(m.workers))
	for i := range m.workers {
		p[i] = m.workers[i].published.Load()
	}
	return p
}

// fairness is what the report prints about it.
type fairness struct {
	shares     []int64 // per-worker acquisitions, at the end or at the snapshot
	sharesWhat string  // what a share counts
	sharesAt   string  // when the shares were taken
	samples    int
	p50, p99   time.Duration
	maxWait    time.Duration
	starve     *starvation
	// rw and cond kinds add a line and their own failure (readers that
	// met a writer inside).
	extra    []string
	failures []string
}

// summarize turns the meter into the report's fairness block; h is what
// hammer measured (final per-worker counts).
func (m *fairMeter) summarize(h hammerRun, starve *starvation) *fairness {
	f := &fairness{starve: starve, sharesWhat: "acquisitions per worker"}
	end, at := h.perWorker, "to the end"
	if m.snapshot != nil {
		end, at = m.snapshot, "to the first worker's finish"
	}
	f.shares = slices.Clone(end)
	if m.baseline != nil {
		for i := range f.shares {
			f.shares[i] = max(0, f.shares[i]-m.baseline[i])
		}
		f.sharesAt = "from the moment all contended " + at
	} else {
		f.sharesAt = "from the start " + at + " (some workers had not yet started)"
	}
	var all []time.Duration
	for i := range m.workers {
		all = append(all, m.workers[i].waits...)
	}
	f.samples = len(all)
	if len(all) > 0 {
		slices.Sort(all)
		f.p50 = all[len(all)/2]
		f.p99 = all[min(len(all)-1, len(all)*99/100)]
		f.maxWait = all[len(all)-1]
	}
	return f
}

// minMax are the smallest and largest shares.
func (f *fairness) minMax() (lo, hi int64) {
	lo, hi = math.MaxInt64, 0
	for _, s := range f.shares {
		lo, hi = min(lo, s), max(hi, s)
	}
	return lo, hi
}

// ratio is max/min of the shares, +Inf when a worker had none.
func (f *fairness) ratio() float64 {
	lo, hi := f.minMax()
	if lo == 0 {
		return math.Inf(1)
	}
	return float64(hi) / float64(lo)
}

// fairnessMinShare is the fewest acquisitions per worker, on average, that
// the contended window must hold for the shares to say anything: with a
// handful each (-iters 1, say, or a fast lock whose first worker finishes
// before the last one starts), who started first decides the ratio, not
// the lock.
const fairnessMinShare = 100

// judged reports whether the window held enough acquisitions to judge.
func (f *fairness) judged() bool {
	var total int64
	for _, s := range f.shares {
		total += s
	}
	return len(f.shares) > 0 && total >= fairnessMinShare*int64(len(f.shares))
}

// flagged is locktorture's starvation flag: the busiest worker made more
// than twice the acquisitions of the least busy (in a window with enough
// acquisitions to judge).
func (f *fairness) flagged() bool {
	lo, hi := f.minMax()
	return f.judged() && hi > 2*lo
}

// allFailures are the fairness block's reasons to fail the run.
func (f *fairness) allFailures() []string {
	why := f.failures
	if s := f.starve; s != nil && s.limit > 0 && !s.passed() {
		why = append(why, fmt.Sprintf("starvation check: the waiting goroutine waited %v (not counting time without a CPU), limit %v, in each of %d attempts", round(s.counted), s.limit, len(s.earlier)+1))
	}
	return why
}

// writeText prints the fairness block. The shares line appears only when
// the window held enough acquisitions to mean something (judged), and
// says "uneven" for locktorture's flag: information, not an alarm, since
// mutex, spin and sync do not promise fairness (-json has the figures
// either way).
func (f *fairness) writeText(w io.Writer) {
	if f.judged() {
		lo, hi := f.minMax()
		verdict := "even"
		if f.flagged() {
			verdict = "uneven: the busiest worker made more than twice the least busy one's share; only ticket promises order"
		}
		fmt.Fprintf(w, "Fairness: %s %s: min %d, max %d, %s (%s)\n", f.sharesWhat, f.sharesAt, lo, hi, ratioText(f.ratio()), verdict)
	}
	if f.samples > 0 {
		fmt.Fprintf(w, "Wait latency (1 in %d acquisitions timed, %d samples): p50 %v, p99 %v, max %v\n",
			sampleEvery, f.samples, round(f.p50), round(f.p99), round(f.maxWait))
	}
	if s := f.starve; s != nil {
		limit := ""
		if s.limit > 0 {
			limit = fmt.Sprintf(" (limit %v)", s.limit)
		}
		fmt.Fprintf(w, "Starvation check (%v of %s): longest wait %v (%d overtakes during it) over %d acquisitions%s\n",
			starvationRun, s.what, round(s.maxWait), s.overtakes, s.acquisitions, limit)
		if s.counted != s.maxWait {
			fmt.Fprintf(w, "  (longest wait not counting the threads' time without a CPU: %v; that wait lost %v to the host)\n", round(s.counted), round(s.schedDelay))
		}
		for i, e := range s.earlier {
			fmt.Fprintf(w, "  (attempt %d of the check had reached the limit, longest counted wait %v, and was run again)\n", i+1, round(e))
		}
	}
	for _, line := range f.extra {
		fmt.Fprintln(w, line)
	}
}

// fairnessJSON is the fairness block of -json, documented in the help.
type fairnessJSON struct {
	Shares        string         `json:"shares"` // what a share counts
	SharesAt      string         `json:"shares_at"`
	MinShare      int64          `json:"min_share"`
	MaxShare      int64          `json:"max_share"`
	MaxMin        *float64       `json:"max_min"` // null when a worker had none
	Judged        bool           `json:"judged"`  // enough acquisitions in the window for the shares to mean something
	Flagged       bool           `json:"flagged"` // judged, and max > 2×min
	SampledEvery  int            `json:"wait_sampled_every"`
	Samples       int            `json:"wait_samples"`
	WaitP50Ns     int64          `json:"wait_p50_ns"`
	WaitP99Ns     int64          `json:"wait_p99_ns"`
	WaitMaxNs     int64          `json:"wait_max_ns"`
	Starvation    *starvationObj `json:"starvation,omitempty"`
	ReadsOrDetail []string       `json:"notes,omitempty"`
}

type starvationObj struct {
	What         string  `json:"what"`
	MaxWaitNs    int64   `json:"max_wait_ns"`
	CountedNs    int64   `json:"counted_max_wait_ns"` // the longest wait less the threads' time without a CPU: what the limit applies to
	SchedDelayNs int64   `json:"sched_delay_ns"`      // that time, during the wait counted
	Overtakes    int     `json:"overtakes"`           // the other goroutine's acquisitions during the longest wait
	EarlierNs    []int64 `json:"earlier_max_wait_ns"` // longest waits of earlier attempts that reached the limit
	Acquisitions int     `json:"acquisitions"`
	LimitNs      *int64  `json:"limit_ns"` // null: no limit, information only
	Passed       bool    `json:"passed"`
}

func (f *fairness) json() *fairnessJSON {
	lo, hi := f.minMax()
	j := &fairnessJSON{
		Shares: f.sharesWhat, SharesAt: f.sharesAt, MinShare: lo, MaxShare: hi, Judged: f.judged(), Flagged: f.flagged(),
		SampledEvery: sampleEvery, Samples: f.samples,
		WaitP50Ns: int64(f.p50), WaitP99Ns: int64(f.p99), WaitMaxNs: int64(f.maxWait),
		ReadsOrDetail: f.extra,
	}
	if r := f.ratio(); !math.IsInf(r, 0) {
		j.MaxMin = &r
	}
	if s := f.starve; s != nil {
		j.Starvation = &starvationObj{What: s.what, MaxWaitNs: int64(s.maxWait), CountedNs: int64(s.counted), SchedDelayNs: int64(s.schedDelay), Overtakes: s.overtakes, EarlierNs: []int64{}, Acquisitions: s.acquisitions, Passed: s.passed()}
		if s.limit > 0 {
			l := int64(s.limit)
			j.Starvation.LimitNs = &l
		}
		for _, e := range s.earlier {
			j.Starvation.EarlierNs = append(j.Starvation.EarlierNs, int64(e))
		}
	}
	return j
}

// round rounds a duration for printing: not at all below 1 µs (an
// uncontended wait is tens of ns, not "0s"), to 0.1 µs below 1 ms, else
// to µs.
func round(d time.Duration) time.Duration {
	if d < time.Microsecond {
		return d
	}
	if d < time.Millisecond {
		return d.Round(100 * time.Nanosecond)
	}
	return d.Round(time.Microsecond)
}

// ratioText is max/min as the shares line prints it.
func ratioText(r float64) string {
	if math.IsInf(r, 0) {
		return "a worker made none"
	}
	return fmt.Sprintf("max/min %.2f", r)
}
