package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// A Region is a file mapped MAP_SHARED by every process that opens it,
// holding a header and named objects (Mutex, TicketMutex,
// RWMutex, Cond, plain bytes, typed values: Value).
// Processes find objects by name:
//
//	r, err := lockword.OpenOrCreate("orders", 0, nil) // /dev/shm/orders
//	mu, err := r.Mutex("orders-table")
//
// The layout is fixed and documented in docs/abi.md: a 4 KiB header (magic,
// ABI version, size, checksum), an object table of 128 entries (name, kind,
// size, offset), a process table of 1024 slots (who is attached, for owner
// identity: see Mutex), then the objects. All-zero bytes are a valid
// unlocked object, so a freshly sized file needs no per-object set-up.
//
// Creation is exclusive (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 unless
// Options.Mode says otherwise). The creator fills the header under an
// exclusive flock(2) on the file and publishes it last, with a release store
// of the magic number; an opener loads the magic with acquire ordering and,
// while it is still zero, waits for it (futex wait on the magic word), so
// several processes racing through OpenOrCreate see exactly one
// initialization and never a half-built header. Changes to the object table
// (a new object) are made under the same exclusive flock, and readers copy
// the header under a shared flock, so the checksum always matches what they
// read. flock is only used on these rare paths; locks never touch it. No
// call waits for it longer than Options.InitTimeout: a process
// stopped (SIGSTOP, a debugger) or hung while it holds the file lock makes
// opens, the creation of new objects and Close fail with
// ErrFileLockTimeout, naming its PID, instead of blocking.
//
// Opening validates, in this order, and returns a distinct sentinel error
// for each failure (use errors.Is): ErrNotRegularFile, ErrNotInitialized,
// ErrUnsafePermissions (a file that other users may write: see
// Options.AllowUnsafePermissions), ErrBadMagic, ErrBadVersion,
// ErrBadSize (the header's size against the file's; a file shorter than
// the header says matches ErrTruncated too), ErrBadChecksum (over the header fields and the used table
// entries, never over live words), then every table entry: ErrObjectName,
// ErrObjectKind, ErrObjectBounds, ErrObjectAlignment, and last the PID
// namespace: ErrForeignPIDNamespace (below). No file content can
// make it panic or read outside the mapping (FuzzOpenRegion). A failed open
// unmaps what it mapped and closes the file. Its error reads "lockword:
// open region PATH: why" (or "create region"); a failure of the file
// system itself satisfies errors.Is with fs.ErrNotExist, fs.ErrExist or
// fs.ErrPermission.
//
// Attaching claims a slot in the process table (see Mutex for why);
// Close releases it. Close refuses with ErrRegionBusy while this process
// holds a lock in the region or has goroutines waiting for one: unmapping a
// held lock would leave it held by a process that can no longer release it.
// A call on a lock, condition variable, sequence lock, semaphore, ring end
// or MPSC queue end of a closed Region panics (calls that return no error) or returns an error
// wrapping ErrRegionClosed, naming the object: it never reaches the
// unmapped memory (except in a build with the race detector, where a
// Mutex's or RWMutex's fast path after Close faults: see close). Pointers
// from Value into a closed Region's mapping are a use after free (they
// fault).
//
// Regions are Linux-only; elsewhere every constructor returns
// ErrUnsupported.
//
// All processes sharing a region must share a PID namespace and /proc:
// owner liveness is checked there, by PID. The header records the PID
// namespace of the attached processes (written by the creator before it
// publishes the header), and an open from another namespace fails with
// ErrForeignPIDNamespace rather than let a waiter take a live holder for
// dead. The record binds while any process of the current boot is
// attached; when none is (every process detached, or the file outlived a
// reboot) the next process to attach records its own namespace. A record
// of 0 (a region made before the field existed) is unknown: a process
// that cannot confirm a holder's namespace never declares it dead, so
// such a lock is never robbed, and a holder's death is then not detected.
//
// # Truncation
//
// A mapped file that shrinks under its mapping turns every access past the
// new end into SIGBUS, which kills a Go program ("unexpected fault
// address"). That is true of every mmap user (bbolt, LMDB, SQLite in WAL
// mode document the same), and a lock call cannot afford to guard each
// access. So: Inspect (and lockword inspect, a monitor that must
// never be killed by what it monitors) and Region.Check read the mapping
// with faults turned into errors (runtime/debug.SetPanicOnFault) and
// return ErrTruncated (not in a program built with -race: there an atomic
// load runs in the race detector's C runtime, where a fault cannot be
// recovered); opens check the file's size before touching pages
// and report a file shorter than its header (ErrBadSize, ErrTruncated);
// lock operations do not check, and a truncation under them kills the
// process. Who can truncate: only a writer of the file, which by default
// (mode 0600, and ErrUnsafePermissions refusing files that others may
// write) is the same user, running code that is already trusted with every
// lock in it. Where even that must not happen, use CreateMemfd: an
// anonymous memory file sealed against shrinking (F_SEAL_SHRINK), which no
// process can truncate, shared with related processes by passing its file
// (exec.Cmd.ExtraFiles) and opened there with OpenFile.
//
// A Region is safe for concurrent use by multiple goroutines.
type Region struct {
	path string
	file *os.File // kept open: flock for table changes
	data []byte   // the whole mapping; len(data) == header size field

	slot  uint32 // our process-table slot
	token uint32 // owner token written into lock words we hold (slot, generation)
	pidNS uint64 // the region's PID namespace, validated at open; 0: unknown
	// readOnly: an observer without write access; data is mapped
	// PROT_READ, and a store to it would fault.
	readOnly bool
	// lockTimeout bounds each wait for the file lock after the open
	// (Options.InitTimeout; see regionflock.go).
	lockTimeout time.Duration

	waiting atomic.Int32 // goroutines in a slow path; Close refuses while > 0
	// gone is set by Close before it unmaps: the slow paths and the calls
	// without a fast path look at it (checkOpen), so that a handle used
	// after Close fails with a message instead of faulting.
	gone atomic.Bool

	mu      sync.Mutex // guards the fields below
	closed  bool
	objects map[string]regionObject // validated table entries we have seen
	// handles are the objects' handles, one per name, of every kind, so
	// that every call with a name returns the same one; Close asks each
	// whether this process holds it.
	handles map[string]regionHandle
}

