//go:build linux

package lockword

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockword/lockword/internal/wait"
)

func openRegion(path string, size int64, opts *RegionOptions, mode openMode) (*Region, error) {
	path = regionPath(path)
	if path == "" {
		return nil, &regionError{op: "open region", err: fs.ErrInvalid}
	}
	var o RegionOptions
	if opts != nil {
		o = *opts
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.InitTimeout == 0 {
		o.InitTimeout = DefaultInitTimeout
	}
	deadline := time.Now().Add(max(o.InitTimeout, 0))
	// Failures below return bare causes; they are named here, once.
	for {
		if mode == modeCreate || mode == modeEither {
			if o.Mode&0o022 != 0 && !o.AllowUnsafePermissions {
				return nil, &regionError{op: "create region " + path, err: fmt.Errorf("%w: mode %#o lets group or others write it (RegionOptions.AllowUnsafePermissions opts in)", ErrUnsafePermissions, o.Mode.Perm())}
			}
			r, err := createRegion(path, size, o.Mode)
			if err == nil {
				return r, nil
			}
			if mode == modeCreate || !errors.Is(err, fs.ErrExist) {
				return nil, &regionError{op: "create region " + path, err: err}
			}
		}
		r, err := openExisting(path, deadline, mode, o.AllowUnsafePermissions)
		if mode == modeEither && errors.Is(err, fs.ErrNotExist) && time.Now().Before(deadline) {
			continue // removed since our create failed: try again
		}
		if err != nil {
			return nil, &regionError{op: "open region " + path, err: err}
		}
		return r, nil
	}
}

func createRegion(path string, size int64, mode os.FileMode) (r *Region, err error) {
	if size == 0 {
		size = DefaultRegionSize
	}
	if size < regionMinSize || size > math.MaxInt {
		return nil, fmt.Errorf("%w: %d bytes requested, minimum %d", ErrRegionTooSmall, size, regionMinSize)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return nil, err
	}
	// The umask must not narrow the mode the caller asked for.
	if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
		unix.Unlink(path)
		unix.Close(fd)
		return nil, err
	}
	// Nobody else can have initialized it if we fail: remove it so that
	// openers waiting for the header give up or create anew.
	return initRegion(path, fd, size, func() { unix.Unlink(path) })
}

// initRegion sizes the new, empty file fd (which it owns from now on),
// writes and publishes the header, and attaches. On failure it runs undo
// and closes fd.
func initRegion(path string, fd int, size int64, undo func()) (r *Region, err error) {
	f := os.NewFile(uintptr(fd), path)
	var data []byte
	defer func() {
		if err != nil {
			undo()
			if data != nil {
				unix.Munmap(data)
			}
			f.Close()
		}
	}()
	// Hold the file lock while initializing: openers that want to attach
	// take it too, and table changes happen under it.
	if err := flock(fd, unix.LOCK_EX); err != nil {
		return nil, err
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		return nil, err
	}
	data, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
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
	// Publish: a release store of the magic, after every header field.
	// Openers load it with acquire ordering (Go's atomics are sequentially
	// consistent, which is stronger) before reading anything else.
	word64(data, hdrMagic).Store(regionMagic)
	wakeShared(word32(data, hdrMagic), math.MaxInt32)

	r = newRegion(path, f, data)
	if err := r.attach(nil); err != nil {
		return nil, err
	}
	flock(fd, unix.LOCK_UN)
	return r, nil
}

func newRegion(path string, f *os.File, data []byte) *Region {
	return &Region{path: path, file: f, data: data,
		objects: map[string]regionObject{}, mutexes: map[string]*SharedMutex{}, handles: map[string]regionHandle{}}
}

