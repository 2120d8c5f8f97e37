package shm

import (
	"context"
	"time"

	"github.com/lockword/lockword"
)

// A TicketMutex is a fair (FIFO) mutual exclusion lock in a Region,
// shared by every process that maps the region, and robust like
// Mutex: when a holder process dies holding it, the next holder is
// told (ErrOwnerDead). Get one with (*Region).TicketMutex. It is the
// ticket lock of Mellor-Crummey and Scott, "Algorithms for Scalable
// Synchronization on Shared-Memory Multiprocessors" (ACM TOCS, 1991), with
// a record per ticket (see below) and waiters that sleep.
//
// # Order
//
// Within a process, goroutines queue first on a process-local TicketMutex
// (they park as goroutines, in FIFO order); the one at its head takes a
// ticket in the shared queue and waits there, asleep in the kernel on the
// serving word with FUTEX_WAIT_BITSET keyed by its ticket (bit ticket mod
// 32), and Unlock wakes the next ticket's process alone. So tickets are
// served strictly in the order they were taken, each process has at most
// one ticket at a time, and a goroutine waits at most for the goroutines
// ahead of it in its own process, each followed by at most one holder from
// every other process: bounded waiting, no starvation, and at most one
// goroutine per process per lock asleep in the kernel (a thousand waiting
// goroutines cost one OS thread). Between processes the order is that of
// their tickets, not of the goroutines' arrival.
//
// # Shared layout
//
// The object (kind 3, 640 bytes, 64-aligned; docs/abi.md) holds:
//
//	offset  word
//	0       next: the next ticket to issue
//	4       serving: the ticket that holds the lock
//	8-55    held-since and statistics, as Mutex
//	56      flags: bit 28 statistics, 29 inconsistent, 30 not recoverable
//	60      PID of the last holder found dead (for ErrOwnerDead)
//	64      the ticket whose hold held-since describes
//	128     64 ticket records (the table in the source: owner token,
//	        state, ticket), at records[ticket mod 64]
//
//	next - serving  state
//	0               unlocked
//	1               locked, nobody waiting
//	k > 1           locked, k-1 tickets waiting, in order
//
// # Owner death
//
// A waiter that has seen serving stand still for 10 ms looks at the
// served ticket's record. If its owner process is dead (proved as for
// Mutex: a live, stopped or slow holder is never robbed) the waiter
// retires the ticket on its behalf: if the owner held the lock, the lock is
// marked inconsistent first, and the next ticket's holder, whoever and
// wherever it is, gets the lock together with ErrOwnerDead; if it only
// waited (it died before its turn) or gave up, its turn is skipped and
// nobody is told, since it never touched the data. A dead holder is
// noticed at a waiter's next liveness check, made every 10 ms whenever the
// waiter gets a CPU: about 10 ms after the death when CPUs are free, later
// as the load grows (2 cores, p99: 12 ms at load 5-9, 28-92 ms at load
// 9-23, 1.2 s at load 24-32). Repair,
// MarkConsistent, Unlock, as with Mutex; Unlock without
// MarkConsistent makes the lock not recoverable (ErrNotRecoverable for
// every later acquisition). Lock (sync.Locker) runs the SetRepair function
// or panics, as Mutex.Lock does.
//
// # Abandoned tickets and the full queue
//
// A LockContext whose context ends before its turn records its ticket as
// abandoned: whoever serves it skips it, or the process's next waiter
// adopts it (it keeps the place in the queue). The records are a fixed
// table of 64: at most 64 tickets can be outstanding, one per waiting
// process, so more than 64 processes waiting on one lock at once is the
// only way to fill it; a process that finds the table full waits (asleep,
// checking every 10 ms) for the oldest ticket to be served, outside ticket
// order.
//
// # Cost
//
// Order has a price between processes: each handover goes to one chosen
// process, and when processes outnumber cores that process is usually
// asleep, so every handover waits for a kernel wake-up and the scheduler.
// Measured with lockword torture -procs N -lock shared-ticket (2 workers
// per process, no work inside, on this project's shared 2-core machine
// with a load average near 5, so the spread is wide): about 1 M
// acquisitions/s at 2 processes, 0.3-1.2 M at 4, then 0.03-0.3 M at 6 and
// 0.01-0.06 M at 8 and 16, against 3-5 M for Mutex, which lets a
// running process take the lock again. (Waking the next ticket early so
// that it spins did not help measurably here.) Use it where the order of
// processes matters more than throughput.
//
// Counters wrap at 2^32. In the terminology of the Go memory model, the
// n'th call to Unlock synchronizes before the m'th call to Lock (or
// successful TryLock or LockContext) for any n < m, across processes.
//
// A TicketMutex belongs to one Region handle; ownership is per
// process (per handle), not per goroutine. Unlock by a process that does
// not hold it panics.
type TicketMutex struct {
	_ noCopy
	q ticketQueue
}

