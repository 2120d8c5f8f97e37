//go:build !linux

package wait

import (
	"sync/atomic"
	"time"
)

// FutexWait returns ErrUnsupported: kernel futexes are Linux-only here.
func FutexWait(addr *atomic.Uint32, val uint32, timeout time.Duration, scope Scope) error {
	return ErrUnsupported
}

// FutexWake returns ErrUnsupported: kernel futexes are Linux-only here.
func FutexWake(addr *atomic.Uint32, n int, scope Scope) (int, error) {
	return 0, ErrUnsupported
}
