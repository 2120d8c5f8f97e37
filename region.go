package lockword

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// A Region is a file mapped MAP_SHARED by every process that opens it,
// holding a header and named objects (SharedMutex, SharedTicketMutex,
// SharedRWMutex, SharedCond, plain bytes). Processes find objects by name:
//
//	r, err := lockword.OpenOrCreateRegion("orders", 0, nil) // /dev/shm/orders
//	mu, err := r.Mutex("orders-table")
//
// The layout is fixed and documented in docs/abi.md: a 4 KiB header (magic,
// ABI version, size, checksum), an object table of 128 entries (name, kind,
// size, offset), a process table of 1024 slots (who is attached, for owner
// identity: see SharedMutex), then the objects. All-zero bytes are a valid
// unlocked object, so a freshly sized file needs no per-object set-up.
//
// Creation is exclusive (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 unless
// RegionOptions.Mode says otherwise). The creator fills the header under an
// exclusive flock(2) on the file and publishes it last, with a release store
// of the magic number; an opener loads the magic with acquire ordering and,
// while it is still zero, waits for it (futex wait on the magic word), so
// several processes racing through OpenOrCreateRegion see exactly one
// initialization and never a half-built header. Changes to the object table
// (a new object) are made under the same exclusive flock, and readers copy
// the header under a shared flock, so the checksum always matches what they
// read. flock is only used on these rare paths; locks never touch it.
//
// Opening validates, in this order, and returns a distinct sentinel error
// for each failure (use errors.Is): ErrNotRegularFile, ErrNotInitialized,
// ErrUnsafePermissions (a file that other users may write: see
// RegionOptions.AllowUnsafePermissions), ErrBadMagic, ErrBadVersion,
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
// Attaching claims a slot in the process table (see SharedMutex for why);
// Close releases it. Close refuses with ErrRegionBusy while this process
// holds a lock in the region or has goroutines waiting for one: unmapping a
// held lock would leave it held by a process that can no longer release it.
// Using an object of a closed Region is a use after free (it faults).
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
// access. So: InspectRegion (and lockword inspect, a monitor that must
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
// lock in it. Where even that must not happen, use CreateMemfdRegion: an
// anonymous memory file sealed against shrinking (F_SEAL_SHRINK), which no
// process can truncate, shared with related processes by passing its file
// (exec.Cmd.ExtraFiles) and opened there with OpenRegionFile.
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

	waiting atomic.Int32 // goroutines in a slow path; Close refuses while > 0

	mu      sync.Mutex // guards the fields below
	closed  bool
	objects map[string]regionObject // validated table entries we have seen
	mutexes map[string]*SharedMutex
	// handles are the other kinds' handles, one per name, so that every
	// call with a name returns the same one; Close asks each whether this
	// process holds it.
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

// TicketMutex returns the SharedTicketMutex named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName),
// creating it, unlocked, if the region has no object of that name. Every
// call with the same name on one Region returns the same
// *SharedTicketMutex. It fails with ErrObjectKind if name is an object of
// another kind, ErrRegionFull if there is no room, ErrRegionClosed after
// Close.
func (r *Region) TicketMutex(name string) (*SharedTicketMutex, error) {
	return handle(r, name, kindTicketMutex, func(obj []byte) *SharedTicketMutex { return newSharedTicketMutex(r, name, obj) })
}

