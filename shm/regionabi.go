package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"unicode"
	"unicode/utf8"
)

// The region's file format, ABI version 1, as docs/abi.md gives it: the
// header and table constants, the kind registry, the header's checksum and
// its parsing in the documented order of checks. Changes here are changes
// to docs/abi.md and to the C library (c/).

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
	entryKind    = 48 // uint32: bits 0-15 the kind, bits 16-31 its parameter
	entrySize    = 52 // uint32: bytes
	entryOffset  = 56 // uint64: from the start of the file

	// The kind field's halves. The parameter is 0 for every kind but
	// kindValue, whose entries record T's alignment there. A build that
	// knows no parameters reads a nonzero one as an unknown kind and
	// refuses the region, as it refuses any kind newer than itself.
	entryKindMask       = 0xffff
	entryKindParamShift = 16

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
	kindMutex       objectKind = 1 // Mutex
	kindBytes       objectKind = 2 // (*Region).Bytes: plain data
	kindTicketMutex objectKind = 3 // TicketMutex
	kindRWMutexV1   objectKind = 4 // RWMutex before per-process reader counts: validated, never made
	kindCond        objectKind = 5 // Cond
	kindRing        objectKind = 6 // RingProducer, RingConsumer: shared byte ring (sharedring.go)
	kindSeqLock     objectKind = 7 // NewSeqLock (sharedseqlock.go)
	kindRWMutex     objectKind = 8 // RWMutex, readers counted per process (sharedrw.go)
	kindValue       objectKind = 9 // Value: one plain-data T (regionvalue.go); parameter: T's alignment
)

// kindSemaphore is Semaphore (semaphore.go).
const kindSemaphore objectKind = 10

// kindMPSC is the shared multi-producer byte queue (MPSCProducer,
// MPSCConsumer; mpsc.go).
const kindMPSC objectKind = 11

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
	// 0-27 hold an owner token (see Mutex). Attach avoids reissuing
	// a token that such a word still names, and Close refuses while one
	// names ours.
	ownerWords []uint32
	// inspect describes the object's live state for Inspect. It
	// must not write to obj when insp.r.readOnly (the mapping is
	// read-only: a store faults).
	inspect func(insp *inspector, obj []byte, info *ObjectInfo)
}

var objectKinds = map[objectKind]*kindInfo{}

func registerKind(k objectKind, info *kindInfo) { objectKinds[k] = info }

// regionObject is one validated object table entry.
type regionObject struct {
	name string
	kind objectKind
	// param is the kind field's bits 16-31: for kindValue, T's alignment
	// in bytes (checkKindParam); 0 for every other kind.
	param  uint32
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
	if fileSize < hdrFlags {
		// The version and layout fields are cut off and read as zero: say
		// so, rather than name a version 0 or a layout the file never had.
		return nil, fmt.Errorf("%w: the file has only %d bytes, too few for the version and layout fields of a region header (%d bytes): truncated, or not a region",
			ErrBadVersion, fileSize, hdrFlags)
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
		// Truncated, or a damaged size field? With the whole header in the
		// file, its checksum tells: a header that fails it is damaged (the
		// size may be garbage), one that passes was cut short.
		if fileSize >= regionArenaOffset {
			count := ne.Uint32(hdr[hdrObjectCount:])
			if sum, want := ne.Uint32(hdr[hdrChecksum:]), headerChecksum(hdr, count); sum != want {
				return nil, fmt.Errorf("%w: header says %d bytes, file has %d, and the header checksum fails (stored %#08x, computed %#08x): the header is damaged, not the file truncated",
					ErrBadSize, size, fileSize, sum, want)
			}
		}
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
	rawKind := ne.Uint32(e[entryKind:])
	o := regionObject{
		name:   string(rawName[:n]),
		kind:   objectKind(rawKind & entryKindMask),
		param:  rawKind >> entryKindParamShift,
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
		return o, fmt.Errorf("%w: %q has unknown kind %d", ErrObjectKind, o.name, rawKind)
	}
	if err := checkKindParam(o); err != nil {
		return o, err
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

// checkKindParam checks the parameter half of o's kind field: a kindValue
// records T's alignment, a power of two up to the object's own alignment
// (so that placing the object aligns T); every other kind has none.
func checkKindParam(o regionObject) error {
	if o.kind == kindValue {
		if a := o.param; a == 0 || a&(a-1) != 0 || a > objectKinds[kindValue].align {
			return fmt.Errorf("%w: value %q records alignment %d (want a power of two up to %d)", ErrObjectKind, o.name, a, objectKinds[kindValue].align)
		}
		return nil
	}
	if o.param != 0 {
		return fmt.Errorf("%w: %q has unknown kind %#x (%s with parameter %d)", ErrObjectKind, o.name, uint32(o.kind)|o.param<<entryKindParamShift, objectKinds[o.kind].name, o.param)
	}
	return nil
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
