package shm

import (
	"fmt"
	"reflect"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/seqcore"
)

func init() {
	registerKind(kindValue, &kindInfo{name: "value", align: bytesAlign,
		inspect: func(*inspector, []byte, *ObjectInfo) {}})
}

// maxValueSize is the largest T a Value holds, in bytes: the largest
// Bytes object.
const maxValueSize = 1 << 31

// Value returns the named value of type T in region r, creating it,
// holding the zero T, if the region has no object of that name: typed
// plain data beside the region's locks, without unsafe casts of Bytes.
// Every process that maps the region sees the same T; *T aliases the
// mapping and must not be used after r is closed (the memory is unmapped:
// a use faults). Every call for a name returns the same pointer.
//
// The value is ordinary memory: reads and writes of its fields are not
// atomic, so processes take a lock of the region around them (a
// Mutex: each Unlock synchronizes before the next Lock that takes
// the lock, in whichever process) and repair the value when LockContext
// reports ErrOwnerDead, as the first example of OpenOrCreate does.
// T may also hold sync/atomic types (atomic.Uint64 and the like): T is
// placed at a multiple of 64 bytes, so its fields are aligned as Go lays
// them out. The race detector does not see the mapping: only the lock
// orders these accesses, between processes as within one. A record that
// a repair reads to undo a half-done update (an intent written before the
// update, cleared after) must be stored with sync/atomic: the compiler
// may drop a plain store that a later store to the same field overwrites.
//
// T must hold no pointers (ErrHasPointers, naming the field): a pointer
// means nothing in another process. The region's object table records T's
// size and alignment, so a process opening the name with another T fails:
// with ErrObjectBounds if the size differs, with ErrObjectKind if only
// the alignment does. Two types of equal size and alignment ([2]int64 and
// struct{ A, B int64 }) are not told apart: every process must use the
// same type. Other errors: ErrObjectBounds for a T of size 0 or over 2^31
// bytes, ErrObjectKind if name is an object of another kind, ErrObjectName
// for a name other than 1 to 48 bytes of UTF-8 without control characters,
// ErrRegionFull, ErrRegionClosed.
func Value[T any](r *Region, name string) (*T, error) {
	t := reflect.TypeFor[T]()
	if err := seqcore.CheckNoPointers(t, "shm.Value", "a region value is memory shared with other processes", lockword.ErrHasPointers); err != nil {
		return nil, err
	}
	size, align := uint64(t.Size()), uint64(t.Align())
	if size == 0 || size > maxValueSize {
		return nil, fmt.Errorf("%w: shm.Value[%v] %q: %d bytes, want 1 to %d", ErrObjectBounds, t, name, size, uint64(maxValueSize))
	}
	if align > uint64(objectKinds[kindValue].align) {
		// No Go type on amd64 or arm64 is aligned to more than 8 bytes.
		return nil, fmt.Errorf("%w: shm.Value[%v] %q: %d-byte alignment, at most %d", ErrObjectAlignment, t, name, align, objectKinds[kindValue].align)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, err := r.objectParam(name, kindValue, uint32(align), uint32(size))
	if err != nil {
		return nil, err
	}
	if uint64(o.size) != size || uint64(o.param) != align {
		why := ErrObjectBounds
		if uint64(o.size) == size {
			why = ErrObjectKind
		}
		return nil, fmt.Errorf("%w: value %q holds a type of %d bytes, %d-byte aligned; %v is %d bytes, %d-byte aligned",
			why, name, o.size, o.param, t, size, align)
	}
	return valueAt[T](r.data, o.offset), nil
}
