package main

// Progress bars for long runs. A torture run is silent for its first
// second, and short runs (the default experiment takes a fraction of a
// second per kind) never draw anything: a bar that flashes for 100 ms is
// noise, and one that appears in piped output corrupts it. So a bar is
// drawn only when stderr is a terminal, only after progressDelay, and it
// is erased before the kind's report is printed.

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
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

// A progressSpec says what one run's bar shows.
type progressSpec struct {
	label string    // the lock kind, shown before the bar
	start time.Time // when the workers were released
	max   int64     // the value of position when the run is done
	// position returns where the run is, 0..max: acquisitions in a
	// counted run, milliseconds in a timed one. acquisitions returns the
	// acquisitions so far, for the rate. Both are called from the
	// progress goroutine while the workers run.
	position, acquisitions func() int64
	timed                  bool // position is time: the end is known in advance
	// unit names what acquisitions counts, for the rate: "acq" when
	// empty; "items" for a ring, "reads" for a seqlock.
	unit string
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
	if w == nil || spec.max <= 0 {
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

	// The bar draws only the bar; the numbers after it are ours. The
	// library's rate and time estimates start when the bar appears, a
	// second into the run, and would count that second's work as done in
	// no time.
	bar := progressbar.NewOptions64(spec.max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(spec.describe()),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetElapsedTime(false),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetRenderBlankState(true),
	)
	tick := time.NewTicker(progressPoll)
	defer tick.Stop()
	for {
		bar.Describe(spec.describe())
		// Never past max: the bar treats that as an error, and a timed
		// run's clock does overshoot by a little.
		_ = bar.Set64(min(spec.position(), spec.max))
		select {
		case <-p.quit:
			// Stop drawing, then erase the line, so that the report
			// starts on a clean line of the terminal.
			_ = bar.Exit()
			_ = bar.Clear()
			return
		case <-tick.C:
		}
	}
}

// describe is the text after the bar: the lock, acquisitions so far, the
// rate since the start of the run (the same measure as the report's
// throughput) and the time left.
func (s *progressSpec) describe() string {
	elapsed := time.Since(s.start)
	n := s.acquisitions()
	rate := float64(n) / elapsed.Seconds() // acquisitions per second
	var left time.Duration
	if s.timed {
		left = time.Duration(s.max)*time.Millisecond - elapsed
	} else if rate > 0 {
		left = time.Duration(float64(s.max-n) / rate * float64(time.Second))
	}
	left = max(left, 0).Round(time.Second)
	unit := s.unit
	if unit == "" {
		unit = "acq"
	}
	done := fmt.Sprintf("%.1fM %s", float64(n)/1e6, unit)
	if !s.timed {
		done = fmt.Sprintf("%.1fM/%.1fM %s", float64(n)/1e6, float64(s.max)/1e6, unit)
	}
	return fmt.Sprintf("torture %s: %s, %.1f M %s/s, %v left", s.label, done, rate/1e6, unit, left)
}

// stop ends the watch and returns once the bar, if drawn, is erased.
func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	<-p.done
}