// openExisting opens and validates an existing region file, waiting until
// deadline for a concurrent creator to publish its header.
func openExisting(path string, deadline time.Time, mode openMode, allowUnsafe bool) (r *Region, err error) {
	// O_NONBLOCK: opening a FIFO must not block; regular files ignore it.
	const flags = unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	readOnly := mode == modeObserveReadOnly
	access := unix.O_RDWR
	if readOnly {
		access = unix.O_RDONLY
	}
	fd, err := unix.Open(path, access|flags, 0)
	if mode == modeObserve && (err == unix.EACCES || err == unix.EPERM || err == unix.EROFS) {
		// An observer needs only to read (a monitoring user may have
		// no more than that): map the file read-only, write nothing.
		readOnly = true
		fd, err = unix.Open(path, unix.O_RDONLY|flags, 0)
	}
	switch err {
	case unix.ELOOP:
		return nil, fmt.Errorf("%w (a symbolic link; links are not followed)", ErrNotRegularFile)
	case unix.EISDIR, unix.ENXIO:
		return nil, fmt.Errorf("%w (%v)", ErrNotRegularFile, err)
	}
	if err != nil {
		return nil, err
	}
	return openFD(path, fd, readOnly, deadline, mode, allowUnsafe)
}

// openFD opens the region in the file fd (which it owns from now on: a
// failed open closes it): waits for its creator, maps it, validates it and
// attaches (or, for an observer, only reads). Faults on the mapping (the
// file truncated under us) become ErrTruncated.
func openFD(path string, fd int, readOnly bool, deadline time.Time, mode openMode, allowUnsafe bool) (r *Region, err error) {
	f := os.NewFile(uintptr(fd), path)
	var data []byte
	defer func() {
		if err != nil {
			if data != nil {
				unix.Munmap(data)
			}
			f.Close()
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%w (mode %#o)", ErrNotRegularFile, st.Mode)
	}
	observe := mode == modeObserve || mode == modeObserveReadOnly
	if !observe && !allowUnsafe {
		if err := checkPermissions(fd, &st); err != nil {
			return nil, err
		}
	}

	// Wait for the creator: first for its ftruncate, then for the magic.
	for {
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, err
		}
		if st.Size >= regionMinSize {
			break
		}
		var head [8]byte
		n, _ := unix.Pread(fd, head[:], 0)
		if !allZero(head[:max(n, 0)]) {
			// Content, but short: unless the creator sized and wrote the
			// file between our stat and our read (then look again), it
			// is too short, and validation will say what is wrong.
			size := st.Size
			if err := unix.Fstat(fd, &st); err != nil {
				return nil, err
			}
			if st.Size == size || !time.Now().Before(deadline) {
				break
			}
			continue
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: %d bytes, all zero so far (creator died? remove the file)", ErrNotInitialized, st.Size)
		}
		time.Sleep(time.Millisecond)
	}
	if st.Size >= regionMinSize {
		if st.Size > math.MaxInt {
			return nil, fmt.Errorf("%w: %d bytes", ErrBadSize, st.Size)
		}
		prot := unix.PROT_READ | unix.PROT_WRITE
		if readOnly {
			prot = unix.PROT_READ
		}
		data, err = unix.Mmap(fd, 0, int(st.Size), prot, unix.MAP_SHARED)
		if err != nil {
			return nil, err
		}
	}
	// From here on the mapping is read: a file truncated meanwhile faults,
	// and the fault is reported, not fatal.
	err = guardFault(func() error { return truncatedError(fd, len(data)) }, func() error {
		r, err = mappedOpen(path, f, fd, data, &st, readOnly, deadline, mode)
		return err
	})
	return r, err
}

// mappedOpen is the part of openFD after the mapping (data; nil for a
// file too short to map, whose header is read with pread).
func mappedOpen(path string, f *os.File, fd int, data []byte, st *unix.Stat_t, readOnly bool, deadline time.Time, mode openMode) (r *Region, err error) {
	if data != nil {
		// Acquire-load the magic; while it is zero the creator has not
		// published the header: sleep on it (the creator wakes us).
		for word64(data, hdrMagic).Load() == 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, fmt.Errorf("%w: header not published (creator died? remove the file)", ErrNotInitialized)
			}
			sleepShared(context.Background(), word32(data, hdrMagic), 0, min(left, 10*time.Millisecond))
		}
	}

	observe := mode == modeObserve || mode == modeObserveReadOnly
	how := unix.LOCK_EX
	if observe {
		how = unix.LOCK_SH
	}
	if err := flock(fd, how); err != nil {
		return nil, err
	}
	defer flock(fd, unix.LOCK_UN)
	if data != nil {
		// Validate against the size we mapped, whatever happened since.
		st.Size = int64(len(data))
	}
	hdr := make([]byte, regionArenaOffset)
	if data != nil {
		copy(hdr, data)
	} else if _, err := unix.Pread(fd, hdr, 0); err != nil {
		return nil, err
	}
	h, err := parseRegionHeader(hdr, st.Size)
	if data == nil && err == nil {
		err = ErrBadSize // unreachable: parse rejects files below the minimum size
	}
	if err != nil {
		return nil, err
	}
	r = newRegion(path, f, data)
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
	return r, nil
}

