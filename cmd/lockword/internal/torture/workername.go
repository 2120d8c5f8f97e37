package torture

// What torture's worker processes are called, so that a user who runs ps
// or top during a -procs run sees lockword's workers, not /proc/self/exe.

import "os/exec"

const (
	// workerArgv0 is a worker process's argv[0]: the first word of its
	// command line in ps -f, ps aux and /proc/PID/cmdline.
	workerArgv0 = "lockword-torture-worker"
	// workerComm is its command name (comm), set by nameWorkerProcess:
	// the kernel keeps 15 bytes of it.
	workerComm = "lockword-worker"
)

// workerCommand runs exe (this binary, /proc/self/exe) as a worker process
// whose command line reads "lockword-torture-worker WHAT...": the kind, and
// whatever else helps a reader of ps (the region). The worker ignores its
// arguments: its orders come in the environment, read before main runs.
func workerCommand(exe string, what ...string) *exec.Cmd {
	cmd := exec.Command(exe, what...)
	cmd.Args[0] = workerArgv0 // Path stays exe: only argv[0] changes
	return cmd
}