// RegionOptions adjust how a region is created or opened. A nil
// *RegionOptions means the defaults.
type RegionOptions struct {
	// Mode is the permission bits of a file created by CreateRegion or
	// OpenOrCreateRegion; 0 means 0600. The umask is not applied.
	Mode os.FileMode
	// InitTimeout is how long an open waits for a concurrent creator to
	// publish the header before returning ErrNotInitialized; 0 means
	// DefaultInitTimeout, a negative value means do not wait.
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
	// published (its magic is zero) within RegionOptions.InitTimeout:
	// the creator is still running or, more likely, died while creating
	// it. Remove the file and create it again.
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
	// InspectRegion (which survives the fault of reading past the end),
	// or by an open or object lookup in the act. See "Truncation" on
	// Region.
	ErrTruncated = errors.New("lockword: region file truncated")
	// ErrRegionTooSmall is returned by CreateRegion and OpenOrCreateRegion
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
	// ErrRegionClosed is returned by methods of a closed Region.
	ErrRegionClosed = errors.New("lockword: region closed")
	// ErrUnsafePermissions is returned by an open of a region file that
	// its group or others may write, or that another user owns, unless
	// RegionOptions.AllowUnsafePermissions is set (see there).
	ErrUnsafePermissions = errors.New("lockword: region file is writable by other users")
	// ErrForeignPIDNamespace is returned by an open (and InspectRegion)
	// in a process whose PID namespace differs from the one the region's
	// attached processes are in. Owner-death detection looks holders up
	// by PID in /proc, which shows one PID namespace: from another, a
	// live holder could look dead and be robbed. Run every process of a
	// region in one PID namespace (Kubernetes: shareProcessNamespace).
	ErrForeignPIDNamespace = errors.New("lockword: region is in use by processes of another PID namespace")
	// ErrRegionInUse is returned by RemoveRegion when live processes are
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

// Region file layout, ABI version 1 (docs/abi.md). Native byte order
// (little-endian on amd64 and arm64). Offsets are in bytes from the start of
// the file.
const (
	regionMagic   uint64 = 0x64726f776b636f6c // the bytes "lockword" in little-endian order
	regionVersion        = 1

	// Header fields. The checksum covers [hdrChecked, hdrCheckedEnd), the
	// object count, and the used table entries; not the magic (published
	// last) nor the live fields from hdrSlotHint on. The object count and
	// the checksum share one 64-bit word, so that adding an object commits
	// with a single store: a process killed half-way through leaves the
	// previous, valid header (the half-written entry lies past the count).
	hdrMagic         = 0  // uint64
	hdrVersion       = 8  // uint32
	hdrHeaderSize    = 12 // uint32: offset of the object area (= regionArenaOffset)
	hdrSize          = 16 // uint64: total bytes, = file size
	hdrTableCap      = 24 // uint32: = regionTableCap
	hdrProcSlots     = 28 // uint32: = regionProcSlots
	hdrFlags         = 32 // uint32: 0, reserved
	hdrCreatedNs     = 40 // uint64: creation time, Unix ns (informational)
	hdrChecked       = 8
	hdrCheckedEnd    = 48
	hdrObjectCount   = 48 // uint32: used table entries
	hdrChecksum      = 52 // uint32: CRC-32C (Castagnoli)
	hdrCountChecksum = 48 // the uint64 holding both, stored at once
	hdrSlotHint      = 56 // uint32, live: where the next attach starts its slot search
	hdrPIDNamespace  = 64 // uint64, live: the attached processes' PID namespace (inode), 0: unknown

	regionTableOffset = 4096
	tableEntrySize    = 64
	regionTableCap    = 128

	// Object table entry fields.
	entryName    = 0 // [48]byte, NUL-padded
	entryNameMax = 48
	entryKind    = 48 // uint32
	entrySize    = 52 // uint32: bytes
	entryOffset  = 56 // uint64: from the start of the file

	regionProcOffset = regionTableOffset + regionTableCap*tableEntrySize // 12288
	procSlotSize     = 32
	regionProcSlots  = 1 << ownerSlotBits // 1024

	// Process table slot fields.
	procState = 0  // uint32: procLive | generation
	procPID   = 4  // uint32
	procStart = 8  // uint64: start time in clock ticks since boot (/proc/PID/stat field 22)
	procBoot  = 16 // [16]byte: /proc/sys/kernel/random/boot_id

	regionArenaOffset = regionProcOffset + regionProcSlots*procSlotSize // 45056
	regionMinSize     = regionArenaOffset
)

// Process-table slot states: bit 31 live, bits 0-17 the slot's generation.
const (
	procLive    = 1 << 31
	procGenMask = 1<<ownerGenBits - 1
)

// objectKind numbers are part of the ABI (docs/abi.md); never renumber.
type objectKind uint32

const (
	kindMutex       objectKind = 1 // SharedMutex
	kindBytes       objectKind = 2 // (*Region).Bytes: plain data
	kindTicketMutex objectKind = 3 // SharedTicketMutex
	kindRWMutexV1   objectKind = 4 // SharedRWMutex before per-process reader counts: validated, never made
	kindCond        objectKind = 5 // SharedCond
	kindRing        objectKind = 6 // RingProducer, RingConsumer: shared byte ring (sharedring.go)
	kindSeqLock     objectKind = 7 // RegionSeqLock (seqlock_region.go)
	kindRWMutex     objectKind = 8 // SharedRWMutex, readers counted per process (sharedrw.go)
)

// kindInfo describes one kind of region object: its fixed size and
// alignment, and where its words carry owner tokens (for robust kinds).
// Adding a kind is an entry here plus a (*Region).Kind(name) constructor
// built on (*Region).object.
type kindInfo struct {
	name string
	// size is the object's size in bytes; 0 for kinds whose objects are
	// sized at creation (any size from 1 byte).
	size, align uint32
	// ownerWords are offsets, within the object, of lock words whose bits
	// 0-27 hold an owner token (see SharedMutex). Attach avoids reissuing
	// a token that such a word still names, and Close refuses while one
	// names ours.
	ownerWords []uint32
	// inspect describes the object's live state for InspectRegion. It
	// must not write to obj when insp.r.readOnly (the mapping is
	// read-only: a store faults).
	inspect func(insp *inspector, obj []byte, info *ObjectInfo)
}

var objectKinds = map[objectKind]*kindInfo{}

func registerKind(k objectKind, info *kindInfo) { objectKinds[k] = info }

// regionObject is one validated object table entry.
type regionObject struct {
	name   string
	kind   objectKind
	size   uint32
	offset uint64
}

// regionHeader is what parseRegionHeader found in a header snapshot.
type regionHeader struct {
	size      uint64
	arenaUsed uint64 // end of the last object: where the next one may go
	createdNs uint64
	objects   []regionObject
}

// headerChecksum is the CRC-32C of the checked header fields, the object
// count and the first count table entries. hdr must be at least
// regionProcOffset bytes.
func headerChecksum(hdr []byte, count uint32) uint32 {
	c := crc32.Checksum(hdr[hdrChecked:hdrCheckedEnd], castagnoli)
	var n [4]byte
	ne.PutUint32(n[:], count)
	c = crc32.Update(c, castagnoli, n[:])
	end := regionTableOffset + int(min(count, regionTableCap))*tableEntrySize
	return crc32.Update(c, castagnoli, hdr[regionTableOffset:end])
}

// countChecksumWord packs the object count and the checksum into the one
// 64-bit word at hdrCountChecksum, in the byte order of the header.
func countChecksumWord(count, sum uint32) uint64 {
	var b [8]byte
	ne.PutUint32(b[hdrObjectCount-hdrCountChecksum:], count)
	ne.PutUint32(b[hdrChecksum-hdrCountChecksum:], sum)
	return ne.Uint64(b[:])
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var ne = binary.NativeEndian

// parseRegionHeader validates a header snapshot taken from a file of
// fileSize bytes, in the documented order. hdr holds the file's first
// regionArenaOffset bytes, zero-filled past the end of a shorter file, and
// is a private copy: a process scribbling on the mapping meanwhile cannot
// make the checks inconsistent.
func parseRegionHeader(hdr []byte, fileSize int64) (*regionHeader, error) {
	if len(hdr) != regionArenaOffset {
		panic("lockword: header snapshot of wrong size") // our bug, not the file's
	}
	magic := ne.Uint64(hdr[hdrMagic:])
	if magic == 0 {
		return nil, ErrNotInitialized
	}
	if magic != regionMagic {
		return nil, fmt.Errorf("%w: found %#016x, want %#016x", ErrBadMagic, magic, regionMagic)
	}
	if v := ne.Uint32(hdr[hdrVersion:]); v != regionVersion {
		return nil, fmt.Errorf("%w: file has version %d, this package reads %d", ErrBadVersion, v, regionVersion)
	}
	if hs, tc, ps := ne.Uint32(hdr[hdrHeaderSize:]), ne.Uint32(hdr[hdrTableCap:]), ne.Uint32(hdr[hdrProcSlots:]); hs != regionArenaOffset || tc != regionTableCap || ps != regionProcSlots {
		return nil, fmt.Errorf("%w: layout (header %d bytes, %d table entries, %d process slots) is not version %d's (%d, %d, %d)",
			ErrBadVersion, hs, tc, ps, regionVersion, regionArenaOffset, regionTableCap, regionProcSlots)
	}
	size := ne.Uint64(hdr[hdrSize:])
	if size > uint64(fileSize) && size >= regionMinSize {
		return nil, &shrunkError{fmt.Sprintf("header says %d bytes, file has %d", size, fileSize)}
	}
	if fileSize < regionMinSize || size != uint64(fileSize) {
		return nil, fmt.Errorf("%w: header says %d bytes, file has %d (minimum %d)", ErrBadSize, size, fileSize, regionMinSize)
	}
	count := ne.Uint32(hdr[hdrObjectCount:])
	if sum, want := ne.Uint32(hdr[hdrChecksum:]), headerChecksum(hdr, count); sum != want {
		return nil, fmt.Errorf("%w: stored %#08x, computed %#08x", ErrBadChecksum, sum, want)
	}
	h := &regionHeader{size: size, arenaUsed: regionArenaOffset, createdNs: ne.Uint64(hdr[hdrCreatedNs:])}
	if count > regionTableCap {
		return nil, fmt.Errorf("%w: %d table entries, capacity %d", ErrObjectBounds, count, regionTableCap)
	}
	seen := make(map[string]bool, count)
	for i := range count {
		e := hdr[regionTableOffset+int(i)*tableEntrySize:][:tableEntrySize]
		o, err := parseEntry(e, size)
		if err != nil {
			return nil, &regionError{op: fmt.Sprint("object table entry ", i), err: err}
		}
		if seen[o.name] {
			return nil, &regionError{op: fmt.Sprint("object table entry ", i), err: fmt.Errorf("%w: %q appears twice", ErrObjectName, o.name)}
		}
		seen[o.name] = true
		h.objects = append(h.objects, o)
		h.arenaUsed = max(h.arenaUsed, o.offset+uint64(o.size))
	}
	// No two objects may share a byte.
	sorted := append([]regionObject(nil), h.objects...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].offset < sorted[j].offset })
	for i := 1; i < len(sorted); i++ {
		if prev := sorted[i-1]; prev.offset+uint64(prev.size) > sorted[i].offset {
			return nil, fmt.Errorf("%w: objects %q and %q overlap", ErrObjectBounds, prev.name, sorted[i].name)
		}
	}
	return h, nil
}

