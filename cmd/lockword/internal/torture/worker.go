package torture

// The entry of torture's worker processes. A -procs run's workers are this
// binary re-executed (workerExe, startWorker) with their orders in the
// environment; ServeWorker reads them and runs the worker.

import (
	"io"
	"os"
	"strings"
)

// ServeWorker runs this process as a torture worker and exits when the
// environment holds a worker's orders ($LOCKWORD_TORTURE_WORKER for the
// shared and mixed kinds, $LOCKWORD_TORTURE_RING_WORKER for a side of the
// shared ring, $LOCKWORD_TORTURE_ETCD_WORKER for an etcd worker process,
// $LOCKWORD_TORTURE_ETCDKIT_WORKER for one of the etcd toolkit kinds');
// otherwise it returns at once. Call it from an init function of package
// main, before main parses a command line: a worker ignores its arguments,
// and a test binary that runs torture in-process re-executes itself as
// the workers, so the hook must run before its tests do too.
func ServeWorker() {
	for _, w := range workerMains {
		if spec := os.Getenv(w.env); spec != "" {
			if w.named {
				nameWorkerProcess()
			}
			os.Exit(w.main(spec))
		}
	}
}

// workerMains is each worker's environment variable and main, in the
// order ServeWorker looks for them; named workers show in ps as workers
// (nameWorkerProcess), the etcd ones keep their name.
var workerMains = []struct {
	env   string
	main  func(spec string) int
	named bool
}{
	{workerEnv, workerMain, true},
	{sharedRingWorkerEnv, sharedRingWorkerMain, true},
	{sharedQueueWorkerEnv, sharedQueueWorkerMain, true},
	{shSemWorkerEnv, shSemWorkerMain, true},
	{etcdWorkerEnv, etcdWorkerMain, false},
	{etcdKitWorkerEnv, etcdKitWorkerMain, false},
}

// Exit statuses, lockword's (cmd/lockword/main.go): Command returns them,
// and a worker process exits with them.
const (
	exitOK    = 0 // success: every kind passed; a worker's clean exit
	exitFail  = 1 // a check failed, or a worker failed
	exitUsage = 2 // usage error; a worker's orders that do not parse
)

// errText is err's message without the "lockword: " that the library's
// errors start with, for a line that already names the command.
func errText(err error) string { return strings.TrimPrefix(err.Error(), "lockword: ") }

// IsTerminal reports whether w is a terminal, where progress bars are
// drawn (lockword bench draws its own there too).
func IsTerminal(w io.Writer) bool { return isTerminal(w) }
