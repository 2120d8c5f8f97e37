// Package lockword provides synchronization primitives built from atomics
// and futexes: locks that are a word of memory plus a protocol.
//
// A lock is claimed with one compare-and-swap on the fast path; on the slow
// path a waiter spins briefly and then sleeps on the word (futex wait); the
// releaser wakes a sleeper. Because the state is just a word, the same
// protocols can live in the Go heap or in a file mapped by several
// processes: package shm (shm.Region, shm.Mutex, ...) holds those.
//
// # Primitives
//
//	Mutex        three-state futex mutex (Drepper), spin then sleep; not fair
//	SpinMutex    test-and-test-and-set spin lock with backoff, yield, then sleep
//	TicketMutex  FIFO ticket lock; waiters park keyed by ticket; fair
//	RWMutex      phase-fair reader-writer lock; waiters park
//	Cond         condition variable (the runtime's notify list and a queue), for any sync.Locker
//
// and, where a lock is the wrong tool (see docs/when-to-lock.md):
//
//	Ring       wait-free single-producer single-consumer ring (Rigtorp) whose
//	           blocking calls sleep only when the ring stays full or empty
//	SeqLock    sequence-counter snapshot of plain data: one writer, readers
//	           that never block it and never see a torn value
//	Update     CAS loops for the sync/atomic types (also UpdateIf, UpdateMax,
//	           UpdateMin)
//
// Every lock implements sync.Locker and offers TryLock and a LockContext
// that gives up when its context ends (a nil context is ErrNilContext), a
// stuck threshold (a waiter past it logs one log/slog warning) and opt-in
// contention statistics (EnableStats, Stats). The in-process locks also
// have a zero value that is unlocked and can carry a name (SetName); a
// shm.Mutex comes from (*shm.Region).Mutex, named there. Each type's
// documentation gives the states of its lock word as a table.
//
// Fairness: Mutex and SpinMutex are not fair, but their waits are
// bounded. A woken waiter competes with running goroutines, and a
// goroutine may take the lock many times in a row; but a waiter that has
// waited 1 ms stops competing and is handed the lock: while such waiters
// exist, Unlock gives the lock to the oldest of them instead of releasing
// it (the starvation mode of sync.Mutex, Go 1.9); and an Unlock that
// wakes a waiter yields its processor, so that the woken goroutine runs
// at once. Measured on 2 loaded cores beside sync.Mutex in the same
// runs, Mutex's worst wait was 0.02-1.5× sync.Mutex's (medians) at 2 to
// 64 goroutines and beside a greedy re-locker (0.17-0.24× at 64 in
// 200 ms runs), except one set of 3 s runs at load 3-6 (3.5× at 64);
// SpinMutex's 0.1-1.6× (BENCHMARKS.md, "Mutex and SpinMutex"). shm.Mutex
// bounds its waits the same way between processes. Use
// TicketMutex where every acquisition must be served in arrival order.
//
// # Waiting: private and shared
//
// How a waiter sleeps is decided in one place, the internal/wait package:
//
//   - Locks in the Go heap wait privately: the waiting goroutine is parked
//     in a parking lot keyed by the word's address, so it holds no OS
//     thread, and any number of goroutines may wait. This works on every
//     platform.
//   - Words in memory shared between processes (package shm) must be
//     woken by whichever process releases them, so they wait on the kernel
//     futex without FUTEX_PRIVATE_FLAG. That is Linux-only.
//
// One exception: Cond's Wait sleeps in the runtime's notify list, through
// a sync.Cond, the list sync.Cond itself is built on: the runtime parks
// the goroutine more cheaply than a parking lot outside it can, and the
// list keeps the order of waiters that Cond needs (see Cond).
// WaitContext, which must be able to leave, parks through internal/wait.
//
// # Platforms
//
// Everything in-process works on every platform Go supports; the CPU pause
// hint used while spinning exists on amd64 (PAUSE) and arm64 (YIELD) and is
// a no-op elsewhere. Kernel futex waiting, and with it memory shared between
// processes (package shm), is Linux-only.
//
// # Memory model
//
// For every lock here, the n'th call to Unlock synchronizes before the m'th
// call to Lock (or successful TryLock or LockContext) for any n < m, as for
// sync.Mutex.
package lockword
