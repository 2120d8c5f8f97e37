package torture

// Progress bars for long runs. A torture run is silent for its first
// second, and short runs (the default experiment takes a fraction of a
// second per kind) never draw anything: a bar that flashes for 100 ms is
// noise, and one that appears in piped output corrupts it. So a bar is
// drawn only when stderr is a terminal, only after progressDelay, and it
// is erased before the kind's report is printed.
//
// What the bar says comes from progressModel, a pure function of two
// samples (time gone, work done), so that it is tested for every shape of
// run without a terminal: a count (-iters, -items, -kills), a time
// (-duration), or both (-kill with -duration ends at whichever comes
// first).

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// progressDelay is how long a run goes before its bar appears. A variable
// so that tests can shorten it.
var progressDelay = time.Second

// progressPoll is how often the bar samples the run and redraws.
const progressPoll = 100 * time.Millisecond

// isTerminal reports whether w is a terminal, the only place a progress bar
// is drawn.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// A progressModel is what ends a run: a count of units of work (total:
// acquisitions, items, kills), a time (duration), or both, whichever is
// reached first. Zero fields are no bound; a model with neither has no
// bar.
type progressModel struct {
	total    int64
	duration time.Duration
}

// at returns, after elapsed with done units of work done, the fraction of
// the run done (0..1) and the time left; known is false while the time
// left cannot be estimated (a count with nothing done yet). A count's time
// left assumes the rate so far goes on; a duration's is exact.
func (m progressModel) at(elapsed time.Duration, done int64) (fraction float64, left time.Duration, known bool) {
	elapsed = max(elapsed, 0)
	if m.total > 0 {
		done = min(max(done, 0), m.total)
		fraction = float64(done) / float64(m.total)
		if done > 0 {
			rest := float64(m.total-done) / float64(done) // of the time so far
			left, known = time.Duration(float64(elapsed)*rest), true
		}
	}
	if m.duration > 0 {
		fraction = max(fraction, min(float64(elapsed)/float64(m.duration), 1))
		if timeLeft := max(m.duration-elapsed, 0); !known || timeLeft < left {
			left, known = timeLeft, true
		}
	}
	return fraction, left, known
}

// A progressSpec says what one run's bar shows.
type progressSpec struct {
	label string    // the lock kind, shown before the bar
	start time.Time // when the workers were released
	model progressModel
	// done returns the work done toward model.total; nil when the run is
	// not counted. acquisitions returns the acquisitions (items, reads)
	// so far, for the rate. Both are called from the progress goroutine
	// while the workers run.
	done, acquisitions func() int64
	// unit names what acquisitions counts: "acq" when empty; "items" for
	// a ring, "reads" for a seqlock. doneUnit names what done counts when
	// it is not that ("kills"); done then shows as "n/total kills".
	unit, doneUnit string
}

// runProgress is the spec of a run that cfg bounds: by cfg.duration when
// timed, else by total units of done, which are also what the rate counts.
func runProgress(cfg *config, label string, start time.Time, total int64, done func() int64, unit string) progressSpec {
	s := progressSpec{label: label, start: start, done: done, acquisitions: done, unit: unit}
	if cfg.timed() {
		s.model.duration = cfg.duration
	} else {
		s.model.total = total
	}
	return s
}

// procsProgress is the spec of a -procs run: bounded by -kills kills
// (kills so far) and, if given, -duration for a -kill run; otherwise as
// runProgress, by -duration or by every worker's -iters additions
// (additions so far).
func procsProgress(cfg *config, label string, start time.Time, kills, additions func() int64) progressSpec {
	if !cfg.kill {
		return runProgress(cfg, label, start, int64(cfg.workers)*cfg.iters, additions, "")
	}
	return progressSpec{label: label, start: start, model: progressModel{total: int64(cfg.kills), duration: cfg.duration},
		done: kills, doneUnit: "kills", acquisitions: additions}
}

// A progressFrame is one sample of a run, as drawn.
type progressFrame struct {
	fraction float64 // of the run done, 0..1
	text     string  // after the bar
}

