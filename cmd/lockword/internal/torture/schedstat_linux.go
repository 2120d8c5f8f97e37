package torture

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// gettid is the calling thread's ID (lock the goroutine to its thread
// first: runtime.LockOSThread).
func gettid() int { return unix.Gettid() }

// threadRunqueueNs returns how long thread tid of this process has spent
// runnable but waiting for a CPU, in ns (the second field of
// /proc/self/task/TID/schedstat, see the kernel's sched-stats.rst), and
// whether the kernel reports it.
func threadRunqueueNs(tid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(f[1]), 10, 64)
	return ns, err == nil
}
