// Package shm provides lockword's locks in memory shared between
// processes: a Region (a file, or a memfd, mapped by every process that
// opens it) holds named objects, and each kind of object is a lock word
// plus a protocol that survives the death of a process holding it.
//
//	Region        a mapped file holding named objects, its header validated
//	              on open (Create, Open, OpenOrCreate, CreateMemfd, OpenFile;
//	              Remove, Inspect)
//	Value         a value of a plain-data type T in a Region, T's size and
//	              alignment recorded; guarded by the region's locks
//	Mutex         robust mutex: owner death is reported (lockword.ErrOwnerDead)
//	TicketMutex   FIFO lock, robust, waiters served in arrival order
//	RWMutex       phase-fair reader-writer lock, robust for writers and readers
//	Cond          condition variable for the locks above
//	Semaphore     weighted semaphore, FIFO across processes; a dead
//	              process's permits are taken back (lockword.ErrOwnerDead)
//	RingProducer, RingConsumer  byte-message SPSC ring between two
//	              processes; peer death reported
//	MPSCProducer, MPSCConsumer  byte-message queue from any number of
//	              producer processes to one consumer; a producer dead
//	              mid-message loses only that message
//	SeqLock       lockword.SeqLock in a Region; a writer dead mid-Store reported
//
// The C library (directory c/) implements the same region ABI
// (docs/abi.md), so C and Go processes share objects.
//
// Every lock implements sync.Locker and offers TryLock and a LockContext
// that gives up when its context ends (a nil context is
// lockword.ErrNilContext), a stuck threshold and opt-in statistics
// (lockword.Stats). What the two halves of lockword share stays in the root
// package: ErrOwnerDead, ErrNotRecoverable and OwnerDeadError (etcdlock
// returns them too), ErrCorrupt and CorruptError, ContextLocker, Stats,
// ErrHasPointers and ErrRingClosed.
//
// Mutex bounds its waits as lockword.Mutex does, between processes: a
// process's kernel sleeper that has waited 1 ms files a request in the
// object's hand-off word, and the next Unlock hands it the lock instead of
// releasing it; a hand-off to a process that died before it returned the
// lock is taken back by the next waiter without ErrOwnerDead (see Mutex).
//
// # Waiting
//
// A word in shared memory must be woken by whichever process releases it,
// so waiters sleep on the kernel futex without FUTEX_PRIVATE_FLAG (wait.go,
// over internal/wait). A sleeping kernel waiter holds an OS thread, so each
// kind lets only one goroutine per process sleep there and parks the others
// privately behind an in-process lockword lock (its gate).
//
// # Platforms
//
// The package builds on every platform Go supports, but regions need
// Linux (futexes, /proc, memfd): elsewhere Create, Open and the other
// region functions return ErrUnsupported. Only region_linux.go and
// proc_linux.go make system calls; everything above them is portable.
//
// # Memory model
//
// For every lock here, the n'th call to Unlock synchronizes before the m'th
// call to Lock (or successful TryLock or LockContext) for any n < m, in any
// process, as for sync.Mutex.
package shm