// parseEntry validates one object table entry against an object area that
// ends at arenaEnd.
func parseEntry(e []byte, arenaEnd uint64) (regionObject, error) {
	rawName := e[entryName : entryName+entryNameMax]
	n := bytes.IndexByte(rawName, 0)
	if n < 0 {
		n = entryNameMax
	}
	o := regionObject{
		name:   string(rawName[:n]),
		kind:   objectKind(ne.Uint32(e[entryKind:])),
		size:   ne.Uint32(e[entrySize:]),
		offset: ne.Uint64(e[entryOffset:]),
	}
	if err := checkObjectName(o.name); err != nil {
		return o, err
	}
	if !allZero(rawName[n:]) {
		return o, fmt.Errorf("%w: %q is not NUL-padded", ErrObjectName, o.name)
	}
	k := objectKinds[o.kind]
	if k == nil {
		return o, fmt.Errorf("%w: %q has unknown kind %d", ErrObjectKind, o.name, o.kind)
	}
	if (k.size != 0 && o.size != k.size) || o.size == 0 || o.offset < regionArenaOffset || o.offset > arenaEnd || uint64(o.size) > arenaEnd-o.offset {
		return o, fmt.Errorf("%w: %q (%s) at [%d, +%d), object area is [%d, %d), size must be %d",
			ErrObjectBounds, o.name, k.name, o.offset, o.size, regionArenaOffset, arenaEnd, k.size)
	}
	if o.offset%uint64(k.align) != 0 {
		return o, fmt.Errorf("%w: %q (%s) at offset %d, must be a multiple of %d", ErrObjectAlignment, o.name, k.name, o.offset, k.align)
	}
	return o, nil
}

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