func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

func (r *Region) learn(objs []regionObject) {
	for _, o := range objs {
		r.objects[o.name] = o
	}
}

// attach claims a process-table slot, under the exclusive file lock. objs
// are the region's objects, whose owner words the new generation must not
// match.
func (r *Region) attach(objs []regionObject) error {
	me, err := selfIdentity()
	if err != nil {
		return err
	}
	if err := r.checkPIDNamespace(me, true); err != nil {
		return err
	}
	hint := word32(r.data, hdrSlotHint).Load() % regionProcSlots
	slot, found := uint32(0), false
	// A free slot first, searching round-robin from the hint so that
	// generations advance evenly; failing that, one whose process died.
	for i := range uint32(regionProcSlots) {
		s := (hint + i) % regionProcSlots
		if word32(r.slotWord(s), procState).Load()&procLive == 0 {
			slot, found = s, true
			break
		}
	}
	if !found {
		// Prefer a slot that no lock word names: a dead holder's slot
		// keeps its identity until the lock is recovered, so that the
		// recoverer and inspect can name its PID. One pass over the
		// others, then one over those.
		named := namedTokens(r.data, objs)
		for pass := 0; pass < 2 && !found; pass++ {
			for i := range uint32(regionProcSlots) {
				s := (hint + i) % regionProcSlots
				token := makeToken(s, word32(r.slotWord(s), procState).Load()&procGenMask)
				if named[token] != (pass == 1) {
					continue
				}
				if alive, _ := r.tokenAlive(token); !alive {
					slot, found = s, true
					break
				}
			}
		}
	}
	if !found {
		return fmt.Errorf("%w: %d processes attached", ErrTooManyProcesses, regionProcSlots)
	}
	sw := r.slotWord(slot)
	state := word32(sw, procState)
	gen := state.Load() & procGenMask
	// Not live while the identity changes: a checker that read the old
	// state sees it change and knows the old incarnation is gone.
	state.Store(gen)
	gen = r.nextGen(slot, gen, objs)
	word32(sw, procPID).Store(me.pid)
	word64(sw, procStart).Store(me.start)
	word64(sw, procBoot).Store(ne.Uint64(me.boot[:8]))
	word64(sw, procBoot+8).Store(ne.Uint64(me.boot[8:]))
	// Publish: from here on lock words may name (slot, gen).
	state.Store(procLive | gen)
	word32(r.data, hdrSlotHint).Store((slot + 1) % regionProcSlots)
	r.slot, r.token = slot, makeToken(slot, gen)
	return nil
}

