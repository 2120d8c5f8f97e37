package torture

// The torture subcommand: hammer a lock from many goroutines and check,
// inside the critical section, that it really excludes. The experiment is
// the classic one (a plain counter that loses updates without mutual
// exclusion) plus an owner slot set on entry and verified on exit, as the
// Linux kernel's locktorture and Go's own HammerMutex do. A deliberately
// broken kind, none, proves that the checks can fail.
//
// Layout of this file: flags and help; the registry of lock kinds; hammer,
// the harness that runs workers and measures them; the generic runner for
// any sync.Locker and its critical sections; the report.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/cmd/lockword/internal/interrupt"
)

// Defaults reproduce the classic experiment: 16 workers each add 5 to a
// shared counter 100000 times, so a correct lock ends at 8000000.
const (
	defaultWorkers = 16
	defaultIters   = 100000
	defaultValue   = 5
)

// Limits on flag values. They exist to turn a typo into a usage error
// rather than an out-of-memory crash or an overflowing counter.
const (
	maxWorkers = 100000    // each worker is a goroutine with its own counters
	maxValue   = 1000000   // keeps even very long -duration runs far from int64 overflow
	maxWork    = 100000000 // steps of about a nanosecond each, per acquisition
	maxProcs   = 512       // worker processes; the region's process table has 1024 slots
)

// config is one torture run's parameters, validated by parseTorture. Every
// kind's run function receives it; a kind that needs more (a reader count,
// a process count) adds a field here and a flag in defineTortureFlags.
type config struct {
	workers  int
	iters    int64         // additions per worker; unused when duration > 0
	value    int64         // added to the counter by each addition
	work     int           // busy work inside the critical section: 0..work steps, drawn per acquisition
	duration time.Duration // > 0: workers run until it elapses instead of counting
	items    int64         // -items: for kinds that move items (ring) or read (seqlock); 0: the kind's default
	// procs > 0 runs the workers in that many processes sharing a region
	// (torture_procs.go); kill makes a supervisor SIGKILL them at random,
	// kills times.
	procs int
	kill  bool
	kills int
	// progress is where progress bars go: stderr when it is a terminal,
	// nil when bars must not be drawn (piped output, tests).
	progress io.Writer
	// interrupt reports SIGINT, SIGTERM and SIGHUP during -procs runs, which
	// then stop early (interrupt.go); nil for in-process runs, which a
	// signal ends at once: they leave nothing behind.
	interrupt *interrupt.Signals
	// etcd holds the etcd kinds' flags (kinds_etcd.go).
	etcd etcdConfig
}

// timed reports whether the run is bounded by time rather than a count.
func (c *config) timed() bool { return c.duration > 0 }

// Command implements "lockword torture": args are the arguments after the
// command's name. It prints the reports on stdout, errors on stderr, and
// returns lockword's exit status: exitOK when every kind passed, exitFail
// when one failed or could not run, exitUsage for a usage error, and
// 128 + the signal for a -procs run stopped by SIGINT, SIGTERM or SIGHUP.
func Command(args []string, stdout, stderr io.Writer) int {
	opts, status, ok := parseTorture(args, stdout, stderr)
	if !ok {
		return status
	}
	if opts.cfg.procs > 0 {
		// Worker processes and a region file to clean up: catch SIGINT,
		// SIGTERM and SIGHUP, stop the run, report what it did.
		in := interrupt.Catch()
		defer in.Stop()
		opts.cfg.interrupt = in
	}
	failed, printed := false, 0
	for _, k := range opts.kinds {
		if opts.cfg.interrupt.Interrupted() {
			break // the kinds not yet run are not run
		}
		r, err := k.run(&opts.cfg)
		if err != nil {
			// The run could not even be set up: not a verdict on the
			// lock, but not a pass either.
			fmt.Fprintf(stderr, "lockword torture: %s: %s\n", k.name, errText(err))
			failed = true
			continue
		}
		if !r.passed() {
			failed = true
		}
		if opts.json {
			if err := r.writeJSON(stdout); err != nil {
				fmt.Fprintf(stderr, "lockword torture: %v\n", err)
				return exitFail
			}
			continue
		}
		if printed > 0 {
			fmt.Fprintln(stdout)
		}
		r.writeText(stdout)
		printed++
	}
	if in := opts.cfg.interrupt; in.Interrupted() {
		fmt.Fprintf(stderr, "lockword torture: interrupted by %s: worker processes stopped, region released\n", in.Name())
		return in.ExitStatus()
	}
	if failed {
		return exitFail
	}
	return exitOK
}

