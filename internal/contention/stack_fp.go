//go:build amd64 || arm64

package contention

import "unsafe"

// framePointer returns the frame pointer register (BP, R29) of its caller's
// frame: its ABI wrapper's, or its caller's.
func framePointer() unsafe.Pointer

// callers fills stk with the return addresses of the calling goroutine's
// frames, innermost first (the first ones inside this package), by
// following the frame pointers: each frame record holds the caller's frame
// pointer, and its return address one word above it. The chain ends with
// the goroutine's first frame (a nil frame pointer) or at a boundary
// (atBoundary). The caller holds profile.mu.
//
// On a cache miss atBoundary calls into the runtime, which may grow (copy)
// the stack mid-walk: fp is a pointer, not a uintptr, so that the copy
// adjusts it, as it adjusts the frame pointers saved in the frames.
func callers(stk *[depth]uintptr) int {
	fp := framePointer()
	n := 0
	for n < len(stk) && fp != nil {
		pc := *(*uintptr)(unsafe.Add(fp, unsafe.Sizeof(uintptr(0))))
		stk[n] = pc
		n++
		if atBoundary(pc) {
			break
		}
		fp = *(*unsafe.Pointer)(fp)
	}
	return n
}
