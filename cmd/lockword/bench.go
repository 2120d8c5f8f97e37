package main

// lockword bench: each lock against its peer, measured here and now. The
// harness (interleaving, histograms, the table, the charts) lives in
// internal/bench; this file holds the flags, the help and the exit status.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/cmd/lockword/internal/bench"
	"github.com/lockword/lockword/cmd/lockword/internal/interrupt"
	"github.com/lockword/lockword/cmd/lockword/internal/torture"
)

// benchSummary is bench's line in the top-level help.
const benchSummary = "measure every lock against its peer on this machine; table, JSON, charts"

// A cross-process bench child runs and exits here, before main (or a test
// binary's tests) starts.
func init() { bench.ChildMain() }

// Limits on the flags: past them a run is a mistake, not a measurement.
const (
	maxBenchGoroutines = 4096
	maxBenchCount      = 1000
	minBenchDuration   = time.Millisecond
	maxBenchDuration   = time.Hour
)

// benchOptions is a validated bench command line.
type benchOptions struct {
	cfg    bench.Config
	json   bool
	charts []string // files to draw the charts into
	note   string
	// profile is the file to write the contention profile to ("": none).
	profile string
}

type benchFlagValues struct {
	kinds, goroutines, section, read, chart, note *string
	profile                                       *string
	duration                                      *time.Duration
	count                                         *int
	procs, json                                   *bool
}

// defineBenchFlags defines the bench flags on fs, so that the parser and
// the help share one list.
func defineBenchFlags(fs *flag.FlagSet) benchFlagValues {
	grid := make([]string, 0, 8)
	for _, n := range bench.DefaultGrid() {
		grid = append(grid, strconv.Itoa(n))
	}
	return benchFlagValues{
		kinds: fs.String("kinds", "all",
			"the `KINDS` to measure, each with its peers: a comma-separated list\n"+
				"of the names above, or all (every in-process kind; with -procs,\n"+
				"shared too; etcd only when named)."),
		goroutines: fs.String("goroutines", strings.Join(grid, ","),
			"the goroutine `COUNTS` of the lock kinds, comma-separated, each\n"+
				"1.."+strconv.Itoa(maxBenchGoroutines)+"; 1 measures the uncontended cost (ns/op). The\n"+
				"default adds NumCPU and 4 x NumCPU on machines with more than 4 CPUs."),
		duration: fs.Duration("duration", 150*time.Millisecond,
			"measure each sample for `D` ("+minBenchDuration.String()+".."+maxBenchDuration.String()+")."),
		count: fs.Int("count", 5,
			"`N` rounds (1.."+strconv.Itoa(maxBenchCount)+"): every sample is taken N times, the\n"+
				"subjects of one goroutine count in an order rotated each round;\n"+
				"the table shows the median and the slowest..fastest round."),
		section: fs.String("section", "empty",
			"the critical section's `SHAPE`: empty, or INSIDE/OUTSIDE as Go\n"+
				"durations (e.g. 100ns/1us, each up to 1ms) of busy work done while\n"+
				"holding the lock and between releasing it and asking again."),
		read: fs.String("read", "99%",
			"the `PERCENT` of reader-writer acquisitions that read (0..100;\n"+
				"the rest write)."),
		procs: fs.Bool("procs", false,
			"also measure the cross-process kinds: shm.Mutex and a one-permit\n"+
				"shm.Semaphore in 2 and 4 processes (this binary re-executed)\n"+
				"against flock(2) on a kept file descriptor and gofrs/flock, and\n"+
				"the semaphore against a POSIX sem_t (a C child built with gcc\n"+
				"when the run starts; without gcc its row is skipped). Linux only."),
		json: fs.Bool("json", false,
			"print one JSON object per sample (JSON Lines) as it is measured,\n"+
				"instead of the table."),
		chart: fs.String("chart", "",
			"also draw the results into `FILE`, an SVG or PNG by its extension\n"+
				"(.svg, .png; several files separated by commas): throughput bars per\n"+
				"goroutine count, each kind beside its peer, and the wait-time\n"+
				"distributions."),
		note: fs.String("note", "",
			"a `TEXT` added to the chart's caption and the table's header, such\n"+
				"as \"machine shared with other jobs\"."),
		profile: fs.String("contentionprofile", "",
			"write this process's contention profile (pprof format, one wait in\n"+
				strconv.Itoa(torture.ContentionProfileRate)+" sampled; see lockprof) to `FILE` after the run, for\n"+
				"`go tool pprof -top FILE`; the sampling slows the run. Cross-process samples' waits are not in it."),
	}
}

