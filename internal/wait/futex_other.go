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

// FutexWaitBitset returns ErrUnsupported: kernel futexes are Linux-only here.
func FutexWaitBitset(addr *atomic.Uint32, val, bitset uint32, timeout time.Duration, scope Scope) error {
	return ErrUnsupported
}

// FutexWakeBitset returns ErrUnsupported: kernel futexes are Linux-only here.
func FutexWakeBitset(addr *atomic.Uint32, n int, bitset uint32, scope Scope) (int, error) {
	return 0, ErrUnsupported
}

// MonotonicNs returns 0: only the Linux futex functions need it.
func MonotonicNs() int64 { return 0 }