// A regionHandle is this process's handle on an object of a region.
type regionHandle interface {
	// holdsLock reports whether this process holds the object (for
	// writing or reading): Close refuses then.
	holdsLock() bool
}

// handle returns the cached handle of name, or makes one of kind with
// newH, allocating the object if the region has none of that name. r.mu
// must not be held. It fails as (*Region).object does, and with
// ErrObjectKind if the name is cached as another kind.
func handle[H regionHandle](r *Region, name string, kind objectKind, newH func(obj []byte) H) (H, error) {
	var zero H
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.handles[name]; ok && !r.closed {
		if h, ok := h.(H); ok {
			return h, nil
		}
	}
	o, err := r.object(name, kind, objectKinds[kind].size)
	if err != nil {
		return zero, err
	}
	h := newH(r.data[o.offset : o.offset+uint64(o.size) : o.offset+uint64(o.size)])
	r.handles[name] = h
	return h, nil
}

// Options adjust how a region is created or opened. A nil
// *Options means the defaults.
type Options struct {
	// Mode is the permission bits of a file created by Create or
	// OpenOrCreate; 0 means 0600. The umask is not applied.
	Mode os.FileMode
	// InitTimeout is how long an open waits for a concurrent creator to
	// publish the header before returning ErrNotInitialized; 0 means
	// DefaultInitTimeout, a negative value means do not wait.
	//
	// It also bounds every wait for the region's file lock (flock(2),
	// which a running process holds for microseconds to create the
	// header, attach, detach or add an object): the open's, within the
	// same deadline, and each later one of the Region's (creating an
	// object, Close, Inspect). Past it they fail with a
	// *FileLockTimeoutError (ErrFileLockTimeout) naming the holder. With
	// a negative InitTimeout those waits take DefaultInitTimeout.
	InitTimeout time.Duration
	// AllowUnsafePermissions opts in to opening (or creating, with such a
	// Mode) a region file that is writable by its group or by others, or
	// that another user owns. Whoever can write the file can corrupt
	// every lock in it and truncate it under its users, so such files are
	// refused by default (ErrUnsafePermissions), as ssh refuses private
	// keys with loose modes. Set it where that sharing is intended (a
	// group of cooperating users, say).
	AllowUnsafePermissions bool
}