// parseBench parses and validates the bench command line. When ok is
// false the caller must exit with status: help was printed (exitOK) or a
// usage error was reported on stderr (exitUsage).
func parseBench(args []string, stdout, stderr io.Writer) (opts benchOptions, status int, ok bool) {
	fs := newFlagSet("lockword bench")
	f := defineBenchFlags(fs)
	usageErr := func(format string, a ...any) (benchOptions, int, bool) {
		fmt.Fprintf(stderr, "lockword bench: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'lockword bench -help' for usage.")
		return benchOptions{}, exitUsage, false
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			benchHelp(stdout)
			return benchOptions{}, exitOK, false
		}
		return benchOptions{}, reportFlagError(fs, err, stderr), false
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q: bench takes only flags", fs.Arg(0))
	}
	kinds, err := bench.ParseKinds(*f.kinds, *f.procs)
	if err != nil {
		return usageErr("-kinds: %v", err)
	}
	grid, err := parseGrid(*f.goroutines)
	if err != nil {
		return usageErr("-goroutines: %v", err)
	}
	sec, err := bench.ParseSection(*f.section)
	if err != nil {
		return usageErr("-section: %v", err)
	}
	read, err := parsePercent(*f.read)
	if err != nil {
		return usageErr("-read: %v", err)
	}
	switch d, n := *f.duration, *f.count; {
	case d < minBenchDuration || d > maxBenchDuration:
		return usageErr("-duration must be between %v and %v, got %v", minBenchDuration, maxBenchDuration, d)
	case n < 1 || n > maxBenchCount:
		return usageErr("-count must be between 1 and %d, got %d", maxBenchCount, n)
	}
	var charts []string
	if *f.chart != "" {
		for c := range strings.SplitSeq(*f.chart, ",") {
			if ext := strings.ToLower(filepath.Ext(c)); ext != ".svg" && ext != ".png" {
				return usageErr("-chart %s: the file name must end in .svg or .png", c)
			}
			charts = append(charts, c)
		}
	}
	if err := torture.CheckContentionProfile(*f.profile); err != nil {
		return usageErr("%v", err)
	}
	return benchOptions{
		cfg: bench.Config{Groups: bench.Groups(kinds, grid, selfExe), Duration: *f.duration,
			Count: *f.count, Section: sec, ReadFraction: read},
		json: *f.json, charts: charts, note: *f.note, profile: *f.profile,
	}, exitOK, true
}

// selfExe is the binary that cross-process samples re-execute: this very
// one, as /proc/self/exe names its inode even if the file at our path is
// replaced (rebuilt) while we run.
const selfExe = "/proc/self/exe"

// probeWritable reports whether a file can be written at path: it opens
// it for writing, creating it if missing, and removes a file it created,
// so that a run that never gets to draw leaves nothing behind.
func probeWritable(path string) error {
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	f.Close()
	if os.IsNotExist(statErr) {
		return os.Remove(path)
	}
	return nil
}

// rounds is "1 round" or "N rounds".
func rounds(n int) string {
	if n == 1 {
		return "1 round"
	}
	return fmt.Sprintf("%d rounds", n)
}

// parseGrid parses -goroutines: distinct counts, each 1..maxBenchGoroutines.
func parseGrid(s string) ([]int, error) {
	var grid []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxBenchGoroutines {
			return nil, fmt.Errorf("%q is not a goroutine count (1..%d)", f, maxBenchGoroutines)
		}
		for _, m := range grid {
			if m == n {
				return nil, fmt.Errorf("%d is given twice", n)
			}
		}
		grid = append(grid, n)
	}
	return grid, nil
}

// parsePercent parses "99" or "99%" into 0.99.
func parsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v < 0 || v > 100 {
		return 0, fmt.Errorf("%q is not a percentage (0..100)", s)
	}
	return v / 100, nil
}

