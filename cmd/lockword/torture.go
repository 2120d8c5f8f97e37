package main

// The torture subcommand: hammer a lock from many goroutines (or worker
// processes) and check, inside the critical section, that it really
// excludes. The harness (flags, help, kinds, supervisor, checkers,
// reports) is package internal/torture; this file plugs it into the
// command table and the process.

import (
	"io"

	"github.com/lockword/lockword/cmd/lockword/internal/torture"
)

// tortureSummary is torture's line in the top-level help.
const tortureSummary = "hammer locks from many goroutines and check that they exclude"

// A worker process of a torture -procs run is this binary re-executed,
// with its orders in the environment: it must serve them and exit before
// main reads a command line, and before a test binary (which re-executes
// itself as the workers of its in-process runs) starts its tests. An init
// function is the one place that runs first in both.
func init() { torture.ServeWorker() }

// runTorture implements "lockword torture" and returns its exit status
// (see torture.Command).
func runTorture(args []string, stdout, stderr io.Writer) int {
	return torture.Command(args, stdout, stderr)
}

// tortureHelp writes the torture help.
func tortureHelp(w io.Writer) { torture.Help(w) }

// isTerminal reports whether w is a terminal; bench draws its progress
// there only, as torture does.
func isTerminal(w io.Writer) bool { return torture.IsTerminal(w) }
