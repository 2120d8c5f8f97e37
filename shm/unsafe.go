package shm

import (
	"github.com/lockword/lockword"
	"sync/atomic"
	"unsafe"
)

// Every use of unsafe in the package is here. Shared regions hand out words
// of a file mapped with mmap(MAP_SHARED); the rest of the code sees them only
// as *atomic.Uint32 and *atomic.Uint64.
//
// Why the casts are legal:
//
//   - The mapping is memory the Go runtime does not manage: it is never
//     moved or freed by the garbage collector, so a pointer into it stays
//     valid until munmap, and the GC ignores pointers outside its heap.
//   - atomic.Uint32 and atomic.Uint64 are structs whose only non-zero-size
//     field is a uint32 or uint64 (plus zero-size noCopy/align64 markers):
//     their size equals the integer's and they carry no pointers, so
//     reinterpreting 4 or 8 bytes of the mapping as one is a plain typed view
//     of those bytes.
//   - Callers pass offsets that were checked to lie inside the mapping and to
//     be aligned to the word's size (regionabi.go validates every object table
//     entry; header fields have fixed, aligned offsets), and the mapping
//     itself starts on a page boundary, so every word is naturally aligned:
//     atomic instructions on amd64 and arm64 require that.
//   - The slice is only ever indexed, never appended to or resliced past its
//     length, so &data[off] stays inside the mapping, and Go's bounds check on
//     data[off+size-1] turns a bad offset into a panic in tests rather than a
//     stray pointer.

// word32 returns the 32-bit word at byte offset off of a mapping.
func word32(data []byte, off uint64) *atomic.Uint32 {
	_ = data[off+3] // bounds check: the whole word lies in the mapping
	return (*atomic.Uint32)(unsafe.Pointer(&data[off]))
}

// word64 returns the 64-bit word at byte offset off of a mapping.
func word64(data []byte, off uint64) *atomic.Uint64 {
	_ = data[off+7]
	return (*atomic.Uint64)(unsafe.Pointer(&data[off]))
}

// valueAt returns the T at byte offset off of a mapping: a Value.
//
// Legal because T holds no pointers (Value checks, through
// checkNoPointers): the garbage collector never scans the value, and bytes
// another process writes there cannot forge a pointer it would follow.
// The value lies inside the mapping (checked here, through the bounds
// check on its last byte; callers pass a T of nonzero size), and off is a
// multiple of T's alignment (Value places the object at a multiple
// of 64 in a page-aligned mapping and refuses a T aligned to more), so *T
// is an aligned typed view of those bytes, valid until munmap for the
// reasons given above.
func valueAt[T any](data []byte, off uint64) *T {
	var zero T
	_ = data[off+uint64(unsafe.Sizeof(zero))-1]
	return (*T)(unsafe.Pointer(&data[off]))
}

// words64 returns n 64-bit words of a mapping starting at byte offset off:
// the payload of a SeqLock placed in a region (NewSeqLock).
//
// Legal for the reasons given for word32 and word64: the words lie inside
// the mapping (checked here, through the bounds check on the last byte), off
// is a multiple of 8 in a page-aligned mapping (callers place it so), and
// atomic.Uint64 is a plain 8-byte word.
func words64(data []byte, off uint64, n int) []atomic.Uint64 {
	if n == 0 {
		return nil
	}
	_ = data[off+8*uint64(n)-1]
	return unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&data[off])), n)
}

// gateIdle reports whether no goroutine holds or waits at gate, the
// in-process lock that a Mutex's waiters queue at: its state word is 0.
//
// Legal because lockword.Mutex's first field is its state word (the noCopy
// before it has size 0), as TestGateIdleReadsState checks: the state is
// read with an atomic load, as the Mutex itself reads it. The root package
// exports no way to ask, and this one read on a rare path (a hand-off word
// naming this process) is not worth an API.
func gateIdle(gate *lockword.Mutex) bool {
	return (*atomic.Uint32)(unsafe.Pointer(gate)).Load() == 0
}