// checkObjectName accepts names of 1 to 48 bytes of UTF-8 without control
// characters (so without NUL, which pads names in the table): lockword
// inspect prints them in a table, where a newline or an escape sequence in
// a name could forge a row or garble a monitoring user's terminal.
func checkObjectName(name string) error {
	bad := name == "" || len(name) > entryNameMax || !utf8.ValidString(name)
	for _, c := range name {
		bad = bad || unicode.IsControl(c)
	}
	if bad {
		shown := name
		if len(shown) > 2*entryNameMax {
			shown = shown[:2*entryNameMax] + "…"
		}
		return fmt.Errorf("%w: %q (%d bytes; want 1 to %d bytes of UTF-8 without control characters)", ErrObjectName, shown, len(name), entryNameMax)
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

type openMode int

const (
	modeOpen openMode = iota
	modeCreate
	modeEither
	modeObserve         // for InspectRegion: shared file lock, no process slot; read-only if it cannot write
	modeObserveReadOnly // modeObserve, read-only even where it could write
)

// CreateRegion creates a new region file of size bytes (0 means
// DefaultRegionSize; the minimum is 45056, the header and tables) and opens
// it. It fails with an error satisfying errors.Is(err, fs.ErrExist) if the
// path exists, and with ErrRegionTooSmall if size is negative or below the
// minimum. A path without a slash is a name under /dev/shm.
func CreateRegion(path string, size int64, opts *RegionOptions) (*Region, error) {
	return openRegion(path, size, opts, modeCreate)
}

// OpenRegion opens an existing region file, waiting up to
// RegionOptions.InitTimeout for a concurrent creator. It returns the
// validation errors listed on Region.
func OpenRegion(path string, opts *RegionOptions) (*Region, error) {
	return openRegion(path, 0, opts, modeOpen)
}

// OpenOrCreateRegion opens the region at path, creating it with size bytes
// if it does not exist. Of several processes racing here, exactly one
// creates and initializes it; the others wait for its header. size matters
// only to the creator: an existing region is opened at the size it was
// created with, whatever size says (Region.Size reports it).
func OpenOrCreateRegion(path string, size int64, opts *RegionOptions) (*Region, error) {
	return openRegion(path, size, opts, modeEither)
}

// RemoveOptions are the options of RemoveRegion; nil means the defaults.
type RemoveOptions struct {
	// Force removes the file even while live processes are attached
	// (they keep their mappings and go on using the region, which nobody
	// else can open any more), and removes a regular file that is not a
	// valid region (corrupt, truncated, never initialized).
	Force bool
}

// RemoveRegion removes the region file at path (a name without a slash is
// looked up under DefaultRegionDir), the lifecycle step that a region
// needs once every process is done with it: the file otherwise outlives
// them all (under /dev/shm, until reboot).
//
// It validates the file as OpenRegion does, without attaching, and then,
// under the region's exclusive flock(2) — the lock that attaching takes —
// counts the live processes in its process table. If there are any it
// refuses with ErrRegionInUse (naming their PIDs) unless opts.Force is
// set. A dead process's slot does not count: a region whose processes all
// died (killed, crashed) is removable. It unlinks the file only if the
// path still names the file it validated. A process that opened the path
// just before the removal and attaches after it is attached to a file
// that no one can open any more, as with any removed file.
//
// The errors are OpenRegion's (fs.ErrNotExist for a missing file; with
// Force, only a non-regular file is refused), ErrRegionInUse, and
// ErrUnsupported outside Linux.
func RemoveRegion(path string, opts *RemoveOptions) error {
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

// Close detaches this process from the region and unmaps it. It refuses
// with ErrRegionBusy while this process holds a lock in the region or has
// goroutines waiting for one (read holds of a SharedRWMutex included), and
// returns ErrRegionClosed if already closed.
// Objects of a closed region must not be used.
func (r *Region) Close() error { return r.close() }

// Mutex returns the SharedMutex named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName), creating it,
// unlocked, if the region has no object of that name. Every call with the
// same name on one Region returns the same *SharedMutex. It fails with
// ErrObjectKind if name is an object of another kind, ErrRegionFull if
// there is no room, ErrRegionClosed after Close.
func (r *Region) Mutex(name string) (*SharedMutex, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.mutexes[name]; m != nil && !r.closed {
		return m, nil
	}
	o, err := r.object(name, kindMutex, mutexObjSize)
	if err != nil {
		return nil, err
	}
	m := newSharedMutex(r, name, r.data[o.offset:o.offset+uint64(o.size)])
	r.mutexes[name] = m
	return m, nil
}

// regionPath applies the DefaultRegionDir rule: a path without a slash is a
// name under /dev/shm.
func regionPath(path string) string {
	if path != "" && !bytes.ContainsRune([]byte(path), '/') {
		return DefaultRegionDir + "/" + path
	}
	return path
}

// slotWord returns the bytes of process-table slot number slot.
func (r *Region) slotWord(slot uint32) []byte {
	off := regionProcOffset + int(slot)*procSlotSize
	return r.data[off : off+procSlotSize]
}

// Path returns the region's file path ("memfd:NAME" for a region made by
// CreateMemfdRegion; the file's name for one opened with OpenRegionFile).
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