// tortureOptions is a parsed torture command line.
type tortureOptions struct {
	cfg   config
	kinds []*kind
	json  bool
}

// tortureFlagValues holds the torture flags as defined on a FlagSet.
type tortureFlagValues struct {
	lock     *string
	workers  *int
	iters    *int64
	value    *int64
	work     *int
	duration *time.Duration
	items    *int64
	json     *bool
	procs    *int
	kill     *bool
	kills    *int
	etcd     etcdFlagValues
}

// defineTortureFlags defines the torture flags on fs, so that the parser
// and the help share one list and cannot drift apart.
func defineTortureFlags(fs *flag.FlagSet) tortureFlagValues {
	return tortureFlagValues{
		lock: fs.String("lock", "all",
			"the `KINDS` to torture: one name, a comma-separated list, or all\n"+
				"(every kind marked * above). Each kind gets a fresh lock."),
		workers: fs.Int("workers", defaultWorkers,
			"`N` goroutines hammer the lock at once (1.."+strconv.Itoa(maxWorkers)+")."),
		iters: fs.Int64("iters", defaultIters,
			"`N` additions (lock, add, unlock) per worker, at least 1.\n"+
				"Cannot be combined with -duration."),
		value: fs.Int64("value", defaultValue,
			"`V` added to the counter by each addition (1.."+strconv.Itoa(maxValue)+")."),
		work: fs.Int("work", 0,
			"random busy work inside the critical section: 0..`N` steps, drawn\n"+
				"afresh for each acquisition, so holding times and timings vary\n"+
				"between runs. 0 (the default) holds the lock as briefly as possible."),
		duration: fs.Duration("duration", 0,
			"run for `D` (e.g. 500ms, 10s) instead of a count: each worker adds\n"+
				"until D has elapsed, and Expected is computed from the additions\n"+
				"each worker actually completed. 0 (the default) counts -iters.\n"+
				"Cannot be combined with -iters."),
		items: fs.Int64("items", 0,
			"`N` items through the ring kinds, or reads of the seqlock kinds.\n"+
				"0 (the default) means the kind's own default (see \"Rings and\n"+
				"seqlocks\" below).\n"+
				"Lock kinds ignore it. Cannot be combined with -duration."),
		json: fs.Bool("json", false,
			"print one JSON object per kind, one per line, instead of text."),
		procs: fs.Int("procs", 0,
			"run the workers in `N` processes (this binary re-executed) that\n"+
				"share one region (a memfd they inherit), with the counter and owner slot in it; the\n"+
				"workers are spread evenly over them; -workers defaults to at least\n"+
				"N. Only the shared kinds run\n"+
				"across processes; with -procs, all means shared, and ring means\n"+
				"shared-ring (-procs 2: a producer and a consumer). 0: in-process."),
		kill: fs.Bool("kill", false,
			"with -procs: a supervisor SIGKILLs a random worker process at random\n"+
				"moments (every other kill aimed at the lock's holder) and starts a replacement, until\n"+
				"-kills kills (or -duration). Every update is guarded by an intent\n"+
				"record, so a recovery rolls a half-done update back; the counter\n"+
				"must equal the sum of every worker's committed additions."),
		kills: fs.Int("kills", defaultKills,
			"with -kill: stop after `K` kills (unless -duration ends the run first)."),
		etcd: defineEtcdFlags(fs),
	}
}

