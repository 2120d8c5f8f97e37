package torture

// What a run reports: the report interface, and the report of the counter
// experiment (counterReport) in text and JSON. The kinds with experiments of
// their own have their report types beside them.

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// A counterReport is the outcome of a run of the counter experiment (a
// lock guarding a plain counter and an owner slot), in one process or
// across -procs processes.
type counterReport struct {
	lock      string
	workers   int
	iters     int64         // additions per worker in a counted run; 0 in a timed one
	duration  time.Duration // the requested duration of a timed run; 0 in a counted one
	perWorker []int64       // additions each worker completed
	value     int64
	work      int
	expected  int64 // total additions × value
	actual    int64 // the counter at the end
	elapsed   time.Duration

	ownerViolations int64
	// reads counts the committed reads of a kind with readers (nil for
	// the others), readViolations those that saw a writer inside or the
	// counter change (kinds_sharedrw.go).
	reads          *int64
	readViolations int64
	// slowPath is the lock's Stats().SlowPathFraction(), nil when the
	// lock keeps no statistics; noStats then says why.
	slowPath *float64
	noStats  string
	// statsAcquisitions is the lock's own count of acquisitions, nil
	// without statistics. Statistics are enabled before the run starts,
	// so it must equal the workers' total: a mismatch fails the run.
	statsAcquisitions *uint64

	// procs is the number of worker processes (0: in-process); killed is
	// what a -kill run's supervisor saw (procs.go, kill.go).
	procs  int
	killed *killReport
	// workerErrors lists -procs worker processes that failed by
	// themselves in a run without -kill (with -kill: killed.WorkerErrors).
	workerErrors []string
	// interrupted names the signal that stopped a -procs run early
	// ("SIGINT"); the report then covers the additions made until then.
	interrupted string

	// fair is the fairness block (fairness.go): shares, wait latency,
	// starvation check; nil for kinds without one.
	fair *fairness
}

// A report is the outcome of one kind's run: what is printed for it and
// the verdict. Each shape of experiment has its own implementation: the
// locked counter (counterReport, the locks in and across processes), a
// ring's stream (ringReport, sharedRingReport), a seqlock's snapshots
// (seqLockReport) and the etcd kinds (etcdReport, a counterReport with
// lines added).
type report interface {
	// failures lists why the run failed; none means it passed.
	failures() []string
	// passed reports whether no check failed: failures is empty.
	passed() bool
	// writeText prints the report in the text format of the help.
	writeText(w io.Writer)
	// writeJSON prints the report as one line of JSON.
	writeJSON(w io.Writer) error
}

// newReport fills in what hammer measured; the runner adds what it found.
func newReport(cfg *config, name string, h hammerRun) *counterReport {
	r := &counterReport{
		lock:      name,
		workers:   cfg.workers,
		perWorker: h.perWorker,
		value:     cfg.value,
		work:      cfg.work,
		elapsed:   h.elapsed,
	}
	if cfg.timed() {
		r.duration = cfg.duration
	} else {
		r.iters = cfg.iters
	}
	// In a timed run this may wrap around after some 9e12 additions;
	// the counter wraps identically, so the comparison stays exact.
	r.expected = r.total() * r.value
	return r
}

// total is the number of additions, and so of acquisitions, of the run.
func (r *counterReport) total() int64 {
	var n int64
	for _, c := range r.perWorker {
		n += c
	}
	return n
}

// throughput is in millions of acquisitions per wall-clock second.
func (r *counterReport) throughput() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.total()) / r.elapsed.Seconds() / 1e6
}

