// Package wait is lockword's waiting layer: the only code that knows how a
// goroutine goes to sleep on a 32-bit lock word and how it is woken.
//
// The contract is the futex contract, and nothing more (Rust's std keeps the
// same three verbs): wait on this word while it still holds this value
// (returning early, "spuriously", is allowed, so callers loop and re-check);
// wake up to n waiters of this word.
//
// Two flavours, decided here and nowhere else:
//
//   - Private waiting (Wait, Wake) is for words in the Go heap of this
//     process. It parks goroutines, not OS threads: waiters queue in a
//     parking lot keyed by the word's address (the design of WebKit's
//     ParkingLot and Rust's parking_lot; Go's runtime/sema.go is the same
//     idea). A goroutine blocked in a futex syscall would pin an OS thread,
//     and Go aborts past 10,000 threads. It is pure Go and works everywhere.
//
//     Keyed waiting (WaitKey, WakeKey) is the one addition to the contract:
//     a waiter also names a key, and only a wake-up for the same word and
//     key wakes it. A ticket lock keys its waiters by ticket so that Unlock
//     wakes the holder of the next ticket alone (the private analogue of
//     FUTEX_WAIT_BITSET). Keyed and plain waiters of one word do not wake
//     each other. WaitOne and WakeOne are keyed waiting for protocols with
//     at most one waiter per word and key (a ticket): the waiter sits in a
//     slot of a fixed table that the waker reads directly, so a hand-off
//     takes no bucket lock (slot.go); Parked and Noted count it as parked.
//
//   - Kernel waiting (FutexWait, FutexWake) is the futex(2) syscall, in the
//     shared flavour for words in memory mapped by several processes (any of
//     them may wake a sleeper, so FUTEX_PRIVATE_FLAG must not be set) and in
//     the private flavour for completeness. FutexWaitBitset and
//     FutexWakeBitset are its keyed form (FUTEX_WAIT_BITSET,
//     FUTEX_WAKE_BITSET): a sleeper names a 32-bit set and only wake-ups
//     sharing a bit with it wake it, so a shared ticket lock keyed by ticket
//     mod 32 wakes the next holder's process alone. It is Linux-only;
//     elsewhere it returns ErrUnsupported. Every kernel sleeper pins an OS
//     thread, so callers put at most one goroutine per process per word to
//     sleep here and queue the rest with private waiting.
package wait