// runBench implements "lockword bench".
func runBench(args []string, stdout, stderr io.Writer) int {
	opts, status, ok := parseBench(args, stdout, stderr)
	if !ok {
		return status
	}
	// A chart that cannot be written fails now, not after the run.
	for _, path := range opts.charts {
		if err := probeWritable(path); err != nil {
			fmt.Fprintf(stderr, "lockword bench: -chart %s: %v\n", path, err)
			fmt.Fprintln(stderr, "Run 'lockword bench -help' for usage.")
			return exitUsage
		}
	}
	machine := bench.ThisMachine()
	cfg := opts.cfg
	header := fmt.Sprintf("lockword bench: %s of %v per sample, section %s, rw reads %g%%\nmachine: %s",
		rounds(cfg.Count), cfg.Duration, cfg.Section, 100*cfg.ReadFraction, machine.String())
	if opts.note != "" {
		header += "\nnote: " + opts.note
	}
	if !opts.json {
		var procStart time.Duration
		for _, g := range cfg.Groups {
			if g.Processes {
				procStart = bench.ProcStart(selfExe)
				break
			}
		}
		est := cfg.Estimate(procStart)
		if est < 10*time.Second {
			est = est.Round(100 * time.Millisecond)
		} else {
			est = est.Round(time.Second)
		}
		fmt.Fprintf(stdout, "%s\nabout %v to go: %d samples\n", header, est, cfg.Samples())
	}

	// Ctrl-C (or SIGTERM, SIGHUP) ends the run after the sample in hand;
	// what was measured is still reported.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := interrupt.Catch()
	defer in.Stop()
	go func() {
		select {
		case <-in.Done():
			cancel()
		case <-ctx.Done():
		}
	}()

	var bar *progressbar.ProgressBar
	if isTerminal(stderr) {
		bar = progressbar.NewOptions(cfg.Samples(), progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetWidth(30), progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowDescriptionAtLineEnd())
		cfg.OnStart = func(i, _ int, label string) {
			bar.Describe(label)
			_ = bar.Set(i)
		}
	}
	enc := json.NewEncoder(stdout)
	var encErr error
	if opts.json {
		cfg.OnSample = func(m bench.Measurement) {
			if encErr == nil {
				encErr = enc.Encode(&m)
			}
		}
	}
	if opts.profile != "" {
		defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(torture.ContentionProfileRate))
	}
	ms, runErr := bench.Run(ctx, &cfg)
	machine.Finish()
	if opts.profile != "" {
		if err := torture.WriteContentionProfile(opts.profile); err != nil {
			fmt.Fprintf(stderr, "lockword bench: %v\n", err)
			runErr = errors.Join(runErr, err)
		}
	}
	if bar != nil {
		_ = bar.Exit()
		_ = bar.Clear()
	}
	interrupted := in.Interrupted()

	sums := bench.Summarize(ms)
	if !opts.json {
		if err := bench.WriteTable(stdout, cfg.Groups, sums); err != nil {
			fmt.Fprintf(stderr, "lockword bench: %v\n", err)
			return exitFail
		}
	}
	if encErr != nil {
		fmt.Fprintf(stderr, "lockword bench: writing JSON: %v\n", encErr)
		return exitFail
	}
	status = exitOK
	switch {
	case interrupted:
		fmt.Fprintf(stderr, "lockword bench: interrupted by %s after %d of %d samples; the table shows those\n",
			in.Name(), len(ms), cfg.Samples())
		status = in.ExitStatus()
	case runErr != nil:
		fmt.Fprintf(stderr, "lockword bench: %v\n", errText(runErr))
		status = exitFail
	}
	if len(opts.charts) > 0 && len(ms) > 0 {
		settings := chartSettings(args, &cfg)
		if interrupted {
			settings += fmt.Sprintf("; interrupted after %d of %d samples", len(ms), cfg.Samples())
		}
		chart := &bench.Chart{Groups: cfg.Groups, Sums: sums, Machine: machine, Settings: settings, Note: opts.note}
		for _, path := range opts.charts {
			if err := writeChart(path, chart); err != nil {
				fmt.Fprintf(stderr, "lockword bench: -chart: %v\n", err)
				return exitFail
			}
			if !opts.json {
				fmt.Fprintf(stdout, "\nchart written to %s\n", path)
			}
		}
	}
	return status
}