// checkPIDNamespace compares the region's PID namespace record with ours,
// under the file lock (exclusive if bind). The record binds while a
// process of this boot is attached (a live slot, its process dead or not:
// a dead holder's liveness must stay checkable); otherwise it is stale,
// and with bind (attach) we record our own namespace. It fails with
// ErrForeignPIDNamespace when both namespaces are known and differ, and
// sets r.pidNS, the namespace in which the region's PIDs can be checked.
func (r *Region) checkPIDNamespace(me procIdentity, bind bool) error {
	rec := word64(r.data, hdrPIDNamespace)
	ns := rec.Load()
	if ns != me.pidNS && !r.attachedThisBoot(me.boot) {
		if bind {
			rec.Store(me.pidNS)
		}
		ns = me.pidNS
	}
	if ns != 0 && me.pidNS != 0 && ns != me.pidNS {
		return fmt.Errorf("%w: its processes are in PID namespace pid:[%d], this process is in pid:[%d]; "+
			"owner-death detection looks holders up by PID in /proc, so every process of a region must share one PID namespace "+
			"(Kubernetes: shareProcessNamespace: true for the containers of a pod)", ErrForeignPIDNamespace, ns, me.pidNS)
	}
	r.pidNS = ns
	return nil
}

// attachedThisBoot reports whether a live slot holds a process of the boot
// with ID boot.
func (r *Region) attachedThisBoot(boot [16]byte) bool {
	for s := range uint32(regionProcSlots) {
		sw := r.slotWord(s)
		if word32(sw, procState).Load()&procLive != 0 &&
			word64(sw, procBoot).Load() == ne.Uint64(boot[:8]) && word64(sw, procBoot+8).Load() == ne.Uint64(boot[8:]) {
			return true
		}
	}
	return false
}

// nextGen returns the generation after gen for slot, skipping 0, the
// reserved all-ones value, and any generation that an owner word in the
// region still names (a holder that died long ago): reissuing it would make
// a dead holder look alive.
func (r *Region) nextGen(slot, gen uint32, objs []regionObject) uint32 {
	inUse := namedTokens(r.data, objs)
	for range ownerGenMax { // every generation once: if all are named, reuse the next
		gen++
		if gen > ownerGenMax {
			gen = 1
		}
		if !inUse[makeToken(slot, gen)] {
			return gen
		}
	}
	// Only a region whose owner words were written to name every
	// generation of this slot gets here; their "owners" are not ours.
	return gen%ownerGenMax + 1
}

// namedTokens returns the owner tokens that the owner words of objs, in the
// mapping data, name now.
func namedTokens(data []byte, objs []regionObject) map[uint32]bool {
	named := map[uint32]bool{}
	for _, o := range objs {
		for _, w := range objectKinds[o.kind].ownerWords {
			named[word32(data, o.offset+uint64(w)).Load()&ownerMask] = true
		}
	}
	return named
}

// tokenAlive reports whether the process that owns token is alive, and
// its PID: 0 if unknown, when the slot no longer carries the token's
// incarnation (the PID there now is another process's). It errs towards
// alive (see processAlive).
func (r *Region) tokenAlive(token uint32) (alive bool, pid uint32) {
	if token == r.token {
		return true, uint32(os.Getpid())
	}
	sw := r.slotWord(tokenSlot(token))
	state := word32(sw, procState)
	st := state.Load()
	id := procIdentity{pid: word32(sw, procPID).Load(), start: word64(sw, procStart).Load(), pidNS: r.pidNS}
	ne.PutUint64(id.boot[:8], word64(sw, procBoot).Load())
	ne.PutUint64(id.boot[8:], word64(sw, procBoot+8).Load())
	if st != procLive|tokenGen(token) || state.Load() != st {
		// The slot no longer carries this incarnation: it detached
		// (never while holding) or was reclaimed after it died. Its
		// identity is gone with it: whoever is there now is not the
		// holder.
		return false, 0
	}
	return processAliveFunc(id), id.pid
}

// processAliveFunc is processAlive; tests replace it with deliberately
// broken checks to show that the owner-identity tests catch them.
var processAliveFunc = processAlive