// parseTorture parses and validates the torture command line. When ok is
// false the caller must exit with status: help was printed (exitOK) or a
// usage error was reported on stderr (exitUsage).
func parseTorture(args []string, stdout, stderr io.Writer) (opts tortureOptions, status int, ok bool) {
	fs := flag.NewFlagSet("lockword torture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The flag package calls Usage both for -help and after an error; we
	// print the full help ourselves (to stdout, when asked for) and only a
	// hint after an error, so that the error stays visible.
	fs.Usage = func() {}
	f := defineTortureFlags(fs)

	usageErr := func(format string, a ...any) (tortureOptions, int, bool) {
		fmt.Fprintf(stderr, "lockword torture: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'lockword torture -help' for usage.")
		return tortureOptions{}, exitUsage, false
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			Help(stdout)
			return tortureOptions{}, exitOK, false
		}
		// fs has already printed the error.
		fmt.Fprintln(stderr, "Run 'lockword torture -help' for usage.")
		return tortureOptions{}, exitUsage, false
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q: torture takes only flags", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	workers, iters, value, work, duration, items := *f.workers, *f.iters, *f.value, *f.work, *f.duration, *f.items
	procs, kill, kills := *f.procs, *f.kill, *f.kills
	if procs < 0 || procs > maxProcs {
		// Checked first: -workers follows -procs below, and its range
		// error would name the wrong flag.
		return usageErr("-procs must be between 0 and %d, got %d", maxProcs, procs)
	}
	if procs > workers && !set["workers"] {
		workers = procs // at least one worker per process
	}
	switch {
	case workers < 1 || workers > maxWorkers:
		return usageErr("-workers must be between 1 and %d, got %d", maxWorkers, workers)
	case iters < 1:
		return usageErr("-iters must be at least 1, got %d", iters)
	case value < 1 || value > maxValue:
		if value < 1 {
			return usageErr("-value must be between 1 and %d, got %d (0 would hide lost updates)", maxValue, value)
		}
		return usageErr("-value must be between 1 and %d, got %d", maxValue, value)
	case work < 0 || work > maxWork:
		return usageErr("-work must be between 0 and %d, got %d", maxWork, work)
	case duration < 0:
		return usageErr("-duration must not be negative, got %v", duration)
	case items < 0:
		return usageErr("-items must not be negative, got %d", items)
	case duration > 0 && items > 0:
		return usageErr("-items and -duration cannot be combined: a run is bounded either by a count of items or by time")
	case duration > 0 && set["iters"]:
		return usageErr("-iters and -duration cannot be combined: a run is bounded either by a count of additions per worker (-iters) or by time (-duration)")
	case duration == 0 && !fitsCounter(int64(workers), iters, value):
		return usageErr("-workers × -iters × -value = %d × %d × %d does not fit the 64-bit counter", workers, iters, value)
	}
	switch {
	case procs < 0 || procs > maxProcs:
		return usageErr("-procs must be between 0 and %d, got %d", maxProcs, procs)
	case procs > 0 && procs > workers:
		return usageErr("-procs %d needs at least as many -workers, got %d", procs, workers)
	case kill && procs < 1:
		return usageErr("-kill needs -procs N: it kills worker processes")
	case kill && set["iters"]:
		return usageErr("-kill runs until -kills kills (or -duration), not a count of -iters")
	case set["kills"] && !kill:
		return usageErr("-kills needs -kill: it is the number of kills of a -kill run (got -kills %d without -kill)", kills)
	case kills < 1:
		return usageErr("-kills must be at least 1, got %d", kills)
	}
	etcdCfg, msg := f.etcd.parse(set, procs)
	if msg != "" {
		return usageErr("%s", msg)
	}
	spec := *f.lock
	if procs > 0 && spec == "all" {
		spec = "all-procs"
	}
	chosen, err := parseKinds(spec)
	if err != nil {
		return usageErr("%v", err)
	}
	for i, k := range chosen {
		// A kind with a form across processes (ring: shared-ring) turns
		// into it with -procs.
		if twin := lookupKind(k.acrossProcs); procs > 0 && twin != nil {
			chosen[i], k = twin, twin
		}
		switch {
		case procs > 0 && !k.procs && !k.both:
			return usageErr("kind %s runs in one process; with -procs choose among: %s", k.name, procKindNames())
		case procs == 0 && k.procs:
			return usageErr("kind %s runs across processes: give -procs N", k.name)
		}
	}

	cfg := config{
		workers:  workers,
		iters:    iters,
		value:    value,
		work:     work,
		duration: duration,
		items:    items,
		procs:    procs,
		kill:     kill,
		kills:    kills,
		etcd:     etcdCfg,
	}
	for _, k := range chosen {
		if k.usage == nil {
			continue
		}
		if err := k.usage(&cfg); err != nil {
			return usageErr("%s: %v", k.name, err)
		}
	}
	opts = tortureOptions{cfg: cfg, kinds: chosen, json: *f.json}
	if isTerminal(stderr) {
		opts.cfg.progress = stderr
	}
	return opts, exitOK, true
}

// fitsCounter reports whether workers × iters × value, all positive, fits
// an int64, so that Expected can be computed and reached exactly.
func fitsCounter(workers, iters, value int64) bool {
	return workers <= math.MaxInt64/iters && workers*iters <= math.MaxInt64/value
}

// Help writes the torture help: what the experiment does, the lock
// kinds (from the registry, so new kinds appear by themselves), every flag
// (from defineTortureFlags), the output, exit statuses and examples.
func Help(w io.Writer) {
	fmt.Fprintf(w, `Usage: lockword torture [flags]

Torture hammers each chosen lock from many goroutines (workers) and checks,
inside every critical section, that the lock excludes. Each worker, holding
the lock:
  1. checks that the owner slot, a plain int, is 0 (free), and writes its
     id (1..workers) there;
  2. reads a plain, non-atomic int64 counter into a local, does the optional
     busy work (-work), and writes back the local plus -value: a
     read-modify-write that loses additions unless the lock excludes;
  3. checks that the owner slot still holds its id, and clears it to 0.
A failed check counts an owner-slot violation. A lock passes when the
counter ends at workers × additions × value (Expected) and no owner-slot
check failed. With no flags, every kind in 'all' runs the classic
experiment: %d workers × %d additions × value %d.

Lock kinds (-lock), where all means every kind marked *:
`, defaultWorkers, defaultIters, defaultValue)
	listKinds := func(procs bool) {
		width := 0
		for _, k := range kinds {
			if k.procs == procs {
				width = max(width, len(k.name))
			}
		}
		for _, k := range kinds {
			if k.procs != procs {
				continue
			}
			mark := " "
			if k.inAll {
				mark = "*"
			}
			fmt.Fprintf(w, "  %-*s %s  %s\n", width, k.name, mark, k.desc)
		}
	}
	listKinds(false)
	fmt.Fprint(w, "\nLock kinds across processes (need -procs N; there, all means those marked *):\n")
	listKinds(true)
	fmt.Fprint(w, "\nFlags:\n")
	fs := flag.NewFlagSet("lockword torture", flag.ContinueOnError)
	defineTortureFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		placeholder, usage := flag.UnquoteUsage(f)
		if placeholder == "value" { // a bool flag: nothing to fill in
			placeholder = ""
		}
		fmt.Fprintln(w, "  "+strings.TrimSpace("-"+f.Name+" "+placeholder))
		for line := range strings.SplitSeq(usage, "\n") {
			fmt.Fprintf(w, "        %s\n", line)
		}
		if f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" && f.DefValue != "" {
			fmt.Fprintf(w, "        (default %s)\n", f.DefValue)
		}
	})
	for _, section := range kindHelp {
		fmt.Fprint(w, "\n"+section)
	}
	fmt.Fprint(w, `
Counting or timing:
  By default each worker makes exactly -iters additions, and the report
  says "Additions per worker: N". With -duration D the workers add until D
  has elapsed; each completes as many additions as it can, the report says
  "Duration: D" and "Additions per worker: varies, min A, max B (T total)",
  and Expected is T × value. Either way every addition is one acquisition.

Output (text), per kind, a blank line between kinds:
  Lock, Workers, [Duration,] Additions per worker, Value per addition,
  [Busy work, when -work is set,] Expected, Actual, Owner-slot violations,
  Throughput (acquisitions per wall-clock second, in millions, from the
  moment the workers are released until the last one finishes), Slow path
  (the share of acquisitions that found the lock held, from the lockword
  lock's Stats; n/a for kinds that keep none), the fairness block below
  (in-process kinds except none), and Result: PASS, or FAIL with the
  reasons.

Fairness (in-process kinds), up to three lines:
  Fairness: each worker's acquisitions over the window in which all of
    them contend (from the moment the last one first reaches the lock to
    the first one's finish, or to the end of a -duration run), min, max
    and max/min, "even", or "uneven" when max > 2×min, as the kernel's
    locktorture flags starvation. Uneven is information, not a failure:
    mutex, spin and sync are unfair on purpose. The line appears only
    when the window held at least 100 acquisitions per worker on average:
    with fewer (a fast lock whose first worker is done before the last
    one starts), who started first decides the shares, not the lock.
  Wait latency: p50, p99 and max of the time from calling Lock to
    holding the lock, timed on one acquisition in 16 per worker.
  Starvation check: for 200ms one goroutine re-locks in a tight loop
    while another locks repeatedly; the other's longest wait, and how
    often the re-locking goroutine acquired during that wait (overtakes).
    For ticket it must stay under 10ms, or the run fails: counted less the
    time the two goroutines' threads were runnable but had no CPU (the
    kernel's per-thread schedstat; a loaded 2-core host can keep a thread
    waiting for a CPU over 10ms, which is not the lock's doing, while a
    lock that makes its waiter wait keeps it asleep, which counts in
    full). An attempt that reaches 10ms is run again, up to 3 attempts,
    and the last decides. For the others it is information. (rw: a writer re-locks, a reader waits; rw-read-mostly:
    a reader re-locks, a writer waits; cond: a goroutine signals, another
    waits for a Signal.)
  rw kinds add the reads and writes made and the reader-writer overlaps
  seen (a reader that met a writer inside; any fails the run); every
  acquisition adds -value (a reader to its own tally), so Expected is as
  for the other kinds. cond: -workers producers each put -iters items
  through a queue of capacity 1 (two Conds, Signal only) and as many
  consumers take them; an addition is one item, and the shares are the
  items each consumer took.

Output (-json), one object per kind and line, with the fields
  lock, workers, iters (null with -duration), additions (total), value,
  work, expected, actual, owner_violations, throughput_macq_s,
  slow_path_fraction (0..1, null when the lock keeps no statistics),
  stats_acquisitions (the lock's own count of acquisitions, null without
  statistics; it must equal additions, or the run fails), duration_s
  (measured wall time), result ("PASS", "FAIL", or "INTERRUPTED": see
  below), failures (the reasons, only when it failed), interrupted (the
  signal that stopped a -procs run early, only then), and, for
  in-process kinds, fairness:
  {shares, shares_at, min_share, max_share, max_min (null when a worker
  made none), judged (whether the shares mean something: see
  Fairness), flagged (judged and uneven), wait_sampled_every,
  wait_samples, wait_p50_ns, wait_p99_ns, wait_max_ns, starvation: {what,
  max_wait_ns, counted_max_wait_ns (the longest wait less the threads'
  time without a CPU: what the limit applies to), sched_delay_ns (that
  time), overtakes, earlier_max_wait_ns (the counted waits of attempts
  that reached the limit and were run again), acquisitions, limit_ns
  (null: information only), passed},
  notes}.

Across processes (-procs N):
  The shared kinds run the same experiment with the workers spread over N
  processes (this binary, re-executed) that map one region, where the
  counter, the owner slot and each worker's committed total live. The
  region is an anonymous memory file (a sealed memfd) that the workers
  inherit: it has no path and vanishes with the last process, so nothing
  is left in /dev/shm even if the supervisor is killed. The report adds "Processes: N" after Workers. Every update
  first writes an intent record (whose update, the counter and the
  worker's total before it) and clears it after.
  With -kill, a supervisor SIGKILLs a worker process every few
  milliseconds, and starts a replacement that carries on with the same
  worker ids. Every other kill is aimed at the process holding the lock
  (found through the owner slot and stopped inside its critical section,
  so the kill lands mid-update); the others pick a process at random,
  which holds the lock too as often as the lock is busy, so "of the
  lock's holder" is at least about half of the kills (shared: 60-80%). The next acquirer
  gets the lock with ErrOwnerDead, rolls a half-done update back from the
  intent record, and marks the lock consistent. The report then adds
  Kills (and how many hit the holder), Recoveries (each kill of a holder
  must be recovered exactly once; more would mean a live holder was
  robbed), Recovery latency (kill to repaired lock) and Detection latency
  (kill to a waiter's ErrOwnerDead): p50, p99 and max over the timed
  recoveries; a waiter checks the holder every 10 ms, so on an idle host
  both sit near 10 ms, and on a busy one they add the wait for a CPU.
  Then Hangs (no progress for 10 s, or a recovery that never came: must
  be 0). Expected is the sum of every worker's committed additions; the
  counter must match it exactly. -json adds processes and a kill object:
  {kills, holder_kills, recoveries, rolled_back,
  max_detection_latency_ms, max_recovery_latency_ms, hangs,
  detection_latency_ms and recovery_latency_ms: {samples, p50_ms, p99_ms,
  max_ms}, worker_errors, robbed}.
  SIGINT (Ctrl-C), SIGTERM or SIGHUP stops a -procs run early: the
  supervisor tells the workers to stop between updates (they run in a
  process group of their own and ignore these signals), waits for them
  (killing any that have not stopped within 10 s, a hang, or at once on
  a second signal, after which it recovers the lock as a worker would),
  releases the region, prints the report so far with "Interrupted:
  by SIGINT after T" and the additions made until then, and exits 128 +
  the signal: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP). The kernel
  kills the workers if the supervisor itself is killed (SIGKILL).
  Its result is INTERRUPTED, or FAIL if a check already failed. Kinds not
  yet started are skipped. In-process runs just end, leaving nothing.

Progress:
  A kind that runs longer than about a second shows a progress bar on
  stderr, when stderr is a terminal; the bar is erased before the kind's
  report is printed. Nothing is drawn when stderr is not a terminal. It
  shows the share of the run done, by what bounds it (acquisitions of
  -iters, items, kills of a -kill run, or time with -duration: with both
  -kills and -duration, whichever is nearer its end), the rate, and the
  time left (for a count, assuming the rate so far holds).

Exit status:
  0    every kind passed
  1    at least one kind failed (lost additions or owner-slot violations)
  2    usage error: unknown flag or lock kind, bad flag value, stray argument
  130  a -procs run was interrupted by SIGINT (143: SIGTERM, 129: SIGHUP),
       whatever the partial result: see Across processes

The none kind must fail: it shows that the checks catch a lock that does
not exclude. It needs at least 2 workers to fail (one worker cannot race),
and yields the processor in the middle of its update so that it fails even
with few additions on few cores.

Examples:
  lockword torture
  lockword torture -lock spin -workers 64 -iters 1000000
  lockword torture -lock mutex,sync -work 200 -duration 5s
  lockword torture -lock none                  # FAIL, exit status 1
  lockword torture -procs 4                    # the shared kind, 4 processes
  lockword torture -procs 4 -kill -kills 1000  # owner death, 1000 times
  lockword torture -procs 4 -lock shared-ticket -kill  # the same, FIFO lock
  lockword torture -lock ring -procs 2         # the shared ring, 10,000,000 messages
  lockword torture -json | jq -c '{lock, throughput_macq_s}'
`)
}

