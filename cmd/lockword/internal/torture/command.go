package torture

// The torture subcommand: hammer a lock from many goroutines and check,
// inside the critical section, that it really excludes. The experiment is
// the classic one (a plain counter that loses updates without mutual
// exclusion) plus an owner slot set on entry and verified on exit, as the
// Linux kernel's locktorture and Go's own HammerMutex do. A deliberately
// broken kind, none, proves that the checks can fail.
//
// This file holds the command: its flags, their validation and the run of
// the chosen kinds with its exit status. The rest of the package, by
// concern: help.go (the help), registry.go (the kinds), hammer.go and
// section.go (in-process workers, the critical section and its checks),
// report.go (the report interface, the counter's report), supervisor.go
// (the one process supervisor), worker.go (the worker processes' entry),
// procs*.go and kill.go (the shared kinds across processes), and one
// kinds_*.go file per family of kinds.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/cmd/lockword/internal/interrupt"
	"github.com/lockword/lockword/lockprof"
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
	// (procs.go); kill makes a supervisor SIGKILL them at random,
	// kills times.
	procs int
	kill  bool
	kills int
	// progress is where progress bars go: stderr when it is a terminal,
	// nil when bars must not be drawn (piped output, tests).
	progress io.Writer
	// interrupt reports SIGINT, SIGTERM and SIGHUP during -procs runs, which
	// then stop early (package interrupt); nil for in-process runs, which a
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
// when one failed or could not run, exitUsage for a usage error or a kind
// that this machine cannot set up (no C compiler for the C kinds, -etcd
// endpoints that do not answer), and
// 128 + the signal for a -procs run stopped by SIGINT, SIGTERM or SIGHUP.
func Command(args []string, stdout, stderr io.Writer) int {
	opts, status, ok := parseTorture(args, stdout, stderr)
	if !ok {
		return status
	}
	for _, k := range opts.kinds {
		if k.prepare == nil {
			continue
		}
		if err := k.prepare(); err != nil {
			fmt.Fprintf(stderr, "lockword torture: %s: %s\n", k.name, errText(err))
			return exitUsage
		}
	}
	if err := checkEtcdReachable(&opts.cfg, opts.kinds); err != nil {
		fmt.Fprintf(stderr, "lockword torture: %s\n", errText(err))
		return exitUsage
	}
	if opts.cfg.procs > 0 {
		// Worker processes and a region file to clean up: catch SIGINT,
		// SIGTERM and SIGHUP, stop the run, report what it did.
		in := interrupt.Catch()
		defer in.Stop()
		opts.cfg.interrupt = in
	}
	if opts.profile != "" {
		defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(ContentionProfileRate))
	}
	var deadlocks *deadlockWatch
	if opts.deadlock {
		var err error
		if deadlocks, err = startDeadlockWatch(); err != nil {
			fmt.Fprintf(stderr, "lockword torture: -deadlock: %v\n", err)
			return exitUsage
		}
		// stderr, so that -json keeps stdout one JSON document per kind.
		fmt.Fprintln(stderr, deadlockScopeNote)
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
	if opts.profile != "" {
		if err := WriteContentionProfile(opts.profile); err != nil {
			fmt.Fprintf(stderr, "lockword torture: %v\n", err)
			failed = true
		}
	}
	if deadlocks != nil && deadlocks.stop(stderr) {
		failed = true
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
	// profile is the file to write the contention profile to ("": none).
	profile string
	// deadlock: run with deadlock detection on; a report fails the run.
	deadlock bool
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
	profile  *string
	deadlock *bool
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
		profile: fs.String("contentionprofile", "",
			"write this process's contention profile (pprof format, one wait\n"+
				"in "+strconv.Itoa(ContentionProfileRate)+" sampled; see lockprof) to `FILE` after the run,\n"+
				"for `go tool pprof -top FILE`. With -procs, the worker processes' waits are not in it."),
		deadlock: fs.Bool("deadlock", false,
			"run with lockword's deadlock detection on (in a binary built with\n"+
				"-tags lockword_deadlock): a lock-order inversion or deadlock it\n"+
				"reports fails the run. Detection sees the goroutines of one process;\n"+
				"a deadlock cycle across processes on shared locks is found by\n"+
				"'lockword inspect REGION', not here."),
		etcd: defineEtcdFlags(fs),
	}
}

// parseTorture parses and validates the torture command line. When ok is
// false the caller must exit with status: help was printed (exitOK) or a
// usage error was reported on stderr (exitUsage).
func parseTorture(args []string, stdout, stderr io.Writer) (opts tortureOptions, status int, ok bool) {
	fs := flag.NewFlagSet("lockword torture", flag.ContinueOnError)
	// The flag package prints its parse errors without the command's
	// name, and calls Usage both for -help and after an error: it prints
	// nothing, and we print the error with our prefix, the full help
	// (to stdout, when asked for) or only a hint after an error, so that
	// the error stays visible.
	fs.SetOutput(io.Discard)
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
		return usageErr("%v", err)
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
	if err := CheckContentionProfile(*f.profile); err != nil {
		return usageErr("%v", err)
	}
	opts = tortureOptions{cfg: cfg, kinds: chosen, json: *f.json, profile: *f.profile, deadlock: *f.deadlock}
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

// ContentionProfileRate is the sampling rate of -contentionprofile (one
// contended acquisition in this many), as lockword bench uses it too.
const ContentionProfileRate = 10

// CheckContentionProfile makes sure, before a run, that the file of
// -contentionprofile can be written (creating it empty): a bad path is a
// usage error at once, not a failure after the whole run. "" is none.
func CheckContentionProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("-contentionprofile: %w", err)
	}
	return f.Close()
}

// WriteContentionProfile writes the contention profile to path (for
// torture's and bench's -contentionprofile).
func WriteContentionProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("contention profile: %w", err)
	}
	if err := lockprof.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("contention profile: %w", err)
	}
	return f.Close()
}