func (r *Region) pid() int { return os.Getpid() }

// object returns the named object of the given kind, creating it with size
// bytes if it does not exist. r.mu must be held. This is the one allocator
// for every kind: a new kind's constructor is a call to it and a wrapper
// around the bytes it returns.
// readHeader copies and parses the header and object table as they are
// now. The caller holds the file lock. It looks at the file's size first:
// reading a truncated file would fault.
func (r *Region) readHeader() (h *regionHeader, hdr []byte, err error) {
	if err := r.checkSize(); err != nil {
		return nil, nil, &regionError{op: "region " + r.path, err: err}
	}
	hdr = make([]byte, regionArenaOffset)
	if err := guardFault(func() error { return truncatedError(int(r.file.Fd()), len(r.data)) }, func() error {
		copy(hdr, r.data)
		return nil
	}); err != nil {
		return nil, nil, &regionError{op: "region " + r.path, err: err}
	}
	if h, err = parseRegionHeader(hdr, int64(len(r.data))); err != nil {
		return nil, nil, &regionError{op: "region " + r.path, err: err}
	}
	return h, hdr, nil
}

// refreshObjects learns the objects that other processes created since
// this handle last read the table. r.mu must be held.
func (r *Region) refreshObjects() error {
	fd := int(r.file.Fd())
	if err := flock(fd, unix.LOCK_SH); err != nil {
		return err
	}
	defer flock(fd, unix.LOCK_UN)
	h, _, err := r.readHeader()
	if err != nil {
		return err
	}
	r.learn(h.objects)
	return nil
}

func (r *Region) object(name string, kind objectKind, size uint32) (regionObject, error) {
	if r.closed {
		return regionObject{}, ErrRegionClosed
	}
	if err := checkObjectName(name); err != nil {
		return regionObject{}, err
	}
	k := objectKinds[kind]
	if o, ok := r.objects[name]; ok {
		return o, checkKind(o, kind)
	}
	fd := int(r.file.Fd())
	if err := flock(fd, unix.LOCK_EX); err != nil {
		return regionObject{}, err
	}
	defer flock(fd, unix.LOCK_UN)
	// Re-read the table: other processes may have added objects.
	h, hdr, err := r.readHeader()
	if err != nil {
		return regionObject{}, err
	}
	r.learn(h.objects)
	if o, ok := r.objects[name]; ok {
		return o, checkKind(o, kind)
	}
	count := uint32(len(h.objects))
	off := (h.arenaUsed + uint64(k.align) - 1) / uint64(k.align) * uint64(k.align)
	if count == regionTableCap || off+uint64(size) > h.size {
		return regionObject{}, fmt.Errorf("%w: %s cannot hold %q (%d of %d table entries, %d of %d bytes used)",
			ErrRegionFull, r.path, name, count, regionTableCap, h.arenaUsed, h.size)
	}
	o := regionObject{name: name, kind: kind, size: size, offset: off}
	// Write the entry past the current count, where nobody reads, then
	// commit count and checksum with one store: a process killed in
	// between leaves the old, valid header. The object's bytes are zero
	// (never used before): a fresh, unlocked object.
	e := r.data[regionTableOffset+int(count)*tableEntrySize:][:tableEntrySize]
	clear(e)
	copy(e[entryName:entryName+entryNameMax], name)
	ne.PutUint32(e[entryKind:], uint32(kind))
	ne.PutUint32(e[entrySize:], size)
	ne.PutUint64(e[entryOffset:], off)
	copy(hdr[regionTableOffset:], r.data[regionTableOffset:regionProcOffset])
	word64(r.data, hdrCountChecksum).Store(countChecksumWord(count+1, headerChecksum(hdr, count+1)))
	r.objects[name] = o
	return o, nil
}