var _ interface {
	Lock()
	Unlock()
} = (*TicketMutex)(nil)

// Shared ticket-lock object layout (kind 3). Offsets 8-55 are Mutex's
// held-since and statistics (mutexObj*). A RWMutex's writers' queue
// has this layout too, at its offset 0.
const (
	ticketObjSize        = 640
	ticketObjNext        = 0
	ticketObjServing     = 4
	ticketObjFlags       = 56
	ticketObjDeadPID     = 60
	ticketObjStamp       = 64
	ticketObjGiveUps     = 72 // uint64: statistics: LockContext (and RLockContext) calls that waited and gave up
	ticketObjGiveUpNs    = 80 // uint64: their waits, total
	ticketObjGiveUpMaxNs = 88 // uint64: the longest
	ticketObjRecords     = 128
)

func init() {
	registerKind(kindTicketMutex, &kindInfo{
		name: "ticket mutex", size: ticketObjSize, align: 64,
		ownerWords: queueOwnerWords(),
		inspect:    inspectTicketMutex,
	})
}

// TicketMutex returns the TicketMutex named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName),
// creating it, unlocked, if the region has no object of that name. Every
// call with the same name on one Region returns the same
// *TicketMutex. It fails with ErrObjectKind if name is an object of
// another kind, ErrRegionFull if there is no room, ErrRegionClosed after
// Close.
func (r *Region) TicketMutex(name string) (*TicketMutex, error) {
	return handle(r, name, kindTicketMutex, func(obj []byte) *TicketMutex { return newSharedTicketMutex(r, name, obj) })
}

func newSharedTicketMutex(r *Region, name string, obj []byte) *TicketMutex {
	t := &TicketMutex{}
	t.q.init(r, name, "shm.TicketMutex", obj, ticketObjNext, ticketObjServing, ticketObjFlags, ticketObjStamp, ticketObjDeadPID, ticketObjRecords)
	return t
}

// Lock locks t, waiting for its turn. On an owner death it runs the repair
// function (SetRepair); without one, or if it fails, Lock unlocks t
// unrepaired (it becomes not recoverable) and panics; see Mutex.Lock.
func (t *TicketMutex) Lock() {
	t.q.checkOpen("Lock")
	repairAfterLocker(t.LockContext(context.Background()), &t.q.repair, t.MarkConsistent, func() {
		if t.q.heldByUs() {
			t.Unlock()
		}
	})
}

// TryLock locks t if it is free and consistent, without waiting, and
// reports whether it did. It takes no ticket that would have to wait, and
// returns false for a lock taken from a dead holder and not yet repaired,
// or not recoverable (LockContext says which).
func (t *TicketMutex) TryLock() bool {
	t.q.checkOpen("TryLock")
	if !t.q.gate.TryLock() {
		return false
	}
	if t.q.flags.Load()&(queueInconsistent|queueNotRecoverable) == 0 {
		if tk, ok := t.q.tryTake(recHolding); ok {
			t.q.ticket = tk
			err := t.q.acceptHold(false, time.Time{})
			if err == nil {
				return true
			}
			if isOwnerDead(err) {
				// Became inconsistent between the look and the take:
				// give the lock back rather than take it without
				// telling. (Not recoverable: acceptHold passed it on.)
				t.q.held.Store(false)
				t.q.finish(tk, packRecord(tk, t.q.token, recHolding))
			}
		}
	}
	t.q.gate.Unlock()
	return false
}