// DefaultInitTimeout is how long an open waits for a concurrent creator by
// default. Initialization takes microseconds; a header still unpublished
// after this long was left by a creator that died.
const DefaultInitTimeout = 2 * time.Second

// DefaultRegionSize is the size in bytes of a region created with size 0:
// room for the header, the tables and thousands of small objects. On tmpfs
// (/dev/shm) untouched pages cost no memory.
const DefaultRegionSize = 1 << 20

// DefaultRegionDir is where a region path without a slash is placed, as
// shm_open(3) does with its names.
const DefaultRegionDir = "/dev/shm"

// Errors returned by the region functions, checked in this order when a
// region is opened. Each is wrapped with details; test with errors.Is.
var (
	// ErrUnsupported is returned on platforms without shared regions (all
	// but Linux).
	ErrUnsupported = errors.New("lockword: shared regions are not supported on this platform (Linux only)")
	// ErrNotRegularFile is returned when the path names something other
	// than a regular file (a directory, device, FIFO or symbolic link:
	// links are never followed).
	ErrNotRegularFile = errors.New("lockword: region path is not a regular file")
	// ErrNotInitialized is returned when the file's header was never
	// published (its magic is zero) within Options.InitTimeout and the
	// file is not an abandoned creation that Open or OpenOrCreate can
	// initialize itself (see docs/shared-memory.md): its creator still
	// holds the file lock (it is stopped or hung), or the file's tables are
	// not empty. Inspect never reclaims a file.
	ErrNotInitialized = errors.New("lockword: region header was never initialized")
	// ErrBadMagic is returned when the file does not start with the region
	// magic number: it is not a lockword region (or was made on a machine
	// of the other byte order).
	ErrBadMagic = errors.New("lockword: not a lockword region (bad magic)")
	// ErrBadVersion is returned when the region's ABI version (or the
	// table geometry that the version fixes) is not one this package
	// reads.
	ErrBadVersion = errors.New("lockword: unsupported region ABI version")
	// ErrBadSize is returned when the size recorded in the header differs
	// from the file's size (truncated or extended file), or is too small
	// to hold the header.
	ErrBadSize = errors.New("lockword: region size does not match the file")
	// ErrTruncated is returned when the file is shorter than the region's
	// header says: found so at open (such errors match ErrBadSize too), or
	// shrunk under a mapping in use, caught by Region.Check, by
	// Inspect (which survives the fault of reading past the end),
	// or by an open or object lookup in the act. See "Truncation" on
	// Region.
	ErrTruncated = errors.New("lockword: region file truncated")
	// ErrRegionTooSmall is returned by Create and OpenOrCreate
	// when the size argument is negative or below the minimum of 45056
	// bytes (the header and tables): a bad argument, where ErrBadSize
	// speaks of a file's contents.
	ErrRegionTooSmall = errors.New("lockword: requested region size is too small")
	// ErrBadChecksum is returned when the header checksum does not match
	// the header fields and object table: the header is corrupt.
	ErrBadChecksum = errors.New("lockword: region header checksum mismatch")
	// ErrObjectName is returned when an object table entry's name is empty,
	// malformed or duplicated, and by lookups given an invalid name.
	ErrObjectName = errors.New("lockword: bad region object name")
	// ErrObjectKind is returned when a table entry has an unknown kind, and
	// when an object is looked up as a different kind than it was created.
	ErrObjectKind = errors.New("lockword: bad region object kind")
	// ErrObjectBounds is returned when a table entry (or the table itself)
	// extends outside the region's object area, or overlaps another entry.
	ErrObjectBounds = errors.New("lockword: region object out of bounds")
	// ErrObjectAlignment is returned when a table entry's offset is not
	// aligned as its kind requires.
	ErrObjectAlignment = errors.New("lockword: region object misaligned")
	// ErrRegionFull is returned when a new object does not fit: the table
	// has no free entry or the object area no room.
	ErrRegionFull = errors.New("lockword: region full")
	// ErrTooManyProcesses is returned when every process-table slot is
	// held by a live process.
	ErrTooManyProcesses = errors.New("lockword: region process table full")
	// ErrRegionBusy is returned by Close while this process holds a lock in
	// the region or has goroutines waiting for one.
	ErrRegionBusy = errors.New("lockword: region in use")
	// ErrRegionClosed is returned by methods of a closed Region, and by
	// the calls that return an error on its objects' handles.
	ErrRegionClosed = errors.New("lockword: region closed")
	// ErrUnsafePermissions is returned by an open of a region file that
	// its group or others may write, or that another user owns, unless
	// Options.AllowUnsafePermissions is set (see there).
	ErrUnsafePermissions = errors.New("lockword: region file is writable by other users")
	// ErrForeignPIDNamespace is returned by an open (and Inspect)
	// in a process whose PID namespace differs from the one the region's
	// attached processes are in. Owner-death detection looks holders up
	// by PID in /proc, which shows one PID namespace: from another, a
	// live holder could look dead and be robbed. Run every process of a
	// region in one PID namespace (Kubernetes: shareProcessNamespace).
	ErrForeignPIDNamespace = errors.New("lockword: region is in use by processes of another PID namespace")
	// ErrRegionInUse is returned by Remove when live processes are
	// attached to the region (and RemoveOptions.Force is not set).
	ErrRegionInUse = errors.New("lockword: region has live processes attached")
)