// writeChart draws the run into path, an SVG or a PNG by its extension.
func writeChart(path string, c *bench.Chart) error {
	format := bench.SVG
	if strings.EqualFold(filepath.Ext(path), ".png") {
		format = bench.PNG
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = bench.WriteChart(f, c, format, bench.DefaultChartWidthPx, c.DefaultChartHeightPx())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// chartSettings is the chart's caption line: the command line as typed,
// less -chart and -note, and the settings it measured with.
func chartSettings(args []string, cfg *bench.Config) string {
	cmd := "lockword bench"
	if a := measuringArgs(args); len(a) > 0 {
		cmd += " " + shellWords(a)
	}
	return fmt.Sprintf("%s: %s of %v per sample, section %s, rw reads %g%%",
		cmd, rounds(cfg.Count), cfg.Duration, cfg.Section, 100*cfg.ReadFraction)
}

// measuringArgs is args without -chart and -note, which change what is
// drawn but not what is measured: the caption's command line.
func measuringArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if strings.HasPrefix(args[i], "-") && (name == "chart" || name == "note") {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// shellWords joins args as a shell would read them back.
func shellWords(args []string) string {
	ws := make([]string, len(args))
	for i, a := range args {
		ws[i] = a
		if a == "" || strings.ContainsAny(a, " \t'\"$\\") {
			ws[i] = strconv.Quote(a)
		}
	}
	return strings.Join(ws, " ")
}

// benchHelp writes bench's full help.
func benchHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: lockword bench [flags]

Bench measures each of lockword's locks against the lock you would use
instead (its peer) on this machine, in one interleaved run: every round
takes one sample of every subject at every goroutine count, the subjects
of one count back to back in an order rotated each round, so that a
change in the machine's load falls on a kind and its peer alike. The
defaults take about 55 s on 2 cores; Ctrl-C stops after the sample in
hand and prints what was measured so far.

Kinds (each measured with the peers of its group):
`)
	width := 0
	for _, k := range bench.Kinds {
		width = max(width, len(k.Name))
	}
	for _, k := range bench.Kinds {
		fmt.Fprintf(w, "  %-*s %s\n", width, k.Name, k.Desc)
	}
	fmt.Fprint(w, "\nFlags:\n")
	fs := flag.NewFlagSet("lockword bench", flag.ContinueOnError)
	defineBenchFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		placeholder, usage := flag.UnquoteUsage(f)
		if placeholder == "value" {
			placeholder = ""
		}
		fmt.Fprintln(w, "  "+strings.TrimSpace("-"+f.Name+" "+placeholder))
		for line := range strings.SplitSeq(usage, "\n") {
			fmt.Fprintf(w, "        %s\n", line)
		}
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, "        (default %s)\n", f.DefValue)
		}
	})
	fmt.Fprint(w, `
What is measured:
  A sample runs N goroutines that lock, do the section's inside work,
  unlock and do its outside work, for -duration. Throughput is the
  acquisitions completed before the stop over the time to the stop
  (items for the queues, where one goroutine produces and one consumes).
  With more than one goroutine, one Lock in 32 per goroutine is timed
  (two clock reads, the same for every kind; timing every one would
  measure the clock, which costs more than a handover on some VMs),
  giving the wait from calling Lock to holding the lock: p50, p99 and
  max of those samples over all rounds. max/min is the most
  acquisitions made by one goroutine (process) over the fewest, the
  median over the rounds: 1 is perfectly fair. One goroutine is not
  timed, and its figure is the uncontended cost in ns per Lock+Unlock.
  vs is the kind's median throughput over its peer's (above 1x: the
  lockword kind is faster).
  etcd: 1, 8, 16 and 50 clients (goroutines, each with its own etcd
  client and lease) and 4 processes (this binary re-executed, one client
  each), whatever -goroutines says, on one embedded member (no fsync)
  that runs in a child process; each sample lasts at least 2 s. Every
  acquisition is timed: the wait columns are hand-overs, from the
  holder's call to Unlock to the return of the next Lock asked for before
  it, and the server's CPU time per acquisition (its process's user+system
  time over the sample, in 10 ms ticks) is shown with its ratio to the
  peer's (above 1x: the lockword kind costs the server more). A sample
  whose holds overlap fails.

Output:
  A table per group on stdout, preceded by the machine (CPU, cores,
  GOMAXPROCS, OS, Go version, load average) and progress on stderr when
  it is a terminal. With -json, one object per sample instead, fields:
  group, kind, versus (the peers, absent for a peer), goroutines
  (processes for shared), round, section, read_fraction, unit, ops,
  elapsed_ns, ops_per_sec, ns_per_op, wait_p50_ns, wait_p99_ns,
  wait_max_ns, worker_max_ops, worker_min_ops, server_cpu_ns_per_op
  (absent where not measured).

Exit status:
  0    every sample was measured
  1    a sample failed (a cross-process lock that did not exclude, a queue
       that reordered) or the output could not be written
  2    usage error: bad flag or flag value, or a -chart file that cannot
       be written (checked before anything is measured)
  130  interrupted by SIGINT (143: SIGTERM, 129: SIGHUP), after printing
       what was measured

Examples:
  lockword bench                             # every in-process kind, about 55 s
  lockword bench -chart bench.svg            # and a chart
  lockword bench -kinds mutex,rw -section 100ns/1us -read 90
  lockword bench -procs -kinds shared        # across processes
  lockword bench -kinds etcd -count 3        # locks on etcd, about 2 min
  lockword bench -duration 100ms -count 2 -json > bench.jsonl
`)
}