// failures lists why the run failed; none means it passed.
func (r *counterReport) failures() []string {
	var why []string
	if r.total() == 0 && r.interrupted == "" {
		// Nothing locked, nothing checked: a PASS would claim what the
		// run never tested (a -duration shorter than one acquisition).
		why = append(why, "no worker completed an addition: the run checked nothing (a longer -duration or more -iters)")
	}
	if d := r.expected - r.actual; d != 0 {
		if d > 0 && d%r.value == 0 {
			why = append(why, fmt.Sprintf("lost updates: counter %d short, %d of %d additions lost", d, d/r.value, r.total()))
		} else {
			why = append(why, fmt.Sprintf("the counter is off by %d", -d))
		}
	}
	if r.ownerViolations != 0 {
		why = append(why, fmt.Sprintf("%d owner-slot violations", r.ownerViolations))
	}
	if r.readViolations != 0 {
		why = append(why, fmt.Sprintf("%d reads saw a writer inside", r.readViolations))
	}
	if r.statsAcquisitions != nil && int64(*r.statsAcquisitions) != r.total() {
		why = append(why, fmt.Sprintf("the lock's statistics count %d acquisitions, the workers made %d", *r.statsAcquisitions, r.total()))
	}
	if r.killed != nil {
		why = append(why, r.killed.failures()...)
	}
	for _, e := range r.workerErrors {
		why = append(why, e)
	}
	if r.fair != nil {
		why = append(why, r.fair.allFailures()...)
	}
	return why
}

// passed reports whether the lock excluded: no failures.
func (r *counterReport) passed() bool { return len(r.failures()) == 0 }

// result is the verdict as printed: PASS, FAIL, or INTERRUPTED for a run
// stopped early by a signal in which no check failed so far.
func (r *counterReport) result() string {
	switch {
	case !r.passed():
		return "FAIL"
	case r.interrupted != "":
		return "INTERRUPTED"
	}
	return "PASS"
}

// writeText prints the report in the text format documented in the help.
func (r *counterReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: %s\n", r.lock)
	fmt.Fprintf(w, "Workers: %d\n", r.workers)
	if r.procs > 0 {
		fmt.Fprintf(w, "Processes: %d\n", r.procs)
	}
	if r.interrupted != "" {
		fmt.Fprintf(w, "Interrupted: by %s after %v; a partial report, of the additions made until then\n",
			r.interrupted, r.elapsed.Round(time.Millisecond))
	}
	lo, hi := r.perWorker[0], r.perWorker[0]
	for _, c := range r.perWorker {
		lo, hi = min(lo, c), max(hi, c)
	}
	switch {
	case r.duration > 0:
		fmt.Fprintf(w, "Duration: %v\n", r.duration)
		fmt.Fprintf(w, "Additions per worker: varies, min %d, max %d (%d total)\n", lo, hi, r.total())
	case r.interrupted != "" && r.killed == nil:
		fmt.Fprintf(w, "Additions per worker: %d asked, made: min %d, max %d (%d total)\n", r.iters, lo, hi, r.total())
	default:
		fmt.Fprintf(w, "Additions per worker: %d\n", r.iters)
	}
	fmt.Fprintf(w, "Value per addition: %d\n", r.value)
	if r.work > 0 {
		fmt.Fprintf(w, "Busy work per acquisition: 0..%d steps\n", r.work)
	}
	fmt.Fprintf(w, "Expected: %d\n", r.expected)
	fmt.Fprintf(w, "Actual:   %d\n", r.actual)
	fmt.Fprintf(w, "Owner-slot violations: %d\n", r.ownerViolations)
	if r.reads != nil {
		fmt.Fprintf(w, "Reads: %d (%d saw a writer inside)\n", *r.reads, r.readViolations)
	}
	if tp := r.throughput(); tp >= 0.1 || tp == 0 {
		fmt.Fprintf(w, "Throughput: %.1f M acquisitions/s\n", tp)
	} else { // a -kill run can be this slow: "0.0 M" would read as none
		fmt.Fprintf(w, "Throughput: %.1f k acquisitions/s\n", tp*1e3)
	}
	if r.slowPath != nil {
		fmt.Fprintf(w, "Slow path: %.1f%% of acquisitions\n", 100**r.slowPath)
	} else {
		fmt.Fprintf(w, "Slow path: n/a (%s)\n", r.noStats)
	}
	if r.killed != nil {
		r.killed.writeText(w)
	}
	if r.fair != nil {
		r.fair.writeText(w)
	}
	if why := r.failures(); len(why) > 0 {
		fmt.Fprintf(w, "Result: FAIL (%s)\n", strings.Join(why, "; "))
	} else if r.interrupted != "" {
		fmt.Fprintln(w, "Result: INTERRUPTED (no check failed until then)")
	} else {
		fmt.Fprintln(w, "Result: PASS")
	}
}