// frame samples the run after elapsed and says what to draw.
func (s *progressSpec) frame(elapsed time.Duration) progressFrame {
	var done int64
	if s.done != nil {
		done = s.done()
	}
	acq := done
	if s.doneUnit != "" || s.done == nil {
		acq = s.acquisitions()
	}
	return s.frameOf(elapsed, done, acq)
}

// frameOf is frame for given samples: done toward the model's total, and
// acquisitions for the rate.
func (s *progressSpec) frameOf(elapsed time.Duration, done, acq int64) progressFrame {
	fraction, left, known := s.model.at(elapsed, done)
	unit := s.unit
	if unit == "" {
		unit = "acq"
	}
	var rate float64 // per second
	if elapsed > 0 {
		rate = float64(acq) / elapsed.Seconds()
	}
	var what string
	switch {
	case s.model.total > 0 && s.doneUnit != "":
		what = fmt.Sprintf("%d/%d %s", done, s.model.total, s.doneUnit)
	case s.model.total > 0:
		what = fmt.Sprintf("%.1fM/%.1fM %s", float64(acq)/1e6, float64(s.model.total)/1e6, unit)
	default:
		what = fmt.Sprintf("%.1fM %s", float64(acq)/1e6, unit)
	}
	leftText := "time left unknown"
	if known {
		leftText = fmt.Sprintf("%v left", left.Round(time.Second))
	}
	return progressFrame{fraction: fraction,
		text: fmt.Sprintf("torture %s: %s, %.1f M %s/s, %s", s.label, what, rate/1e6, unit, leftText)}
}

// A progress is a bar that may be drawn while a run goes on. The zero
// *progress (nil) draws nothing.
type progress struct {
	quit chan struct{} // closed by stop
	done chan struct{} // closed once the bar is erased and the goroutine gone
}

// startProgress starts watching a run. w is where the bar goes, nil for
// no bar (not a terminal). The bar appears only if the run is still going
// after progressDelay.
func startProgress(w io.Writer, spec progressSpec) *progress {
	if w == nil || spec.model.total <= 0 && spec.model.duration <= 0 {
		return nil
	}
	p := &progress{quit: make(chan struct{}), done: make(chan struct{})}
	go p.loop(w, spec)
	return p
}

// loop waits out progressDelay, then draws the bar until stop, then
// erases it. It runs in its own goroutine.
func (p *progress) loop(w io.Writer, spec progressSpec) {
	defer close(p.done)
	delay := time.NewTimer(progressDelay)
	defer delay.Stop()
	select {
	case <-p.quit:
		return // a short run: never drawn
	case <-delay.C:
	}
	tick := time.NewTicker(progressPoll)
	defer tick.Stop()
	drawn := 0 // width of the line on the terminal
	for {
		// One sample makes the whole line, bar and numbers, so that
		// the two never disagree.
		line := spec.frame(time.Since(spec.start)).line()
		n := utf8.RuneCountInString(line)
		fmt.Fprintf(w, "\r%s%s", line, strings.Repeat(" ", max(drawn-n, 0)))
		drawn = max(drawn, n)
		select {
		case <-p.quit:
			// Erase the line, so that the report starts on a clean
			// line of the terminal.
			fmt.Fprintf(w, "\r%s\r", strings.Repeat(" ", drawn))
			return
		case <-tick.C:
		}
	}
}

// progressWidth is the bar's width in characters.
const progressWidth = 30

// line is the frame as drawn: percentage, bar, then the text. The
// percentage is truncated, as a bar's is, after a nudge past the rounding
// error of the division (0.29 × 100 is 28.999…).
func (f progressFrame) line() string {
	fill := int(f.fraction * progressWidth)
	return fmt.Sprintf("%3d%% |%s%s| %s", int(f.fraction*100+1e-9), strings.Repeat("█", fill), strings.Repeat(" ", progressWidth-fill), f.text)
}

// stop ends the watch and returns once the bar, if drawn, is erased.
func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	<-p.done
}
