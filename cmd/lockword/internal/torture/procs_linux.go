package torture

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// workerAttr starts a worker process in a process group of its own, so
// that a Ctrl-C or a terminal hangup, which the kernel sends to the whole
// foreground group, reaches only the supervisor, which stops the workers
// between updates; a worker killed by it mid-update, or mid-start before
// it could ignore the signal, would count as a failure. It also makes the
// kernel SIGKILL the worker when the supervisor dies, even by SIGKILL,
// which nothing can catch: a timed run's workers would otherwise spin on
// the region forever. That signal follows the death of the thread that
// started the worker; the Go runtime does not end its threads while the
// program runs (none of ours is locked to a goroutine that exits).
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// stopProcess sends p SIGSTOP and waits, up to wait, until the kernel
// reports it stopped (state T in /proc/PID/stat): kill(2) returns before a
// process running on another CPU has taken the signal.
func stopProcess(p *os.Process, wait time.Duration) bool {
	if p.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.Pid)
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Microsecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		// "PID (comm) S ...": the state follows the last parenthesis,
		// since comm may hold any byte.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// continueProcess undoes stopProcess.
func continueProcess(p *os.Process) { p.Signal(syscall.SIGCONT) }

// nameWorkerProcess sets this process's command name (comm: what ps -e,
// top and pgrep show) to workerComm. Exec'ing /proc/self/exe named it
// "exe". It runs from init, on the main thread, which names the process;
// threads started later inherit the name.
func nameWorkerProcess() {
	name := []byte(workerComm + "\x00")
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
}