// A kind is one lock that torture can hammer, with what the help says
// about it. Kinds live in a registry filled by the kinds_*.go files.
type kind struct {
	name  string // the -lock name: lower case, no commas
	desc  string // one line for the help
	inAll bool   // whether -lock all, the default, includes it
	// procs marks a kind that runs across processes (-procs N); -lock all
	// with -procs means the procs kinds marked inAll, and without it the
	// others.
	procs bool
	// both marks a kind that runs in one process and, with -procs N,
	// across processes (the etcd kinds); it is listed with the in-process
	// kinds.
	both bool
	// acrossProcs names the kind that -procs runs instead of this
	// in-process one (ring: shared-ring), so that "-lock ring -procs 2"
	// works as the issue writes it; "" for none.
	acrossProcs string
	// usage, when set, checks the flags that only this kind constrains
	// (the shared ring needs exactly -procs 2): an error is a usage error,
	// reported before anything runs, with exit status 2.
	usage func(cfg *config) error
	// run tortures one fresh lock of this kind under cfg and reports what
	// it found. An error means the run could not be set up (a shared
	// mapping that failed, say), not that the lock failed: a lock that
	// failed is a report whose result is FAIL.
	run func(cfg *config) (report, error)
}

// kinds is the registry, in registration order: the order of the help and
// of -lock all.
var kinds []*kind

