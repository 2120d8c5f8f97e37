//go:build linux

package shm

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The operating-system calls under a region, and nothing else: the open
// sequence, the allocator and the process table above them are portable
// (region.go, regionopen.go, regionowner.go). region_other.go has the same
// helpers failing with ErrUnsupported.

// regionsSupported: regions work here.
const regionsSupported = true

func statInfo(st *unix.Stat_t) fileInfo {
	return fileInfo{size: st.Size, mode: st.Mode, uid: st.Uid, dev: uint64(st.Dev), ino: st.Ino,
		devMajor: unix.Major(uint64(st.Dev)), devMinor: unix.Minor(uint64(st.Dev)),
		regular: st.Mode&unix.S_IFMT == unix.S_IFREG}
}

// sysCreate creates path exclusively (O_CREAT|O_EXCL, never through a
// link) with permission bits perm, which the umask must not narrow.
func sysCreate(path string, perm os.FileMode) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
	if err != nil {
		return -1, err
	}
	if err := unix.Fchmod(fd, uint32(perm)); err != nil {
		unix.Unlink(path)
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// sysOpen opens an existing path, never through a link, for reading and
// writing or (readOnly) reading. O_NONBLOCK: opening a FIFO must not
// block; regular files ignore it.
func sysOpen(path string, readOnly bool) (int, error) {
	const flags = unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	access := unix.O_RDWR
	if readOnly {
		access = unix.O_RDONLY
	}
	return unix.Open(path, access|flags, 0)
}

// sysWriteDenied reports whether a failed sysOpen for writing may succeed
// for reading only.
func sysWriteDenied(err error) bool {
	return err == unix.EACCES || err == unix.EPERM || err == unix.EROFS
}

// sysOpenError names a failed sysOpen: a link or a file that is not a
// regular file is ErrNotRegularFile; other errors are returned as they are.
func sysOpenError(err error) error {
	switch err {
	case unix.ELOOP:
		return fmt.Errorf("%w (a symbolic link; links are not followed)", ErrNotRegularFile)
	case unix.EISDIR, unix.ENXIO:
		return fmt.Errorf("%w (%v)", ErrNotRegularFile, err)
	}
	return err
}

func sysFstat(fd int) (fileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileInfo{}, err
	}
	return statInfo(&st), nil
}

func sysLstat(path string) (fileInfo, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fileInfo{}, err
	}
	return statInfo(&st), nil
}

func sysPread(fd int, b []byte, off int64) (int, error) { return unix.Pread(fd, b, off) }

func sysTruncate(fd int, size int64) error { return unix.Ftruncate(fd, size) }

// sysMmap maps size bytes of fd MAP_SHARED, for reading and writing or
// (readOnly) reading.
func sysMmap(fd, size int, readOnly bool) ([]byte, error) {
	prot := unix.PROT_READ | unix.PROT_WRITE
	if readOnly {
		prot = unix.PROT_READ
	}
	return unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
}

func sysMunmap(data []byte) error { return unix.Munmap(data) }

func sysUnlink(path string) error { return unix.Unlink(path) }

func sysClose(fd int) error { return unix.Close(fd) }

// flock takes (or, with lockUnlock, drops) flock(2) on fd, resuming after
// signals. Taking it so waits without a bound: the library's takers use
// lockFile (regionflock.go), which gives up at a deadline.
func flock(fd int, how flockHow) error {
	op := unix.LOCK_UN
	switch how {
	case lockShared:
		op = unix.LOCK_SH
	case lockExclusive:
		op = unix.LOCK_EX
	}
	for {
		err := unix.Flock(fd, op)
		if err != unix.EINTR {
			return err
		}
	}
}

// sysFlockTry tries once to take flock(2) on fd (LOCK_NB), resuming after
// signals: taken false, with no error, if another open file description
// holds it in a conflicting mode.
func sysFlockTry(fd int, how flockHow) (taken bool, err error) {
	op := unix.LOCK_SH
	if how == lockExclusive {
		op = unix.LOCK_EX
	}
	for {
		err := unix.Flock(fd, op|unix.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case unix.EWOULDBLOCK:
			return false, nil
		case unix.EINTR:
			continue
		}
		return false, err
	}
}

// sysProcLocks reads /proc/locks, the file locks of the system.
func sysProcLocks() ([]byte, error) { return os.ReadFile("/proc/locks") }

// sysFlockDescriptorHolders returns the processes that have a descriptor
// on an open file description holding a flock on the file id (MAJ:MIN:INO,
// as /proc/locks writes it): /proc/PID/fdinfo/N lists on "lock:" lines the
// flocks of the description that N refers to, whoever took them (Linux
// fs/locks.c, show_fd_locks). A flock belongs to the description, so these
// are the processes that hold it, children that inherited it included.
// Processes whose fdinfo this one may not read (another user's) are
// missed. It reads every descriptor of every process: for error paths.
func sysFlockDescriptorHolders(id string) []int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + p.Name() + "/fdinfo/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			info, err := os.ReadFile(dir + fd.Name())
			if err == nil && len(flockHolders(info, id)) > 0 {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// sysProcState returns process pid's state letter (/proc/PID/stat field
// 3: R, S, D, T, t, Z, ...), 0 if it cannot be read.
func sysProcState(pid int) byte {
	state, _, err := readProcStat(pid)
	if err != nil {
		return 0
	}
	return state
}

// sysMemfd creates an anonymous memory file that can be sealed.
func sysMemfd(name string) (int, error) {
	return unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
}

// sysSeal seals fd against shrinking and growing, and the seals themselves.
func sysSeal(fd uintptr) error {
	_, err := unix.FcntlInt(fd, unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	return err
}

// sysSealedAgainstShrink reports whether fd is a memfd sealed against
// shrinking (F_SEAL_SHRINK).
func sysSealedAgainstShrink(fd int) bool {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	return err == nil && seals&unix.F_SEAL_SHRINK != 0
}

// errNotReadWrite: sysReopen's descriptor is not open for reading and
// writing.
var errNotReadWrite = fmt.Errorf("%w: the descriptor is not open for reading and writing", os.ErrPermission)

// sysReopen opens the file behind fd again, read-write and close-on-exec,
// through /proc/self/fd: a new open file description, unlike dup(2). A
// region's file lock (flock) belongs to the open file description, and a
// descriptor that a child inherits, or that dup made, shares its parent's:
// flock calls through it never conflict with the parent's, and an unlock
// through either releases both. Every Region must lock through a
// description of its own, or two processes attach into one slot.
//
// The reopen asks for read-write access whatever fd allows, so fd itself
// must be open for reading and writing (not O_PATH), else errNotReadWrite:
// a read-only descriptor must not become a writable region (a memfd's
// mode is 0777).
func sysReopen(fd uintptr) (int, error) {
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return -1, err
	}
	if fl&unix.O_ACCMODE != unix.O_RDWR || fl&unix.O_PATH != 0 {
		return -1, errNotReadWrite
	}
	for {
		nfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(fd)), unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return nfd, err
		}
	}
}

// osYield gives the processor to another runnable thread of any process
// (sched_yield(2)). An MPSC producer waiting on a claim word held by
// another process needs that process to run; runtime.Gosched only yields
// to this process's goroutines, and with none runnable spins out the time
// slice.
func osYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
