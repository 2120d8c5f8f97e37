package shm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"
)

// The open sequence of a region: create (exclusive, then the header
// published last), open (wait for the creator, map, validate in the
// documented order, attach), the memfd variants, removal, and the checks
// of a mapped file's size. Portable: the system calls it makes are the
// sys* helpers of region_linux.go (region_other.go: ErrUnsupported).

// fileInfo is what a region needs of fstat(2) or lstat(2).
type fileInfo struct {
	size     int64
	mode     uint32 // st_mode: type and permission bits
	uid      uint32
	dev, ino uint64
	// devMajor, devMinor: dev's numbers, as /proc/locks shows them.
	devMajor, devMinor uint32
	regular            bool
}

type openMode int

const (
	modeOpen openMode = iota
	modeCreate
	modeEither
	modeObserve         // for Inspect: shared file lock, no process slot; read-only if it cannot write
	modeObserveReadOnly // modeObserve, read-only even where it could write
)

// Create creates a new region file of size bytes (0 means
// DefaultRegionSize; the minimum is 45056, the header and tables) and opens
// it. It fails with an error satisfying errors.Is(err, fs.ErrExist) if the
// path exists, and with ErrRegionTooSmall if size is negative or below the
// minimum. A path without a slash is a name under /dev/shm.
func Create(path string, size int64, opts *Options) (*Region, error) {
	return openRegion(path, size, opts, modeCreate)
}

// Open opens an existing region file, waiting up to
// Options.InitTimeout for a concurrent creator. It returns the
// validation errors listed on Region.
func Open(path string, opts *Options) (*Region, error) {
	return openRegion(path, 0, opts, modeOpen)
}

// OpenOrCreate opens the region at path, creating it with size bytes
// if it does not exist. Of several processes racing here, exactly one
// creates and initializes it; the others wait for its header. size matters
// only to the creator: an existing region is opened at the size it was
// created with, whatever size says (Region.Size reports it).
func OpenOrCreate(path string, size int64, opts *Options) (*Region, error) {
	return openRegion(path, size, opts, modeEither)
}

// RemoveOptions are the options of Remove; nil means the defaults.
type RemoveOptions struct {
	// Force removes the file even while live processes are attached
	// (they keep their mappings and go on using the region, which nobody
	// else can open any more), and removes a region that fails its open
	// checks (truncated, resized, damaged checksum or table) as long as
	// the file still starts with a region header's signature: the magic
	// number, ABI version 1 and the layout that version fixes (the first
	// 32 bytes less the size field). It never removes a file without
	// that signature: one whose magic is not a region's (ErrBadMagic),
	// one that was never initialized (ErrNotInitialized: an empty or
	// all-zero file carries nothing to say whose it is), or a header of
	// another ABI version (ErrBadVersion).
	Force bool
}

// Remove removes the region file at path (a name without a slash is
// looked up under DefaultRegionDir), the lifecycle step that a region
// needs once every process is done with it: the file otherwise outlives
// them all (under /dev/shm, until reboot).
//
// It validates the file as Open does, without attaching, and then,
// under the region's exclusive flock(2) — the lock that attaching takes —
// counts the live processes in its process table. If there are any it
// refuses with ErrRegionInUse (naming their PIDs) unless opts.Force is
// set. A dead process's slot does not count: a region whose processes all
// died (killed, crashed) is removable. It unlinks the file only if the
// path still names the file it validated. A process that opened the path
// just before the removal and attaches after it is attached to a file
// that no one can open any more, as with any removed file.
//
// The errors are Open's (fs.ErrNotExist for a missing file; with
// Force, those of a file without a region's signature: see
// RemoveOptions.Force), ErrRegionInUse, ErrFileLockTimeout (the region's
// file lock stayed held for DefaultInitTimeout; Force removes the region
// anyway), and ErrUnsupported outside Linux.
func Remove(path string, opts *RemoveOptions) error {
	force := opts != nil && opts.Force
	path = regionPath(path)
	if err := removeRegion(path, force); err != nil {
		if re, ok := err.(*regionError); ok {
			err = re.err // the open's, renamed: this is a removal
		}
		return &regionError{op: "remove region " + path, err: err}
	}
	return nil
}