// kindHelp holds help sections that kinds files add (from init) for kinds
// whose experiment or output differs from the locked counter's. Each is
// printed after the flags, and should end with a newline.
var kindHelp []string

// register adds kinds to the registry. The kinds_*.go files call it from
// init, so kinds appear in the order of those files' names (Go runs init
// functions in the order files are given to the compiler, which the go
// command sorts) and, within a file, in the order of the arguments.
func register(ks ...kind) {
	for _, k := range ks {
		if k.name == "" || k.name == "all" || strings.ContainsAny(k.name, ", ") || k.run == nil {
			panic(fmt.Sprintf("lockword: bad torture kind %q", k.name))
		}
		if lookupKind(k.name) != nil {
			panic(fmt.Sprintf("lockword: torture kind %q registered twice", k.name))
		}
		kinds = append(kinds, &k)
	}
}

// lookupKind returns the registered kind called name, or nil.
func lookupKind(name string) *kind {
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	return nil
}

// parseKinds turns a -lock value into kinds: names separated by commas,
// where all stands for every kind marked inAll. A kind named twice runs
// once, at its first position.
func parseKinds(spec string) ([]*kind, error) {
	var out []*kind
	seen := map[*kind]bool{}
	add := func(k *kind) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for name := range strings.SplitSeq(spec, ",") {
		name = strings.TrimSpace(name)
		switch k := lookupKind(name); {
		case name == "all", name == "all-procs":
			for _, k := range kinds {
				if k.inAll && k.procs == (name == "all-procs") {
					add(k)
				}
			}
		case k != nil:
			add(k)
		case name == "":
			return nil, fmt.Errorf("-lock %q names an empty lock kind (valid kinds: %s)", spec, kindNames())
		default:
			return nil, fmt.Errorf("unknown lock kind %q in -lock (valid kinds: %s)", name, kindNames())
		}
	}
	return out, nil
}

