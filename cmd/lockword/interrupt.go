package main

// SIGINT, SIGTERM and SIGHUP during torture -procs: the run must not leave
// its region file and worker processes behind. The supervisor catches
// them, stops its workers, removes the region, prints what it measured so
// far, and exits with 128 + the signal's number, as a shell reports a
// command killed by it (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

import (
	"os"
	"os/signal"
	"syscall"
)

// interrupts catches SIGINT, SIGTERM and SIGHUP for the length of a run
// that must clean up after itself. A nil *interrupts catches nothing: its
// channels are nil and never ready.
type interrupts struct {
	ch     chan os.Signal
	first  chan struct{} // closed on the first signal: stop the run
	second chan struct{} // closed on the second: stop waiting, kill now
	quit   chan struct{}
	sig    os.Signal // the first signal; written before first is closed
}

// catchInterrupts starts catching SIGINT, SIGTERM and SIGHUP; stop ends it.
func catchInterrupts() *interrupts {
	in := &interrupts{ch: make(chan os.Signal, 2), first: make(chan struct{}),
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

// stop restores the signals' default action.
func (in *interrupts) stop() {
	signal.Stop(in.ch)
	close(in.quit)
}

// done is closed when the first signal arrives.
func (in *interrupts) done() <-chan struct{} {
	if in == nil {
		return nil
	}
	return in.first
}

// hurry is closed when a second signal arrives.
func (in *interrupts) hurry() <-chan struct{} {
	if in == nil {
		return nil
	}
	return in.second
}

// interrupted reports whether a signal has arrived.
func (in *interrupts) interrupted() bool {
	select {
	case <-in.done():
		return true
	default:
		return false
	}
}

// name is the first signal's name ("SIGINT"); call it once interrupted.
func (in *interrupts) name() string {
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

// exitStatus is the status for a run ended by the first signal: 128 + its
// number, the shell's convention.
func (in *interrupts) exitStatus() int {
	if s, ok := in.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFail
}