func checkKind(o regionObject, kind objectKind) error {
	if o.kind != kind {
		return fmt.Errorf("%w: %q is a %s, not a %s", ErrObjectKind, o.name, objectKinds[o.kind].name, objectKinds[kind].name)
	}
	return nil
}

func (r *Region) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrRegionClosed
	}
	if n := r.waiting.Load(); n > 0 {
		return fmt.Errorf("%w: %d goroutines of this process are waiting for locks in %s", ErrRegionBusy, n, r.path)
	}
	for name, m := range r.mutexes {
		if m.word.Load()&ownerMask == r.token {
			return fmt.Errorf("%w: this process holds %q in %s; unlock it first (unmapping a held lock would strand it)", ErrRegionBusy, name, r.path)
		}
	}
	for name, h := range r.handles {
		if h.holdsLock() {
			return fmt.Errorf("%w: this process holds %q in %s; unlock it first (unmapping a held lock would strand it)", ErrRegionBusy, name, r.path)
		}
	}
	fd := int(r.file.Fd())
	if r.token != 0 {
		if err := flock(fd, unix.LOCK_EX); err != nil {
			return err
		}
		state := word32(r.slotWord(r.slot), procState)
		state.Store(state.Load() &^ procLive)
		flock(fd, unix.LOCK_UN)
	}
	r.closed = true
	err := unix.Munmap(r.data)
	r.data = nil
	if cerr := r.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// monoNowNs reads CLOCK_MONOTONIC in ns, a clock every process on the
// machine shares (for held-since stamps), cheaply (see wait.MonotonicNs).
func monoNowNs() int64 { return wait.MonotonicNs() }

// removeRegion is RemoveRegion, path already resolved.
func removeRegion(path string, force bool) error {
	r, err := openRegion(path, 0, &RegionOptions{InitTimeout: -1}, modeObserve)
	if err != nil {
		if !force || errors.Is(err, ErrNotRegularFile) || errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// Not a valid region: with force, any regular file goes (never
		// through a link: Lstat, not Stat).
		if st, serr := os.Lstat(path); serr != nil || !st.Mode().IsRegular() {
			return err
		}
		return os.Remove(path)
	}
	defer r.close()
	fd := int(r.file.Fd())
	if err := flock(fd, unix.LOCK_EX); err != nil {
		return err
	}
	defer flock(fd, unix.LOCK_UN)
	if pids := r.livePIDs(); len(pids) > 0 && !force {
		return fmt.Errorf("%w: PIDs %v (stop them, or force the removal)", ErrRegionInUse, pids)
	}
	var opened, now unix.Stat_t
	if err := unix.Fstat(fd, &opened); err != nil {
		return err
	}
	if err := unix.Lstat(path, &now); err != nil {
		return err
	}
	if opened.Dev != now.Dev || opened.Ino != now.Ino {
		return fmt.Errorf("%w: the path was replaced while it was being removed", fs.ErrExist)
	}
	return unix.Unlink(path)
}

// livePIDs lists the PIDs of the live processes attached to r.
func (r *Region) livePIDs() []int {
	var pids []int
	for s := range uint32(regionProcSlots) {
		st := word32(r.slotWord(s), procState).Load()
		if st&procLive == 0 {
			continue
		}
		if alive, pid := r.tokenAlive(makeToken(s, st&procGenMask)); alive {
			pids = append(pids, int(pid))
		}
	}
	return pids
}

// truncatedError describes a mapping of mapped bytes whose file (fd) has
// shrunk: ErrTruncated, with the sizes.
func truncatedError(fd, mapped int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%w: a read of the mapping faulted, and the file cannot be examined: %v", ErrTruncated, err)
	}
	return fmt.Errorf("%w: the file has %d bytes, the region %d (someone truncated it while it was mapped)", ErrTruncated, st.Size, mapped)
}

