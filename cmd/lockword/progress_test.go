package main

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProgressDrawsAndErases checks that a run longer than progressDelay
// draws a bar and erases it (back to the start of a blank line) on stop.
func TestProgressDrawsAndErases(t *testing.T) {
	defer func(d time.Duration) { progressDelay = d }(progressDelay)
	progressDelay = 10 * time.Millisecond

	var w bytes.Buffer
	var pos atomic.Int64
	p := startProgress(&w, progressSpec{label: "mutex", start: time.Now(), max: 1000, position: pos.Load, acquisitions: pos.Load})
	for range 30 {
		pos.Add(10)
		time.Sleep(10 * time.Millisecond)
	}
	p.stop()
	out := w.String()
	if !strings.Contains(out, "torture mutex") || !strings.Contains(out, "M acq/s") {
		t.Errorf("no bar drawn: %q", out)
	}
	// The bar library erases by overwriting with spaces between two
	// carriage returns.
	trimmed, ok := strings.CutSuffix(out, "\r")
	last := trimmed[strings.LastIndex(trimmed, "\r")+1:]
	if !ok || last == "" || strings.Trim(last, " ") != "" {
		t.Errorf("bar not erased at the end: %q", out[max(0, len(out)-120):])
	}
}

// TestProgressShortRunDrawsNothing checks that a run that ends before
// progressDelay leaves no trace.
func TestProgressShortRunDrawsNothing(t *testing.T) {
	var w bytes.Buffer
	five := func() int64 { return 5 }
	p := startProgress(&w, progressSpec{label: "mutex", start: time.Now(), max: 10, position: five, acquisitions: five})
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
	startProgress(nil, progressSpec{max: 10, position: zero, acquisitions: zero}).stop()
	if isTerminal(new(bytes.Buffer)) {
		t.Error("a bytes.Buffer counts as a terminal")
	}
}
