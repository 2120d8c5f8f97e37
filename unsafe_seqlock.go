package lockword

import "unsafe"

// The seqlock's one pointer cast. (Elsewhere in the ring and seqlock code,
// unsafe.Sizeof sizes padding, which casts nothing.)

// bytesOf views the memory of *p as bytes, so that a seqlock can copy a
// value through atomic word loads and stores.
//
// Legal because callers pass only types without pointers (checked by
// NewSeqLock through holdsPointers): reading or writing their bytes cannot
// hide a pointer from the garbage collector or forge one. The slice aliases
// *p, so it keeps *p alive and must not outlive the caller's use of it.
func bytesOf[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}