// LockContext locks t, waiting for its turn until ctx is done. If the lock
// is free it is taken even when ctx is already done. It returns:
//
//   - nil: the caller holds the lock;
//   - an *OwnerDeadError (errors.Is(err, ErrOwnerDead)): the caller holds
//     the lock, whose previous holder died holding it; repair the data,
//     call MarkConsistent, Unlock;
//   - an error wrapping ErrNotRecoverable: the caller does not hold it;
//   - ctx.Err(): the caller does not hold it, and its ticket is passed
//     over so that the waiters behind it are not held up.
func (t *TicketMutex) LockContext(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if err := t.q.errClosed("LockContext"); err != nil {
		return err
	}
	began := t.q.statsClock()
	if err := t.q.gate.LockContext(ctx); err != nil {
		t.q.countGiveUp(began, err)
		return err
	}
	slow, start, err := t.q.acquire(ctx, true)
	if err == nil {
		err = t.q.acceptHold(slow, start)
	}
	if err != nil && !isOwnerDead(err) {
		t.q.gate.Unlock()
		t.q.countGiveUp(began, err)
	}
	return err
}

// Unlock unlocks t, handing it to the next ticket. If t was taken from a
// dead owner and MarkConsistent was not called, it becomes not
// recoverable. Unlock panics if this process does not hold t.
func (t *TicketMutex) Unlock() {
	t.q.checkOpen("Unlock")
	t.q.release()
	t.q.gate.Unlock()
}

// MarkConsistent declares that the data protected by t, taken with
// ErrOwnerDead, has been repaired (POSIX pthread_mutex_consistent). It
// returns an error if this process does not hold t.
func (t *TicketMutex) MarkConsistent() error { return t.q.markConsistent() }

// SetRepair sets the function that Lock runs, holding the lock, when it
// takes it from a dead owner; see Mutex.SetRepair.
func (t *TicketMutex) SetRepair(fn func() error) { setRepair(&t.q.repair, fn) }

// Name returns the object's name in its region.
func (t *TicketMutex) Name() string { return t.q.name }

// SetStuckThreshold sets how long a waiter of this process waits before it
// logs one stuck report naming the holder's PID; zero restores
// DefaultStuckThreshold, a negative duration disables reports.
func (t *TicketMutex) SetStuckThreshold(threshold time.Duration) {
	t.q.stuckNs.Store(int64(threshold))
}

// EnableStats starts collecting contention statistics for every process
// using t (in the region: Stats and lockword inspect show all processes
// together). Parks counts kernel sleeps.
func (t *TicketMutex) EnableStats() {
	t.q.checkOpen("EnableStats")
	t.q.flags.Or(queueStats)
}

// Stats returns the statistics collected since EnableStats, summed over
// all processes.
func (t *TicketMutex) Stats() lockword.Stats {
	t.q.checkOpen("Stats")
	return queueObjStats(t.q.obj)
}

func (t *TicketMutex) holdsLock() bool { return t.q.heldByUs() }

func isOwnerDead(err error) bool {
	_, ok := err.(*lockword.OwnerDeadError)
	return ok
}

func inspectTicketMutex(insp *inspector, obj []byte, info *ObjectInfo) {
	insp.queue(obj, info, word32(obj, ticketObjNext), word32(obj, ticketObjServing), word32(obj, ticketObjFlags),
		word32(obj, ticketObjStamp), word32(obj, ticketObjDeadPID), obj[ticketObjRecords:ticketObjRecords+queueRecords*queueRecordLen])
	info.Word = word32(obj, ticketObjServing).Load()
}
