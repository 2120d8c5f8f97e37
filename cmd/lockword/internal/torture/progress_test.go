package torture

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProgressModel checks what the bar says (fraction done, time left,
// and the text) for every shape of run, with the specs built as the run
// functions build them from a parsed command line: a count of additions
// (-iters), a duration, a count of items, and -procs runs counted, timed,
// and bounded by kills (with and without -duration, which ends a -kill
// run at whichever comes first).
func TestProgressModel(t *testing.T) {
	type sample struct {
		elapsed         time.Duration
		done, additions int64 // additions: the rate's count, where it differs from done
	}
	for _, c := range []struct {
		args []string
		spec func(cfg *config) progressSpec
		at   sample
		// fraction done, time left (-1: unknown) and the text's numbers
		fraction float64
		left     time.Duration
		text     string
	}{
		{args: []string{"-lock", "mutex", "-workers", "4", "-iters", "1000000"},
			spec:     func(cfg *config) progressSpec { return hammerProgress(cfg, "mutex", nil) },
			at:       sample{elapsed: time.Second, done: 1_000_000},
			fraction: 0.25, left: 3 * time.Second, text: "torture mutex: 1.0M/4.0M acq, 1.0 M acq/s, 3s left"},
		{args: []string{"-lock", "mutex", "-workers", "4", "-iters", "1000000"},
			spec:     func(cfg *config) progressSpec { return hammerProgress(cfg, "mutex", nil) },
			at:       sample{elapsed: 200 * time.Millisecond},
			fraction: 0, left: -1, text: "torture mutex: 0.0M/4.0M acq, 0.0 M acq/s, time left unknown"},
		{args: []string{"-lock", "mutex", "-duration", "10s"},
			spec:     func(cfg *config) progressSpec { return hammerProgress(cfg, "mutex", nil) },
			at:       sample{elapsed: 2 * time.Second, done: 6_000_000},
			fraction: 0.2, left: 8 * time.Second, text: "torture mutex: 6.0M acq, 3.0 M acq/s, 8s left"},
		{args: []string{"-lock", "mutex", "-duration", "1s"}, // the clock overshoots a little
			spec:     func(cfg *config) progressSpec { return hammerProgress(cfg, "mutex", nil) },
			at:       sample{elapsed: 1100 * time.Millisecond, done: 1_100_000},
			fraction: 1, left: 0, text: "torture mutex: 1.1M acq, 1.0 M acq/s, 0s left"},
		{args: []string{"-lock", "mutex", "-workers", "1", "-iters", "100000000"}, // 0.29 × 100 < 29 in floating point
			spec:     func(cfg *config) progressSpec { return hammerProgress(cfg, "mutex", nil) },
			at:       sample{elapsed: time.Second, done: 29_000_000},
			fraction: 0.29, left: 2448275862 * time.Nanosecond, text: "torture mutex: 29.0M/100.0M acq, 29.0 M acq/s, 2s left"},
		{args: []string{"-lock", "ring", "-items", "1000000"},
			spec:     func(cfg *config) progressSpec { return runProgress(cfg, "ring", time.Time{}, cfg.items, nil, "items") },
			at:       sample{elapsed: time.Second, done: 500_000},
			fraction: 0.5, left: time.Second, text: "torture ring: 0.5M/1.0M items, 0.5 M items/s, 1s left"},
		{args: []string{"-procs", "4", "-iters", "100000"}, // 16 workers × 100000
			spec:     func(cfg *config) progressSpec { return procsProgress(cfg, "shared", time.Time{}, nil, nil) },
			at:       sample{elapsed: time.Second, done: 400_000},
			fraction: 0.25, left: 3 * time.Second, text: "torture shared: 0.4M/1.6M acq, 0.4 M acq/s, 3s left"},
		{args: []string{"-procs", "4", "-duration", "5s"},
			spec:     func(cfg *config) progressSpec { return procsProgress(cfg, "shared", time.Time{}, nil, nil) },
			at:       sample{elapsed: time.Second, done: 100_000},
			fraction: 0.2, left: 4 * time.Second, text: "torture shared: 0.1M acq, 0.1 M acq/s, 4s left"},
		// The case: 200 kills, 0.2 s in. It showed 100%, 0s left.
		{args: []string{"-procs", "4", "-kill", "-kills", "200"},
			spec:     func(cfg *config) progressSpec { return procsProgress(cfg, "shared", time.Time{}, nil, nil) },
			at:       sample{elapsed: 200 * time.Millisecond, done: 20, additions: 20_000},
			fraction: 0.1, left: 1800 * time.Millisecond, text: "torture shared: 20/200 kills, 0.1 M acq/s, 2s left"},
		{args: []string{"-procs", "4", "-kill"}, // the default -kills, none yet
			spec:     func(cfg *config) progressSpec { return procsProgress(cfg, "shared", time.Time{}, nil, nil) },
			at:       sample{elapsed: 50 * time.Millisecond, additions: 100},
			fraction: 0, left: -1, text: "torture shared: 0/200 kills, 0.0 M acq/s, time left unknown"},
		// Kills and time: the duration comes first here...
		{args: []string{"-procs", "4", "-kill", "-kills", "100000", "-duration", "10s"},
			spec:     func(cfg *config) progressSpec { return procsProgress(cfg, "shared", time.Time{}, nil, nil) },
			at:       sample{elapsed: 2 * time.Second, done: 100, additions: 200_000},
			fraction: 0.2, left: 8 * time.Second, text: "torture shared: 100/100000 kills, 0.1 M acq/s, 8s left"},
		// ...and the kills here.
		{args: []string{"-procs", "4", "-kill", "-kills", "100", "-duration", "1h"},
			spec:     func(cfg *config) progressSpec { return procsProgress(cfg, "shared", time.Time{}, nil, nil) },
			at:       sample{elapsed: 2 * time.Second, done: 50, additions: 200_000},
			fraction: 0.5, left: 2 * time.Second, text: "torture shared: 50/100 kills, 0.1 M acq/s, 2s left"},
	} {
		name := strings.Join(c.args, " ")
		opts, _, ok := parseTorture(c.args, new(strings.Builder), new(strings.Builder))
		if !ok {
			t.Fatalf("%s: does not parse", name)
		}
		spec := c.spec(&opts.cfg)
		if c.at.additions == 0 {
			c.at.additions = c.at.done
		}
		fraction, left, known := spec.model.at(c.at.elapsed, c.at.done)
		if !known {
			left = -1
		}
		if fraction != c.fraction || left != c.left {
			t.Errorf("%s at %v, %d done: fraction %v, left %v; want %v, %v", name, c.at.elapsed, c.at.done, fraction, left, c.fraction, c.left)
		}
		f := spec.frameOf(c.at.elapsed, c.at.done, c.at.additions)
		if f.fraction != c.fraction || f.text != c.text {
			t.Errorf("%s: frame %v %q, want %v %q", name, f.fraction, f.text, c.fraction, c.text)
		}
		if pct := strconv.Itoa(int(math.Round(c.fraction*1000))/10) + "% |"; !strings.HasPrefix(strings.TrimSpace(f.line()), pct) {
			t.Errorf("%s: line %q does not start with %q", name, f.line(), pct)
		}
	}
}

// hammerProgress is the spec hammer builds, for TestProgressModel.
func hammerProgress(cfg *config, label string, done func() int64) progressSpec {
	return runProgress(cfg, label, time.Time{}, int64(cfg.workers)*cfg.iters, done, "")
}

// TestProgressDrawsAndErases checks that a run longer than progressDelay
// draws a bar and erases it (back to the start of a blank line) on stop,
// and that every frame's percentage agrees with its own numbers, the
// first frame included.
func TestProgressDrawsAndErases(t *testing.T) {
	defer func(d time.Duration) { progressDelay = d }(progressDelay)
	progressDelay = 10 * time.Millisecond

	var w bytes.Buffer
	var pos atomic.Int64
	pos.Store(12_000_000) // work done before the bar appears
	cfg := &config{workers: 1, iters: 100_000_000}
	p := startProgress(&w, runProgress(cfg, "mutex", time.Now(), cfg.iters, pos.Load, ""))
	for range 30 {
		pos.Add(1_000_000)
		time.Sleep(10 * time.Millisecond)
	}
	p.stop()
	out := w.String()
	frame := regexp.MustCompile(`^ *(\d+)% \|[█ ]{30}\| torture mutex: (\d+)\.0M/100\.0M acq, [\d.]+ M acq/s, .* left *$`)
	frames := strings.Split(strings.TrimSuffix(out, "\r"), "\r")
	if len(frames) < 3 || frames[0] != "" {
		t.Fatalf("no bar drawn: %q", out)
	}
	for _, f := range frames[1 : len(frames)-1] {
		m := frame.FindStringSubmatch(f)
		if m == nil || m[1] != m[2] { // x.0M of 100.0M is x%
			t.Errorf("frame %q: the percentage disagrees with the count, or the frame is malformed", f)
		}
	}
	if last := frames[len(frames)-1]; last == "" || strings.Trim(last, " ") != "" {
		t.Errorf("bar not erased at the end: %q", out[max(0, len(out)-120):])
	}
}

// TestProgressShortRunDrawsNothing checks that a run that ends before
// progressDelay leaves no trace.
func TestProgressShortRunDrawsNothing(t *testing.T) {
	var w bytes.Buffer
	five := func() int64 { return 5 }
	p := startProgress(&w, progressSpec{label: "mutex", start: time.Now(), model: progressModel{total: 10}, done: five, acquisitions: five})
	time.Sleep(20 * time.Millisecond)
	p.stop()
	if w.Len() != 0 {
		t.Errorf("short run drew %q", w.String())
	}
}

// TestProgressOffWhenNotTerminal checks that nothing is started without a
// terminal: startProgress(nil, ...) is a no-op, and a buffer is no terminal.
func TestProgressOffWhenNotTerminal(t *testing.T) {
	zero := func() int64 { return 0 }
	startProgress(nil, progressSpec{model: progressModel{total: 10}, done: zero, acquisitions: zero}).stop()
	if isTerminal(new(bytes.Buffer)) {
		t.Error("a bytes.Buffer counts as a terminal")
	}
}
