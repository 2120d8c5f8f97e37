package torture

// The one process supervisor of torture's multi-process kinds: the plain
// shared kinds and the mixed C/Python ones (procs.go), the shared
// ring (kinds_sharedring.go) and the etcd kinds with -procs
// (etcd.go). Each kind says what its workers are to do (the
// command and its orders) and how it knows they are ready; the supervisor
// starts them, reaps them, waits for them to attach and kills what is
// left. A worker process is this binary re-executed: its orders come in
// the environment, read before main runs (ServeWorker).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/interrupt"
)

// attachTimeout bounds the wait for every worker process to attach.
const attachTimeout = time.Minute

// workerProc is one running worker process.
type workerProc struct {
	cmd *exec.Cmd
	ids []int
	// out collects its standard output, and its standard error unless
	// errOut is set (the shared ring's sides print their result as the
	// last line of standard output, so their errors are kept apart).
	out    *bytes.Buffer
	errOut *bytes.Buffer
	done   chan struct{} // closed when it has exited and been reaped
	err    error         // cmd.Wait's result, once done is closed
}

// workerExe is the binary that worker processes re-execute: this one.
// /proc/self/exe names its inode even if the file at our path is replaced
// (rebuilt) while we run.
func workerExe() (string, error) {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err == nil {
		return self, nil
	}
	return os.Executable()
}

// startWorker starts cmd as a worker process running ids. It gets a
// process group of its own and dies with the supervisor (workerAttr), so
// that a signal reaches the supervisor only and the supervisor's death
// takes its workers along; files are inherited from fd 3 on (the region's
// memfd: workerFiles). splitStderr keeps its standard error apart, in
// errOut. A goroutine reaps it and closes done.
func startWorker(cmd *exec.Cmd, ids []int, files []*os.File, splitStderr bool) (*workerProc, error) {
	w := &workerProc{cmd: cmd, ids: ids, out: new(bytes.Buffer), done: make(chan struct{})}
	cmd.SysProcAttr = workerAttr()
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = w.out, w.out
	if splitStderr {
		w.errOut = new(bytes.Buffer)
		cmd.Stderr = w.errOut
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { w.err = cmd.Wait(); close(w.done) }()
	return w, nil
}

// output is what w wrote: standard output, then standard error when kept
// apart.
func (w *workerProc) output() string {
	if w.errOut == nil {
		return w.out.String()
	}
	return w.out.String() + w.errOut.String()
}

// result decodes into v the JSON result that a worker keeping its
// standard error apart prints as the last line of its standard output.
func (w *workerProc) result(v any) error {
	lines := strings.Split(strings.TrimSpace(w.out.String()), "\n")
	return json.Unmarshal([]byte(lines[len(lines)-1]), v)
}

// noResult is the failure of a worker, called who, that gave no result:
// its PID, how it exited and what it wrote to standard error.
func (w *workerProc) noResult(who string) string {
	return fmt.Sprintf("%s (PID %d) gave no report: %v %s", who, w.cmd.Process.Pid, w.cmd.ProcessState, strings.TrimSpace(w.errOut.String()))
}

// exited reports whether w has exited and been reaped.
func exited(w *workerProc) bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// killWorkers kills every worker process of procs still running (nil
// entries are slots never filled) and waits until each is reaped.
func killWorkers(procs []*workerProc) {
	for _, w := range procs {
		if w != nil && !exited(w) {
			w.cmd.Process.Kill()
			<-w.done
		}
	}
}

// spreadIDs hands the worker ids 1..workers out to procs processes in
// order, as evenly as possible: the first workers%procs processes get one
// more. A replacement process keeps its victim's ids.
func spreadIDs(workers, procs int) [][]int {
	out := make([][]int, procs)
	id := 1
	for p := range out {
		for range workers/procs + btoi(p < workers%procs) {
			out[p] = append(out[p], id)
			id++
		}
	}
	return out
}

// awaitAttach waits, polling every poll, until attached reports that every
// worker process of procs is ready. It fails when one of them ends first
// (who names one in the error: "worker process"), when attachTimeout
// passes (late is the error), or when in reports a signal (in may be nil;
// group names them all in that error: "the workers").
func awaitAttach(procs []*workerProc, attached func() bool, poll time.Duration, in *interrupt.Signals, who, group, late string) error {
	for deadline := time.Now().Add(attachTimeout); !attached(); time.Sleep(poll) {
		for _, w := range procs {
			if exited(w) {
				return fmt.Errorf("%s %d ended before starting: %v\n%s", who, w.cmd.Process.Pid, w.err, w.output())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s", late)
		}
		if in.Interrupted() {
			return fmt.Errorf("interrupted by %s before %s started", in.Name(), group)
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