func openRegion(path string, size int64, opts *Options, mode openMode) (*Region, error) {
	if !regionsSupported {
		return nil, ErrUnsupported
	}
	path = regionPath(path)
	if path == "" {
		return nil, &regionError{op: "open region", err: fs.ErrInvalid}
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	lim := limitsOf(o)
	// Failures below return bare causes; they are named here, once.
	for {
		if mode == modeCreate || mode == modeEither {
			if o.Mode&0o022 != 0 && !o.AllowUnsafePermissions {
				return nil, &regionError{op: "create region " + path, err: fmt.Errorf("%w: mode %#o lets group or others write it (shm.Options.AllowUnsafePermissions opts in)", ErrUnsafePermissions, o.Mode.Perm())}
			}
			r, err := createRegion(path, size, o.Mode, lim)
			if err == nil {
				return r, nil
			}
			if mode == modeCreate || !errors.Is(err, fs.ErrExist) {
				return nil, &regionError{op: "create region " + path, err: err}
			}
		}
		r, err := openExisting(path, lim, mode, o.AllowUnsafePermissions)
		if errors.Is(err, ErrNotInitialized) && (mode == modeOpen || mode == modeEither) {
			if rr, rerr := reclaimAbandoned(path, size, lim, o.AllowUnsafePermissions); rr != nil || rerr != nil {
				r, err = rr, rerr
			}
		}
		if mode == modeEither && errors.Is(err, fs.ErrNotExist) && time.Now().Before(lim.init) {
			continue // removed since our create failed: try again
		}
		if err != nil {
			return nil, &regionError{op: "open region " + path, err: err}
		}
		return r, nil
	}
}

// openLimits are an open's time limits, from Options.InitTimeout.
type openLimits struct {
	init time.Time // for a concurrent creator to publish the header
	lock time.Time // for the region's file lock during the open
	// lockTimeout bounds each later wait of the Region for its file lock
	// (object creation, Close, Inspect).
	lockTimeout time.Duration
}

// limitsOf returns the limits of an open with options o, starting now:
// InitTimeout (0: DefaultInitTimeout) for the creator and the file lock
// alike; a negative InitTimeout does not wait for a creator, and waits
// DefaultInitTimeout for the file lock, which a running process holds
// for microseconds.
func limitsOf(o Options) openLimits {
	if o.InitTimeout == 0 {
		o.InitTimeout = DefaultInitTimeout
	}
	lim := openLimits{lockTimeout: o.InitTimeout}
	if o.InitTimeout < 0 {
		lim.lockTimeout = DefaultInitTimeout
	}
	now := time.Now()
	lim.init = now.Add(max(o.InitTimeout, 0))
	lim.lock = now.Add(lim.lockTimeout)
	return lim
}

func createRegion(path string, size int64, mode os.FileMode, lim openLimits) (r *Region, err error) {
	if size == 0 {
		size = DefaultRegionSize
	}
	if size < regionMinSize || size > math.MaxInt {
		return nil, fmt.Errorf("%w: %d bytes requested, minimum %d", ErrRegionTooSmall, size, regionMinSize)
	}
	// The umask must not narrow the mode the caller asked for.
	fd, err := sysCreate(path, mode.Perm())
	if err != nil {
		return nil, err
	}
	// Nobody else can have initialized it if we fail: remove it so that
	// openers waiting for the header give up or create anew.
	return initRegion(path, fd, size, lim, func() { sysUnlink(path) })
}

// initRegion sizes the new, empty file fd (which it owns from now on),
// writes and publishes the header, and attaches. On failure it runs undo
// and closes fd.
func initRegion(path string, fd int, size int64, lim openLimits, undo func()) (r *Region, err error) {
	f := os.NewFile(uintptr(fd), path)
	var data []byte
	defer func() {
		if err != nil {
			if !errors.Is(err, errPublishedMeanwhile) {
				undo()
			}
			if data != nil {
				sysMunmap(data)
			}
			f.Close()
		}
	}()
	// Hold the file lock while initializing: openers that want to attach
	// take it too, and table changes happen under it. The file is new,
	// but any process that can open it can lock it.
	if err := lockFile(fd, lockExclusive, lim.lock); err != nil {
		return nil, err
	}
	// Before we held the lock, an opener may have reclaimed the file as
	// an abandoned creation (regionreclaim.go) and published it.
	var magic [8]byte
	if n, _ := sysPread(fd, magic[:], hdrMagic); !allZero(magic[:max(n, 0)]) {
		flock(fd, lockUnlock)
		return nil, errPublishedMeanwhile
	}
	if err := sysTruncate(fd, size); err != nil {
		return nil, err
	}
	data, err = sysMmap(fd, int(size), false)
	if err != nil {
		return nil, err
	}
	ne.PutUint32(data[hdrVersion:], regionVersion)
	ne.PutUint32(data[hdrHeaderSize:], regionArenaOffset)
	ne.PutUint64(data[hdrSize:], uint64(size))
	ne.PutUint32(data[hdrTableCap:], regionTableCap)
	ne.PutUint32(data[hdrProcSlots:], regionProcSlots)
	ne.PutUint64(data[hdrCreatedNs:], uint64(time.Now().UnixNano()))
	me, _ := selfIdentity() // an error fails attach, below
	ne.PutUint64(data[hdrPIDNamespace:], me.pidNS)
	word64(data, hdrCountChecksum).Store(countChecksumWord(0, headerChecksum(data, 0)))
	if testHookBeforePublish != nil {
		testHookBeforePublish()
	}
	// Publish: a release store of the magic, after every header field.
	// Openers load it with acquire ordering (Go's atomics are sequentially
	// consistent, which is stronger) before reading anything else.
	word64(data, hdrMagic).Store(regionMagic)
	wakeShared(word32(data, hdrMagic), math.MaxInt32)

	r = newRegion(path, f, data, lim.lockTimeout)
	if err := r.attach(nil); err != nil {
		return nil, err
	}
	flock(fd, lockUnlock)
	return r, nil
}

// openExisting opens and validates an existing region file, waiting until
// lim.init for a concurrent creator to publish its header.
func openExisting(path string, lim openLimits, mode openMode, allowUnsafe bool) (r *Region, err error) {
	readOnly := mode == modeObserveReadOnly
	fd, err := sysOpen(path, readOnly)
	if mode == modeObserve && sysWriteDenied(err) {
		// An observer needs only to read (a monitoring user may have
		// no more than that): map the file read-only, write nothing.
		readOnly = true
		fd, err = sysOpen(path, true)
	}
	if err != nil {
		return nil, sysOpenError(err)
	}
	return openFD(path, fd, readOnly, lim, mode, allowUnsafe)
}

// openFD opens the region in the file fd (which it owns from now on: a
// failed open closes it): waits for its creator, maps it, validates it and
// attaches (or, for an observer, only reads). Faults on the mapping (the
// file truncated under us) become ErrTruncated.
func openFD(path string, fd int, readOnly bool, lim openLimits, mode openMode, allowUnsafe bool) (r *Region, err error) {
	deadline := lim.init
	f := os.NewFile(uintptr(fd), path)
	var data []byte
	defer func() {
		if err != nil {
			if data != nil {
				sysMunmap(data)
			}
			f.Close()
		}
	}()
	st, err := sysFstat(fd)
	if err != nil {
		return nil, err
	}
	if !st.regular {
		return nil, fmt.Errorf("%w (mode %#o)", ErrNotRegularFile, st.mode)
	}
	observe := mode == modeObserve || mode == modeObserveReadOnly
	if !observe && !allowUnsafe {
		if err := checkPermissions(fd, st); err != nil {
			return nil, err
		}
	}

	// Wait for the creator: first for its ftruncate, then for the magic.
	for {
		if st, err = sysFstat(fd); err != nil {
			return nil, err
		}
		if st.size >= regionMinSize {
			break
		}
		var head [8]byte
		n, _ := sysPread(fd, head[:], 0)
		if !allZero(head[:max(n, 0)]) {
			// Content, but short: unless the creator sized and wrote the
			// file between our stat and our read (then look again), it
			// is too short, and validation will say what is wrong.
			size := st.size
			if st, err = sysFstat(fd); err != nil {
				return nil, err
			}
			if st.size == size || !time.Now().Before(deadline) {
				break
			}
			continue
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: %d bytes, all zero so far (creator died? remove the file)", ErrNotInitialized, st.size)
		}
		time.Sleep(time.Millisecond)
	}
	if st.size >= regionMinSize {
		if st.size > math.MaxInt {
			return nil, fmt.Errorf("%w: %d bytes", ErrBadSize, st.size)
		}
		data, err = sysMmap(fd, int(st.size), readOnly)
		if err != nil {
			return nil, err
		}
	}
	// From here on the mapping is read: a file truncated meanwhile faults,
	// and the fault is reported, not fatal.
	err = guardFault(func() error { return truncatedError(fd, len(data)) }, func() error {
		r, err = mappedOpen(path, f, fd, data, st.size, readOnly, lim, mode)
		return err
	})
	return r, err
}

// mappedOpen is the part of openFD after the mapping (data; nil for a
// file too short to map, whose header is read with pread).
func mappedOpen(path string, f *os.File, fd int, data []byte, size int64, readOnly bool, lim openLimits, mode openMode) (r *Region, err error) {
	if data != nil {
		// Acquire-load the magic; while it is zero the creator has not
		// published the header: sleep on it (the creator wakes us).
		for word64(data, hdrMagic).Load() == 0 {
			left := time.Until(lim.init)
			if left <= 0 {
				return nil, fmt.Errorf("%w: header not published (creator died? remove the file)", ErrNotInitialized)
			}
			sleepShared(context.Background(), word32(data, hdrMagic), 0, min(left, 10*time.Millisecond))
		}
	}

	observe := mode == modeObserve || mode == modeObserveReadOnly
	how := lockExclusive
	if observe {
		how = lockShared
	}
	if err := lockFile(fd, how, lim.lock); err != nil {
		return nil, err
	}
	defer flock(fd, lockUnlock)
	if data != nil {
		// Validate against the size we mapped, whatever happened since.
		size = int64(len(data))
	}
	hdr := make([]byte, regionArenaOffset)
	if data != nil {
		copy(hdr, data)
	} else if _, err := sysPread(fd, hdr, 0); err != nil {
		return nil, err
	}
	h, err := parseRegionHeader(hdr, size)
	if data == nil && err == nil {
		err = ErrBadSize // unreachable: parse rejects files below the minimum size
	}
	if err != nil {
		return nil, err
	}
	r = newRegion(path, f, data, lim.lockTimeout)
	r.readOnly = readOnly
	r.learn(h.objects)
	if observe {
		// Without our identity (no /proc) nothing can be checked, and
		// every holder will look alive.
		me, _ := selfIdentity()
		if err := r.checkPIDNamespace(me, false); err != nil {
			return nil, err
		}
		return r, nil
	}
	if err := r.attach(h.objects); err != nil {
		return nil, err
	}
	r.reapSemaphores(r.objects) // housekeeping: semaphorereclaim.go
	return r, nil
}

// CreateMemfd creates a region in an anonymous memory file
// (memfd_create(2)) of size bytes (0: DefaultRegionSize) and seals it
// against shrinking and growing (F_SEAL_SHRINK, F_SEAL_GROW, then
// F_SEAL_SEAL): no process, whatever its rights, can truncate it, so the
// truncation described on Region cannot happen. It has no path: name (at
// most 249 bytes) only labels it in /proc/PID/fd and in errors, and its
// Path is "memfd:" + name. Share it with related processes by passing its
// file, r.File(), as exec.Cmd.ExtraFiles (the child sees it as fd 3 + its
// index there) or over a Unix socket (SCM_RIGHTS); they open it with
// OpenFile. It lives until the last process holding it closes it.
// opts.Mode and opts.AllowUnsafePermissions do not apply (a memfd is
// reachable only through its descriptor). Linux 3.17 or later.
func CreateMemfd(name string, size int64, opts *Options) (*Region, error) {
	if !regionsSupported {
		return nil, ErrUnsupported
	}
	fail := func(err error) (*Region, error) {
		return nil, &regionError{op: "create memfd region " + name, err: err}
	}
	if size == 0 {
		size = DefaultRegionSize
	}
	if size < regionMinSize || size > math.MaxInt {
		return fail(fmt.Errorf("%w: %d bytes requested, minimum %d", ErrRegionTooSmall, size, regionMinSize))
	}
	fd, err := sysMemfd(name)
	if err != nil {
		return fail(err)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	r, err := initRegion("memfd:"+name, fd, size, limitsOf(o), func() {})
	if err != nil {
		return fail(err)
	}
	if err := sysSeal(r.file.Fd()); err != nil {
		r.close()
		return fail(fmt.Errorf("sealing: %w", err))
	}
	return r, nil
}

// OpenFile opens the region in an open file: one passed by
// CreateMemfd's creator (os.NewFile(3, "region") in a child started
// with ExtraFiles), or any region file. It validates and attaches as
// Open does, on a new open of the same file through /proc/self/fd, so
// the caller may close f afterwards; the Region's Path is f.Name(). Not on
// a duplicate of f's descriptor: the region's file lock, under which a
// process claims its slot in the process table, belongs to the open file
// description, which an inherited or duplicated descriptor shares with the
// creator and every other child, and locks through one description never
// exclude each other. Linux: /proc must be mounted (owner-death detection
// needs it too); the reopen fails with the file's permission error if the
// caller may not open the file itself. The file must be open for reading
// and writing: a descriptor that is not (O_RDONLY, O_PATH) is refused with
// an error wrapping os.ErrPermission, as the reopen would otherwise grant
// what the descriptor does not; a nil f is refused with os.ErrInvalid. A
// regular file (not a sealed memfd) must pass the permission check
// (ErrUnsafePermissions unless opts.AllowUnsafePermissions).
func OpenFile(f *os.File, opts *Options) (*Region, error) {
	if !regionsSupported {
		return nil, ErrUnsupported
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if f == nil {
		return nil, &regionError{op: "open region", err: fmt.Errorf("%w: a nil *os.File", os.ErrInvalid)}
	}
	fd, err := sysReopen(f.Fd())
	if errors.Is(err, errNotReadWrite) {
		return nil, &regionError{op: "open region " + f.Name(), err: err}
	}
	if err != nil {
		return nil, &regionError{op: "open region " + f.Name(), err: fmt.Errorf("reopening its descriptor through /proc/self/fd, for a file lock of this Region's own: %w", err)}
	}
	r, err := openFD(f.Name(), fd, false, limitsOf(o), modeOpen, o.AllowUnsafePermissions)
	if err != nil {
		return nil, &regionError{op: "open region " + f.Name(), err: err}
	}
	return r, nil
}

// removeRegion is Remove, path already resolved.
func removeRegion(path string, force bool) error {
	if !regionsSupported {
		return ErrUnsupported
	}
	r, err := openRegion(path, 0, &Options{InitTimeout: -1}, modeObserve)
	if err != nil {
		if !force || errors.Is(err, ErrNotRegularFile) || errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if re, ok := err.(*regionError); ok {
			err = re.err // Remove names the removal
		}
		return removeDamaged(path, err)
	}
	defer r.close()
	fd := int(r.file.Fd())
	if err := r.lockFile(lockExclusive); err != nil {
		return err
	}
	defer flock(fd, lockUnlock)
	if pids := r.livePIDs(); len(pids) > 0 && !force {
		return fmt.Errorf("%w: PIDs %v (stop them, or force the removal)", ErrRegionInUse, pids)
	}
	opened, err := sysFstat(fd)
	if err != nil {
		return err
	}
	return unlinkIfSame(path, opened)
}

// removeDamaged is a forced removal of the file at path, which failed to
// open as a region with openErr: it goes only if it starts with a region
// header's signature (RemoveOptions.Force), read from the file it unlinks
// (the path must still name the file that was read), never through a link.
// A file without it is refused with openErr.
func removeDamaged(path string, openErr error) error {
	fd, err := sysOpen(path, true)
	if err != nil {
		return sysOpenError(err)
	}
	defer sysClose(fd)
	opened, err := sysFstat(fd)
	if err != nil {
		return err
	}
	if !opened.regular {
		return fmt.Errorf("%w (mode %#o)", ErrNotRegularFile, opened.mode)
	}
	var head [hdrFlags]byte
	n, err := sysPread(fd, head[:], 0)
	if err != nil {
		return err
	}
	if !hasRegionSignature(head[:n]) {
		return fmt.Errorf("%w (refused even when forced: the file does not start with a region header, so nothing shows it is a region; if it is yours, rm(1) removes it)", openErr)
	}
	return unlinkIfSame(path, opened)
}

// unlinkIfSame unlinks path only if it still names the file opened was
// taken from (same device and inode, not through a link): a path replaced
// while it was being removed is left alone.
func unlinkIfSame(path string, opened fileInfo) error {
	now, err := sysLstat(path)
	if err != nil {
		return err
	}
	if opened.dev != now.dev || opened.ino != now.ino {
		return fmt.Errorf("%w: the path was replaced while it was being removed", fs.ErrExist)
	}
	return sysUnlink(path)
}

// hasRegionSignature reports whether head, a file's first bytes, is the
// start of a version-1 region header: the magic number (published last by
// the creator, so a file that has it was initialized), the version, and
// the layout fields that the version fixes, 24 bytes that a file of other
// origin does not hold by chance (the magic alone is ASCII "lockword",
// which a text file may start with). The size field between them is not
// part of it: a truncated or resized region is still ours.
func hasRegionSignature(head []byte) bool {
	return len(head) >= hdrFlags &&
		ne.Uint64(head[hdrMagic:]) == regionMagic &&
		ne.Uint32(head[hdrVersion:]) == regionVersion &&
		ne.Uint32(head[hdrHeaderSize:]) == regionArenaOffset &&
		ne.Uint32(head[hdrTableCap:]) == regionTableCap &&
		ne.Uint32(head[hdrProcSlots:]) == regionProcSlots
}

// checkPermissions refuses a region file that others may write: writable
// by group or others, or owned by another user (see
// Options.AllowUnsafePermissions). A sealed memfd (CreateMemfd)
// has mode 0777 but no name anyone could open: it reaches only the
// processes it was passed to, so it passes.
func checkPermissions(fd int, st fileInfo) error {
	if sysSealedAgainstShrink(fd) {
		return nil
	}
	if st.mode&0o022 != 0 {
		return fmt.Errorf("%w: mode %#o lets group or others write it (shm.Options.AllowUnsafePermissions opts in)", ErrUnsafePermissions, st.mode&0o777)
	}
	if uid := uint32(os.Geteuid()); st.uid != uid {
		return fmt.Errorf("%w: owned by uid %d, not by this process's uid %d (shm.Options.AllowUnsafePermissions opts in)", ErrUnsafePermissions, st.uid, uid)
	}
	return nil
}

// truncatedError describes a mapping of mapped bytes whose file (fd) has
// shrunk: ErrTruncated, with the sizes.
func truncatedError(fd, mapped int) error {
	st, err := sysFstat(fd)
	if err != nil {
		return fmt.Errorf("%w: a read of the mapping faulted, and the file cannot be examined: %v", ErrTruncated, err)
	}
	return fmt.Errorf("%w: the file has %d bytes, the region %d (someone truncated it while it was mapped)", ErrTruncated, st.size, mapped)
}

// checkSize returns ErrTruncated if r's file is now shorter than its
// mapping: looked at before touching pages that a truncation would make
// fault.
func (r *Region) checkSize() error {
	st, err := sysFstat(int(r.file.Fd()))
	if err != nil {
		return err
	}
	if st.size < int64(len(r.data)) {
		return truncatedError(int(r.file.Fd()), len(r.data))
	}
	return nil
}

// Check reports whether the region is still sound: its file no shorter
// than the mapping (else ErrTruncated) and its header as valid as at open
// (ErrBadMagic, ErrBadVersion, ErrBadSize, ErrBadChecksum, ...: someone
// wrote over it). It reads with faults turned into errors, so a file
// truncated under it is reported, never fatal; it costs an fstat and a
// copy of the header (44 KiB), and takes no lock that lock calls take.
// Call it from a health check, or after a lock call returned ErrCorrupt.
// It returns ErrRegionClosed after Close.
func (r *Region) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrRegionClosed
	}
	if err := r.checkSize(); err != nil {
		return &regionError{op: "region " + r.path, err: err}
	}
	fd := int(r.file.Fd())
	err := guardFault(func() error { return truncatedError(fd, len(r.data)) }, func() error {
		hdr := make([]byte, regionArenaOffset)
		copy(hdr, r.data)
		_, err := parseRegionHeader(hdr, int64(len(r.data)))
		return err
	})
	if err != nil {
		return &regionError{op: "region " + r.path, err: err}
	}
	return nil
}

// faultCause is the error for a fault on r's mapping: its file shrank.
func (r *Region) faultCause() error { return truncatedError(int(r.file.Fd()), len(r.data)) }