// shrunkError is a file shorter than its header says: ErrTruncated, and
// ErrBadSize as every size mismatch.
type shrunkError struct{ detail string }

func (e *shrunkError) Error() string {
	return "lockword: region file truncated (region size does not match the file): " + e.detail
}

func (e *shrunkError) Is(target error) bool { return target == ErrTruncated || target == ErrBadSize }

// regionError puts what failed before why, with one "lockword: " prefix for
// the whole message: "lockword: open region PATH: CAUSE", where CAUSE is
// err's message less the prefix that the sentinel errors carry (the prefix
// is there for errors returned bare). errors.Is and errors.As see err.
type regionError struct {
	op  string // "open region /dev/shm/x", "object table entry 3"
	err error
}

func (e *regionError) Error() string {
	return "lockword: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "lockword: ")
}

func (e *regionError) Unwrap() error { return e.err }

func init() {
	registerKind(kindBytes, &kindInfo{name: "bytes", align: bytesAlign,
		inspect: func(*inspector, []byte, *ObjectInfo) {}})
}

// bytesAlign is the alignment of Bytes objects: a cache line, so that data
// never shares one with a lock word of another object, and 8-byte atomics
// at any multiple of 8 within it are aligned.
const bytesAlign = 64

// Bytes returns the named plain-data object of size bytes, creating it,
// zero-filled, if the region has none of that name: the place for the data
// that the region's locks protect. The slice aliases the mapping (writes are
// seen by every process) and must not be used after Close. Its first byte
// is 64-byte aligned, so atomics on aligned words in it (sync/atomic on
// pointers into the slice, via unsafe) are legal. size is 1 to
// 2^31 bytes; name is 1 to 48 bytes of UTF-8 without control characters.
// It fails with ErrObjectName for a bad name, ErrObjectBounds for a bad
// size or if name exists with another size, ErrObjectKind if name is an
// object of another kind, ErrRegionFull if there is no room, and
// ErrRegionClosed after Close.
func (r *Region) Bytes(name string, size int) ([]byte, error) {
	if size <= 0 || int64(size) > 1<<31 {
		return nil, fmt.Errorf("%w: Bytes(%q, %d): size must be 1 to 2^31 bytes", ErrObjectBounds, name, size)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, err := r.object(name, kindBytes, uint32(size))
	if err != nil {
		return nil, err
	}
	if o.size != uint32(size) {
		return nil, fmt.Errorf("%w: %q exists with %d bytes, not %d", ErrObjectBounds, name, o.size, size)
	}
	return r.data[o.offset : o.offset+uint64(o.size) : o.offset+uint64(o.size)], nil
}

// Close detaches this process from the region and unmaps it. It refuses
// with ErrRegionBusy while this process holds a lock in the region or has
// goroutines waiting for one (read holds of a RWMutex included), and
// returns ErrRegionClosed if already closed. If the file was truncated
// under the mapping (Check reports ErrTruncated), words past its new end
// went with it and nothing is released: Close unmaps and closes anyway,
// holds or not, and returns an error wrapping ErrTruncated. If the region's
// file lock stays held past Options.InitTimeout, it closes nothing
// and returns a *FileLockTimeoutError (ErrFileLockTimeout): call it again.
// Objects of a closed region must not be used.
func (r *Region) Close() error { return r.close() }

// errClosed returns an error wrapping ErrRegionClosed that names the call
// (`Mutex "m".LockContext` from "Mutex", "m", "LockContext") if r is
// closed, nil otherwise.
func (r *Region) errClosed(kind, name, call string) error {
	if !r.gone.Load() {
		return nil
	}
	return fmt.Errorf("%w: %s %q.%s called after Close of %s", ErrRegionClosed, kind, name, call, r.path)
}

// checkOpen panics with errClosed's error if r is closed: the calls that
// return nothing (or a bool) treat a use after Close as misuse, as sync
// does an Unlock of an unlocked Mutex, rather than pretend to have locked
// or to have found the lock held.
func (r *Region) checkOpen(kind, name, call string) {
	if err := r.errClosed(kind, name, call); err != nil {
		panic(err)
	}
}

// closedWord32 stands in for every 32-bit lock word of a closed region's
// handles (detach): all ones is no owner token and no free state, so every
// fast path's compare-and-swap fails into a slow path, which calls
// checkOpen first.
var closedWord32 = func() *atomic.Uint32 {
	w := new(atomic.Uint32)
	w.Store(^uint32(0))
	return w
}()

// regionPath applies the DefaultRegionDir rule: a path without a slash is a
// name under /dev/shm.
func regionPath(path string) string {
	if path != "" && !bytes.ContainsRune([]byte(path), '/') {
		return DefaultRegionDir + "/" + path
	}
	return path
}

// Path returns the region's file path ("memfd:NAME" for a region made by
// CreateMemfd; the file's name for one opened with OpenFile).
func (r *Region) Path() string { return r.path }

// Size returns the region's size in bytes.
func (r *Region) Size() int64 { return int64(len(r.data)) }

// guardFault runs fn with memory faults turned into panics
// (runtime/debug.SetPanicOnFault) and a fault into the error that
// onFault returns: a mapped file truncated under us faults (SIGBUS) on the
// first access past its new end, which would otherwise kill the process.
// Only faults are caught; any other panic goes on.
func guardFault(onFault func() error, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if _, fault := p.(interface{ Addr() uintptr }); !fault {
				panic(p)
			}
			err = onFault()
		}
	}()
	return fn()
}

