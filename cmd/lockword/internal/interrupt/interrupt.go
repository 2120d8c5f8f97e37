// Package interrupt catches SIGINT, SIGTERM and SIGHUP for lockword's
// long runs (torture -procs, bench), which must stop cleanly rather than
// die: during torture -procs the run must not leave its region file and
// worker processes behind. The supervisor catches
// them, stops its workers, removes the region, prints what it measured so
// far, and exits with 128 + the signal's number, as a shell reports a
// command killed by it (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).
package interrupt

import (
	"os"
	"os/signal"
	"syscall"
)

// Signals catches SIGINT, SIGTERM and SIGHUP for the length of a run
// that must clean up after itself. A nil *Signals catches nothing: its
// channels are nil and never ready.
type Signals struct {
	ch     chan os.Signal
	first  chan struct{} // closed on the first signal: stop the run
	second chan struct{} // closed on the second: stop waiting, kill now
	quit   chan struct{}
	sig    os.Signal // the first signal; written before first is closed
}

// Catch starts catching SIGINT, SIGTERM and SIGHUP; Stop ends it.
func Catch() *Signals {
	in := &Signals{ch: make(chan os.Signal, 2), first: make(chan struct{}),
		second: make(chan struct{}), quit: make(chan struct{})}
	signal.Notify(in.ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		select {
		case s := <-in.ch:
			in.sig = s
			close(in.first)
		case <-in.quit:
			return
		}
		select {
		case <-in.ch:
			close(in.second)
		case <-in.quit:
		}
	}()
	return in
}

// Stop restores the signals' default action.
func (in *Signals) Stop() {
	signal.Stop(in.ch)
	close(in.quit)
}

// Done is closed when the first signal arrives.
func (in *Signals) Done() <-chan struct{} {
	if in == nil {
		return nil
	}
	return in.first
}

// Hurry is closed when a second signal arrives.
func (in *Signals) Hurry() <-chan struct{} {
	if in == nil {
		return nil
	}
	return in.second
}

// Interrupted reports whether a signal has arrived.
func (in *Signals) Interrupted() bool {
	select {
	case <-in.Done():
		return true
	default:
		return false
	}
}

// Name is the first signal's name ("SIGINT"); call it once interrupted.
func (in *Signals) Name() string {
	switch in.sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return in.sig.String()
}

// ExitStatus is the status for a run ended by the first signal: 128 + its
// number, the shell's convention.
func (in *Signals) ExitStatus() int {
	if s, ok := in.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1 // lockword's exit status for a failed run
}
