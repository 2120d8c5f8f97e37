package wait

import "errors"

// ErrTimeout is returned by FutexWait when its timeout elapsed before a
// wake-up.
var ErrTimeout = errors.New("lockword: futex wait timed out")

// ErrZeroBitset is returned by FutexWaitBitset and FutexWakeBitset for a
// bitset of 0, which matches no waiter.
var ErrZeroBitset = errors.New("lockword: futex bitset must not be 0")

// ErrUnsupported is returned by the kernel futex functions on platforms
// other than Linux.
var ErrUnsupported = errors.New("lockword: kernel futex not supported on this platform (Linux only)")

// Scope says who may wake a kernel futex waiter.
type Scope uint8

const (
	// Shared is for words in memory that several processes map: the
	// kernel keys the wait queue by the physical page, so any process
	// mapping it can wake the sleeper.
	Shared Scope = iota
	// Private is for words that only this process maps
	// (FUTEX_PRIVATE_FLAG): the kernel keys by virtual address, which is
	// cheaper, but other processes cannot wake the sleeper.
	Private
)
