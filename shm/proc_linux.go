//go:build linux

package shm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

var self struct {
	once sync.Once
	id   procIdentity
	err  error
}

// selfIdentity returns this process's identity, read once.
func selfIdentity() (procIdentity, error) {
	self.once.Do(func() {
		pid := os.Getpid()
		_, start, err := readProcStat(pid)
		if err != nil {
			self.err = fmt.Errorf("lockword: reading this process's start time: %w", err)
			return
		}
		self.id = procIdentity{pid: uint32(pid), start: start, pidNS: pidNamespace()}
		self.id.boot, self.err = bootID()
	})
	return self.id, self.err
}

// pidNamespace returns the inode number of this process's PID namespace,
// which names it among the namespaces that exist (Linux 3.8 and later), or
// 0 if /proc/self/ns/pid cannot be read.
func pidNamespace() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
}

// bootID reads /proc/sys/kernel/random/boot_id, a UUID drawn at each boot:
// it tells a region file on persistent storage that its process table is
// from an earlier boot, when start times began again from zero.
func bootID() ([16]byte, error) {
	var id [16]byte
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id, fmt.Errorf("lockword: reading the boot ID: %w", err)
	}
	h := bytes.ReplaceAll(bytes.TrimSpace(b), []byte("-"), nil)
	if len(h) != 32 {
		return id, fmt.Errorf("lockword: malformed boot ID %q", b)
	}
	if _, err := hex.Decode(id[:], h); err != nil {
		return id, fmt.Errorf("lockword: malformed boot ID %q: %w", b, err)
	}
	return id, nil
}

var errNoProcess = errors.New("no such process")

// readProcStat returns the state letter and start time of process pid from
// /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func readProcStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return 0, 0, errNoProcess
		}
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); starttime is field 22, so f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat: %w", pid, err)
	}
	return f[0][0], start, nil
}

// processAlive reports whether the process incarnation id is alive. A
// zombie (killed, not yet reaped) is dead: its memory is gone and it can
// never release a lock. It errs towards "alive": a process that exists but
// whose /proc entry is hidden from us (hidepid) is reported alive, because
// declaring a live holder dead would let a waiter rob it. So is one whose
// PID was recorded in a PID namespace that is not known to be ours: our
// /proc would show another process under that number, or none.
func processAlive(id procIdentity) bool {
	me, err := selfIdentity()
	if err != nil {
		return true // cannot tell: never rob
	}
	if id.boot != me.boot {
		return false // registered during an earlier boot
	}
	if id.pidNS == 0 || id.pidNS != me.pidNS {
		return true // cannot check the PID here: never rob
	}
	if id.pid == me.pid {
		return id.start == me.start
	}
	if id.pid == 0 || id.pid > 1<<22 {
		return false // not a PID Linux hands out (PID_MAX_LIMIT is 2^22)
	}
	// kill(pid, 0) delivers nothing; ESRCH means no process (not even a
	// zombie) has this PID.
	if err := unix.Kill(int(id.pid), 0); err == unix.ESRCH {
		return false
	}
	state, start, err := readProcStat(int(id.pid))
	switch {
	case err == errNoProcess:
		// Gone since kill, or hidden by hidepid: ask kill again.
		return unix.Kill(int(id.pid), 0) != unix.ESRCH
	case err != nil:
		return true
	case state == 'Z' || state == 'X':
		return false
	}
	return start == id.start
}