// kindNames lists the valid -lock names for error messages.
func kindNames() string {
	names := make([]string, 0, len(kinds)+1)
	for _, k := range kinds {
		names = append(names, k.name)
	}
	return strings.Join(append(names, "all"), ", ")
}

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
	spec := runProgress(cfg, label, start, int64(cfg.workers)*cfg.iters, func() int64 {
		var n int64
		for i := range slots {
			n += slots[i].done.Load()
		}
		return n
	}, "")
	close(gate)
	if cfg.timed() {
		timer := time.AfterFunc(cfg.duration, func() { stop.Store(true) })
		defer timer.Stop()
	}
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

// ownerFree is the owner slot's value when no worker is inside; otherwise
// the slot holds the 1-based id of the worker inside.
const ownerFree = 0

// An arena is the data the critical section protects. counter and owner
// are plain ints on purpose: an atomic counter would hide the lost updates
// that prove a lock broken. Only violations, which is counted by whoever
// finds a violation, whether or not the lock works, is atomic.
type arena struct {
	counter    int64  // sum of every worker's additions
	owner      int    // ownerFree, or the id of the worker inside
	sink       uint64 // busy work's result, kept so that the compiler cannot drop the work
	violations atomic.Int64
}

// section is the critical section of the real locks. The race detector
// instruments it, so under -race it checks the lock's happens-before edges
// as well as our invariants. sectionUnprotected must stay identical to it
// apart from the go:norace directive (TestSectionsAgree checks that they
// compute the same). yield calls runtime.Gosched in the middle of the
// read-modify-write (see sectionUnprotected); real kinds pass false.
func (a *arena) section(id int, value int64, steps int, yield bool) {
	if a.owner != ownerFree {
		// Someone is inside, or left without clearing the slot.
		a.violations.Add(1)
	}
	a.owner = id
	v := a.counter // read...
	if yield {
		runtime.Gosched()
	}
	// busyWork is never inlined: besides lengthening the hold, the call
	// makes the compiler assume memory changed, so the owner check below
	// reloads the slot rather than reusing the id it just stored.
	a.sink = busyWork(a.sink, steps)
	a.counter = v + value // ...write back: additions made since the read are lost
	if a.owner != id {
		// Someone else entered while we were inside.
		a.violations.Add(1)
	}
	a.owner = ownerFree
}

