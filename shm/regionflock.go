package shm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The region's file lock: flock(2) on the region file, under which the
// creator fills the header, processes attach and detach, objects are
// added and observers copy the table. A running process holds it for
// microseconds; one stopped (SIGSTOP, a debugger) or hung while holding it
// holds it for as long as it stays so, and no call may wait for it
// unboundedly: every taker gives up at its deadline with a
// FileLockTimeoutError that names the holder.
//
// The wait polls flock with LOCK_NB, sleeping between tries from
// flockFirstSleep doubling up to flockMaxSleep (never past the deadline).
// Not a timed lock instead: flock(2) has none (a blocking flock is cut
// short only by a signal, which neither Go's runtime nor a C library can
// own for this), and the OFD record locks (F_OFD_SETLKW), which have no
// timeout either, do not conflict with flock on Linux, so a process that
// took one would not exclude the processes of other versions, in Go and C,
// that take flock. Since holds last microseconds, the first try nearly
// always wins; a waiter behind a real holder takes the lock within
// flockMaxSleep of its release. Polling is not fair, which only matters
// under a stream of takers that these rare paths never see.
// lw_region_open_init and the other flock takers of c/lockword.c wait the
// same way.

const (
	flockFirstSleep = 50 * time.Microsecond
	flockMaxSleep   = 2 * time.Millisecond
)

// ErrFileLockTimeout is returned (as a *FileLockTimeoutError) when a
// region's file lock stayed held by another open of the file for the whole
// of a call's timeout: by an open, an object creation, Close, Inspect,
// Inspect or Remove. The timeout is Options.InitTimeout
// (see there). A running process holds the lock for microseconds: the
// holder is stopped (SIGSTOP, a debugger), hung, or not a lockword process.
var ErrFileLockTimeout = errors.New("lockword: the region's file lock stayed held")

// A FileLockTimeoutError is ErrFileLockTimeout with who held the lock:
// errors.Is matches it with ErrFileLockTimeout and with
// context.DeadlineExceeded.
type FileLockTimeoutError struct {
	// Waited is how long the call waited for the lock.
	Waited time.Duration
	// Holders are the processes that /proc/locks said held it when the
	// call gave up (the PIDs as this process's PID namespace sees them);
	// empty if it named none (the lock was released meanwhile, or
	// /proc/locks could not be read).
	Holders []FileLockHolder
}

// A FileLockHolder is a process that held a region's file lock.
type FileLockHolder struct {
	PID int
	// Stopped is true when the process was stopped (state T or t in
	// /proc/PID/stat: SIGSTOP, a terminal stop, a debugger): it holds the
	// lock until it is continued (SIGCONT) or killed.
	Stopped bool
	// Unconfirmed is true when PID is only the process that took the
	// lock, as /proc/locks names it: no descriptor on the locked open file
	// could be found (they belong to another user's processes). A flock
	// belongs to the open file, not to the process, so the holder may be
	// a process that inherited the descriptor (a child after fork or exec)
	// and PID may have exited since. Otherwise PID has a descriptor on the
	// locked open file (/proc/PID/fdinfo), whoever took the lock.
	Unconfirmed bool
}

func (e *FileLockTimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s for %v", strings.TrimSuffix(ErrFileLockTimeout.Error(), "."), e.Waited.Round(time.Millisecond))
	if len(e.Holders) == 0 {
		b.WriteString(" (/proc/locks names no holder now: released meanwhile?)")
		return b.String()
	}
	b.WriteString(": held by ")
	for i, h := range e.Holders {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "PID %d", h.PID)
		switch {
		case h.Unconfirmed:
			b.WriteString(" (the process that took the lock; the holder may be a process that inherited its descriptor, such as a child)")
		case h.Stopped:
			b.WriteString(" (stopped: it holds the lock until continued with SIGCONT or killed)")
		default:
			b.WriteString(" (not stopped)")
		}
	}
	return b.String()
}

// Is reports whether target is ErrFileLockTimeout or
// context.DeadlineExceeded.
func (e *FileLockTimeoutError) Is(target error) bool {
	return target == ErrFileLockTimeout || target == context.DeadlineExceeded
}

// lockFile takes the file lock of fd (exclusive or shared), trying until
// deadline (see the top of this file). It returns a *FileLockTimeoutError
// if the lock stayed held, or the error of flock(2) itself.
func lockFile(fd int, how flockHow, deadline time.Time) error {
	start := time.Now()
	sleep := flockFirstSleep
	for {
		taken, err := sysFlockTry(fd, how)
		if err != nil || taken {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return &FileLockTimeoutError{Waited: time.Since(start), Holders: fileLockHolders(fd)}
		}
		time.Sleep(min(sleep, left))
		sleep = min(2*sleep, flockMaxSleep)
	}
}

// lockFile takes r's file lock, waiting at most r.lockTimeout.
func (r *Region) lockFile(how flockHow) error {
	return lockFile(int(r.file.Fd()), how, time.Now().Add(r.lockTimeout))
}

// fileLockHolders lists the processes that hold a flock on fd's file,
// and whether each is stopped: those with a descriptor on the locked open
// file, or else those that /proc/locks names (see Unconfirmed).
func fileLockHolders(fd int) []FileLockHolder {
	st, err := sysFstat(fd)
	if err != nil {
		return nil
	}
	id := fmt.Sprintf("%02x:%02x:%d", st.devMajor, st.devMinor, st.ino)
	pids, unconfirmed := sysFlockDescriptorHolders(id), false
	if len(pids) == 0 {
		locks, err := sysProcLocks()
		if err != nil {
			return nil
		}
		pids, unconfirmed = flockHolders(locks, id), true
	}
	var holders []FileLockHolder
	for _, pid := range pids {
		state := sysProcState(pid)
		holders = append(holders, FileLockHolder{PID: pid, Stopped: state == 'T' || state == 't', Unconfirmed: unconfirmed})
	}
	return holders
}

// flockHolders returns the PIDs that took a flock on the file id (device
// major:minor in hexadecimal, inode: fe:00:9978866) according to locks,
// the text of /proc/locks (or the "lock:" lines of an fdinfo file):
//
//	1: FLOCK  ADVISORY  WRITE 6215 fe:00:9978866 0 EOF
//	1: -> FLOCK  ADVISORY  WRITE 6300 fe:00:9978866 0 EOF
//
// The device numbers are hexadecimal; a "->" line is a waiter, not a
// holder; a flock's PID is the process that took it (OFD and POSIX
// locks, which do not conflict with flock, are left out).
func flockHolders(locks []byte, id string) []int {
	var pids []int
	for _, line := range bytes.Split(locks, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) > 0 && f[0] == "lock:" {
			f = f[1:] // an fdinfo line
		}
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != id {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