func newRegion(path string, f *os.File, data []byte, lockTimeout time.Duration) *Region {
	return &Region{path: path, file: f, data: data, lockTimeout: lockTimeout,
		objects: map[string]regionObject{}, handles: map[string]regionHandle{}}
}

func (r *Region) learn(objs []regionObject) {
	for _, o := range objs {
		r.objects[o.name] = o
	}
}

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
	if err := r.lockFile(lockShared); err != nil {
		return &regionError{op: "region " + r.path + ": reading its object table", err: err}
	}
	defer flock(fd, lockUnlock)
	h, _, err := r.readHeader()
	if err != nil {
		return err
	}
	r.learn(h.objects)
	return nil
}

// object returns the named object of the given kind, creating it with size
// bytes if it does not exist. r.mu must be held. This is the one allocator
// for every kind: a new kind's constructor is a call to it and a wrapper
// around the bytes it returns.
func (r *Region) object(name string, kind objectKind, size uint32) (regionObject, error) {
	return r.objectParam(name, kind, 0, size)
}

// objectParam is object for a kind whose entries carry a parameter in the
// kind field (checkKindParam); a found object's own param is returned for
// the caller to compare.
func (r *Region) objectParam(name string, kind objectKind, param, size uint32) (regionObject, error) {
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
	if err := r.lockFile(lockExclusive); err != nil {
		return regionObject{}, &regionError{op: fmt.Sprintf("region %s: adding %q", r.path, name), err: err}
	}
	defer flock(fd, lockUnlock)
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
	o := regionObject{name: name, kind: kind, param: param, size: size, offset: off}
	// Write the entry past the current count, where nobody reads, then
	// commit count and checksum with one store: a process killed in
	// between leaves the old, valid header. The object's bytes are zero
	// (never used before): a fresh, unlocked object.
	e := r.data[regionTableOffset+int(count)*tableEntrySize:][:tableEntrySize]
	clear(e)
	copy(e[entryName:entryName+entryNameMax], name)
	ne.PutUint32(e[entryKind:], uint32(kind)|param<<entryKindParamShift)
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
	// A file truncated under the mapping took words past its new end
	// with it: reading them faults (under -race, fatally). Which locks
	// and whether our slot survived is not worth guessing: nothing is
	// read, released or detached; unmap, close, and report it (a slot
	// left marked live reads as dead once this process exits). A
	// truncation between this look and the reads below faults, and is
	// reported the same way.
	truncated := r.checkSize()
	if !errors.Is(truncated, ErrTruncated) {
		truncated = nil
	}
	onFault := func() error { truncated = r.faultCause(); return nil }
	if truncated == nil {
		err := guardFault(onFault, func() error {
			for name, h := range r.handles {
				if h.holdsLock() {
					return fmt.Errorf("%w: this process holds %q in %s; unlock it first (unmapping a held lock would strand it)", ErrRegionBusy, name, r.path)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if r.token != 0 && truncated == nil {
		// Housekeeping (semaphorereclaim.go): what dead processes
		// hold in the semaphores comes back.
		guardFault(onFault, func() error {
			if r.refreshObjects() == nil {
				r.reapSemaphores(r.objects)
			}
			return nil
		})
	}
	fd := int(r.file.Fd())
	if r.token != 0 && truncated == nil {
		// Nothing is closed if the file lock stays held: the caller
		// may try again.
		if err := r.lockFile(lockExclusive); err != nil {
			return &regionError{op: "close region " + r.path, err: err}
		}
		guardFault(onFault, func() error {
			state := word32(r.slotWord(r.slot), procState)
			state.Store(state.Load() &^ procLive)
			r.resetWaitsFor(r.slot)
			return nil
		})
		flock(fd, lockUnlock)
	}
	r.closed = true
	r.gone.Store(true)
	// Detaching repoints the handles' word pointers, plain Go fields that
	// the fast paths read without synchronization. Between processes, and
	// between goroutines ordered only by a lock in the mapping, the race
	// detector cannot see what orders those reads before this Close (it
	// sees the Go heap only), and would report a race that is not one. So
	// race builds keep the handles pointing at the unmapped words: there, a
	// Mutex or RWMutex fast path after Close faults, as any use of
	// unmapped memory does; every other call still fails with
	// ErrRegionClosed.
	for _, h := range r.handles {
		if d, ok := h.(interface{ detach() }); ok && !raceDetector {
			d.detach()
		}
	}
	err := sysMunmap(r.data)
	r.data = nil
	if cerr := r.file.Close(); err == nil {
		err = cerr
	}
	if truncated != nil {
		return &regionError{op: "close region " + r.path, err: truncated}
	}
	return err
}

// File returns the region's open file, to pass to related processes
// (exec.Cmd.ExtraFiles; see CreateMemfd). It stays the Region's:
// do not close it; it is closed by Close.
func (r *Region) File() *os.File { return r.file }

// monoNowNs reads CLOCK_MONOTONIC in ns, a clock every process on the
// machine shares (for held-since stamps), cheaply (see wait.MonotonicNs;
// 0 outside Linux).
func monoNowNs() int64 { return wait.MonotonicNs() }

// flockHow is a flock(2) operation: the file lock under which a region's
// header and tables change.
type flockHow int

const (
	lockUnlock flockHow = iota
	lockShared
	lockExclusive
)