// checkPermissions refuses a region file that others may write: writable
// by group or others, or owned by another user (see
// RegionOptions.AllowUnsafePermissions). A sealed memfd (CreateMemfdRegion)
// has mode 0777 but no name anyone could open: it reaches only the
// processes it was passed to, so it passes.
func checkPermissions(fd int, st *unix.Stat_t) error {
	if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err == nil && seals&unix.F_SEAL_SHRINK != 0 {
		return nil
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: mode %#o lets group or others write it (RegionOptions.AllowUnsafePermissions opts in)", ErrUnsafePermissions, st.Mode&0o777)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("%w: owned by uid %d, not by this process's uid %d (RegionOptions.AllowUnsafePermissions opts in)", ErrUnsafePermissions, st.Uid, uid)
	}
	return nil
}

// checkSize returns ErrTruncated if r's file is now shorter than its
// mapping: looked at before touching pages that a truncation would make
// fault.
func (r *Region) checkSize() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(r.file.Fd()), &st); err != nil {
		return err
	}
	if st.Size < int64(len(r.data)) {
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

// CreateMemfdRegion creates a region in an anonymous memory file
// (memfd_create(2)) of size bytes (0: DefaultRegionSize) and seals it
// against shrinking and growing (F_SEAL_SHRINK, F_SEAL_GROW, then
// F_SEAL_SEAL): no process, whatever its rights, can truncate it, so the
// truncation described on Region cannot happen. It has no path: name (at
// most 249 bytes) only labels it in /proc/PID/fd and in errors, and its
// Path is "memfd:" + name. Share it with related processes by passing its
// file, r.File(), as exec.Cmd.ExtraFiles (the child sees it as fd 3 + its
// index there) or over a Unix socket (SCM_RIGHTS); they open it with
// OpenRegionFile. It lives until the last process holding it closes it.
// opts.Mode and opts.AllowUnsafePermissions do not apply (a memfd is
// reachable only through its descriptor). Linux 3.17 or later.
func CreateMemfdRegion(name string, size int64, opts *RegionOptions) (*Region, error) {
	fail := func(err error) (*Region, error) {
		return nil, &regionError{op: "create memfd region " + name, err: err}
	}
	if size == 0 {
		size = DefaultRegionSize
	}
	if size < regionMinSize || size > math.MaxInt {
		return fail(fmt.Errorf("%w: %d bytes requested, minimum %d", ErrRegionTooSmall, size, regionMinSize))
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fail(err)
	}
	r, err := initRegion("memfd:"+name, fd, size, func() {})
	if err != nil {
		return fail(err)
	}
	if _, err := unix.FcntlInt(r.file.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		r.close()
		return fail(fmt.Errorf("sealing: %w", err))
	}
	return r, nil
}

// OpenRegionFile opens the region in an open file: one passed by
// CreateMemfdRegion's creator (os.NewFile(3, "region") in a child started
// with ExtraFiles), or any region file. It validates and attaches as
// OpenRegion does, on a duplicate of f's descriptor, so the caller may
// close f afterwards; the Region's Path is f.Name(). A regular file
// (not a sealed memfd) must pass the permission check (ErrUnsafePermissions
// unless opts.AllowUnsafePermissions). The file must be open for reading
// and writing.
func OpenRegionFile(f *os.File, opts *RegionOptions) (*Region, error) {
	var o RegionOptions
	if opts != nil {
		o = *opts
	}
	if o.InitTimeout == 0 {
		o.InitTimeout = DefaultInitTimeout
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &regionError{op: "open region " + f.Name(), err: err}
	}
	r, err := openFD(f.Name(), fd, false, time.Now().Add(max(o.InitTimeout, 0)), modeOpen, o.AllowUnsafePermissions)
	if err != nil {
		return nil, &regionError{op: "open region " + f.Name(), err: err}
	}
	return r, nil
}

// File returns the region's open file, to pass to related processes
// (exec.Cmd.ExtraFiles; see CreateMemfdRegion). It stays the Region's:
// do not close it; it is closed by Close.
func (r *Region) File() *os.File { return r.file }
