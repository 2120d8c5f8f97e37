//go:build !amd64 && !arm64

package contention

import "runtime"

// callers fills stk with the calling goroutine's stack, innermost first,
// from record on (runtime.Callers: no frame pointers to follow here).
func callers(stk *[depth]uintptr) int { return runtime.Callers(2, stk[:]) }
