//go:build linux

package torture

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWorkerProcessNames: during a -procs run, ps shows the worker
// processes as lockword's: command name lockword-worker, command line
// "lockword-torture-worker KIND ...", not /proc/self/exe.
func TestWorkerProcessNames(t *testing.T) {
	for _, c := range []struct{ lock, kind string }{{"shared", "shared"}, {"ring", "shared-ring"}} {
		t.Run(c.lock, func(t *testing.T) {
			done := make(chan int)
			go func() {
				_, _, status := runCLI(t, "torture", "-lock", c.lock, "-procs", "2", "-duration", "1500ms")
				done <- status
			}()
			// Poll until both workers have named themselves (from init,
			// just after exec) or the run is over: a slow start (a loaded
			// host, a race-instrumented binary) only delays the release,
			// and the run lasts 1.5 s after it.
			var found []string
			named := func() bool {
				for _, f := range found {
					if !strings.HasPrefix(f, workerComm+"|") {
						return false
					}
				}
				return len(found) >= 2
			}
			status := -1
			for status < 0 && !named() {
				select {
				case status = <-done:
				case <-time.After(20 * time.Millisecond):
					found = children(t)
				}
			}
			if status < 0 {
				status = <-done
			}
			if status != exitOK {
				t.Fatalf("torture: status %d", status)
			}
			if len(found) < 2 {
				t.Fatalf("found %d worker processes, want 2: %q", len(found), found)
			}
			for _, f := range found {
				comm, cmdline, _ := strings.Cut(f, "|")
				if comm != workerComm || !strings.HasPrefix(cmdline, workerArgv0+" "+c.kind+" ") {
					t.Errorf("worker shows as comm %q, command line %q; want %q, %q...", comm, cmdline, workerComm, workerArgv0+" "+c.kind)
				}
			}
		})
	}
}

// children returns "comm|cmdline" (arguments joined by spaces) for each
// child process of this one that has exec'ed (its comm is no longer this
// binary's).
func children(t *testing.T) []string {
	t.Helper()
	self, _ := os.ReadFile("/proc/self/comm")
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after
		// its closing parenthesis.
		i := bytes.LastIndexByte(b, ')')
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		dir := filepath.Dir(st)
		comm, _ := os.ReadFile(dir + "/comm")
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		if bytes.Equal(comm, self) || len(cmdline) == 0 {
			continue // forked, not yet exec'ed or named
		}
		out = append(out, strings.TrimSpace(string(comm))+"|"+strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	return out
}