// reportJSON is the -json form of a report; its fields are documented in
// the help and are a contract with scripts.
type reportJSON struct {
	Lock            string `json:"lock"`
	Workers         int    `json:"workers"`
	Iters           *int64 `json:"iters"` // null in a timed run: it varies per worker
	Additions       int64  `json:"additions"`
	Value           int64  `json:"value"`
	Work            int    `json:"work"`
	Expected        int64  `json:"expected"`
	Actual          int64  `json:"actual"`
	OwnerViolations int64  `json:"owner_violations"`
	// Kinds with readers (shared-rw) only.
	Reads             *int64   `json:"reads,omitempty"`
	ReadViolations    *int64   `json:"read_violations,omitempty"`
	ThroughputMacqS   float64  `json:"throughput_macq_s"`
	SlowPathFraction  *float64 `json:"slow_path_fraction"`
	StatsAcquisitions *uint64  `json:"stats_acquisitions"`
	DurationS         float64  `json:"duration_s"`
	Result            string   `json:"result"`
	Failures          []string `json:"failures,omitempty"`
	// Multi-process runs only.
	Processes   *int        `json:"processes,omitempty"`
	Interrupted string      `json:"interrupted,omitempty"` // the signal, when one stopped the run
	Kill        *killReport `json:"kill,omitempty"`
	// In-process kinds: fairness.go.
	Fairness *fairnessJSON `json:"fairness,omitempty"`
}

// writeJSON prints the report as one line of JSON.
func (r *counterReport) writeJSON(w io.Writer) error {
	j := reportJSON{
		Lock:              r.lock,
		Workers:           r.workers,
		Additions:         r.total(),
		Value:             r.value,
		Work:              r.work,
		Expected:          r.expected,
		Actual:            r.actual,
		OwnerViolations:   r.ownerViolations,
		ThroughputMacqS:   r.throughput(),
		SlowPathFraction:  r.slowPath,
		StatsAcquisitions: r.statsAcquisitions,
		DurationS:         r.elapsed.Seconds(),
		Result:            r.result(),
		Failures:          r.failures(),
	}
	if r.duration == 0 {
		j.Iters = &r.iters
	}
	if r.procs > 0 {
		j.Processes = &r.procs
	}
	j.Interrupted = r.interrupted
	if r.reads != nil {
		j.Reads, j.ReadViolations = r.reads, &r.readViolations
	}
	j.Kill = r.killed
	if r.fair != nil {
		j.Fairness = r.fair.json()
	}
	return writeJSONLine(w, j)
}

// ---- shared by the stream kinds (ring, queue, shared-ring) ----

// streamFailures words the consumer's counts that every stream kind
// checks, in the order its result line gives them; unit names what moves
// ("items", "messages").
func streamFailures(unit string, outOfOrder, dups, lost int64) []string {
	var why []string
	if outOfOrder > 0 {
		why = append(why, fmt.Sprintf("%d %s out of order", outOfOrder, unit))
	}
	if dups > 0 {
		why = append(why, fmt.Sprintf("%d duplicated", dups))
	}
	if lost > 0 {
		why = append(why, fmt.Sprintf("%d lost", lost))
	}
	return why
}

// stalledFailure is the failure of a stream in which no unit ("item",
// "message") moved for stallTimeout.
func stalledFailure(unit string) string {
	return fmt.Sprintf("stalled: no %s moved for %v (a side asleep that nobody woke?)", unit, stallTimeout)
}

// writeStreamCounts prints the consumer's counts of a stream kind.
func writeStreamCounts(w io.Writer, received, outOfOrder, dups, lost int64) {
	fmt.Fprintf(w, "Received: %d\n", received)
	fmt.Fprintf(w, "Out of order: %d\n", outOfOrder)
	fmt.Fprintf(w, "Duplicates: %d\n", dups)
	fmt.Fprintf(w, "Lost: %d\n", lost)
}

// endOfStream turns closed, the error a stream's Pop returns once it is
// closed and drained, into nil: the end of the stream, not a failure.
func endOfStream(err, closed error) error {
	if errors.Is(err, closed) {
		return nil
	}
	return err
}