// sectionUnprotected is section for locks that do not exclude: the none
// kind. Its unsynchronized accesses to the arena are the point of that kind,
// and the race detector would report them and fail every -race run, so the
// go:norace directive compiles this copy without race instrumentation
// (it works in any package, not only the runtime; the compiler also never
// inlines a go:norace function into an instrumented caller). The real
// kinds use the instrumented copy, section, so -race still checks them.
// The body must stay identical to section's.
//
// The none kind passes yield=true: runtime.Gosched between the read and the
// write-back widens the window, exactly as a holder preempted inside its
// critical section would, so that the lost updates and owner-slot
// violations show up reliably even with few additions on two cores, or on
// one.
//
//go:norace
func (a *arena) sectionUnprotected(id int, value int64, steps int, yield bool) {
	if a.owner != ownerFree {
		a.violations.Add(1)
	}
	a.owner = id
	v := a.counter
	if yield {
		runtime.Gosched()
	}
	a.sink = busyWork(a.sink, steps)
	a.counter = v + value
	if a.owner != id {
		a.violations.Add(1)
	}
	a.owner = ownerFree
}

// busyWork stands for the work a real critical section does: steps rounds
// of a 64-bit linear congruential generator on x, returned so that the
// compiler cannot drop them. It is never inlined, so that a call to it is a
// point where the compiler must assume memory changed (see section).
//
//go:noinline
func busyWork(x uint64, steps int) uint64 {
	for range steps {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

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
	// slowPath is the lock's Stats().SlowPathFraction(), nil when the
	// lock keeps no statistics; noStats then says why.
	slowPath *float64
	noStats  string
	// statsAcquisitions is the lock's own count of acquisitions, nil
	// without statistics. Statistics are enabled before the run starts,
	// so it must equal the workers' total: a mismatch fails the run.
	statsAcquisitions *uint64

	// procs is the number of worker processes (0: in-process); killed is
	// what a -kill run's supervisor saw (torture_procs.go).
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
	fmt.Fprintf(w, "Throughput: %.1f M acquisitions/s\n", r.throughput())
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
	Lock              string   `json:"lock"`
	Workers           int      `json:"workers"`
	Iters             *int64   `json:"iters"` // null in a timed run: it varies per worker
	Additions         int64    `json:"additions"`
	Value             int64    `json:"value"`
	Work              int      `json:"work"`
	Expected          int64    `json:"expected"`
	Actual            int64    `json:"actual"`
	OwnerViolations   int64    `json:"owner_violations"`
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
	j.Kill = r.killed
	if r.fair != nil {
		j.Fairness = r.fair.json()
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
