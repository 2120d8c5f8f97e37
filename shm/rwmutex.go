package shm

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

// Bits of a RWMutex's state word (in). Phase and writer have the
// values of lockword.RWMutex's.
const (
	srwPhase     = 1 << 0 // flipped by each writer as it arrives
	srwWriter    = 1 << 1 // a writer holds the lock or waits for the other phase's readers to leave
	srwParked    = 1 << 2 // readers may sleep on the word: whoever clears the writer bit wakes them
	srwStats     = 1 << 3 // statistics on: RLock's fast path fails
	srwAbandoned = 1 << 4 // the arrival's writer gave up or died before its readers left
	srwArrival   = 1 << 5 // one writer arrival, in bits 5-31 (wraps)
	// srwArrivalMask names one arrival: its phase, the writer bit and the
	// arrival number (a reader behind it waits for these to change).
	srwArrivalMask = srwPhase | srwWriter | ^uint32(srwArrival-1)
	// srwDrainSleeping, in the drain word, says that the waiting writer
	// may sleep on it: a reader that empties its count must wake it.
	srwDrainSleeping = 1
	srwDrainOne      = 2 // one emptied count, in bits 1-31 of drain (wraps)
)

// RWMutex object layout (kind 8, 12992 bytes, 64-aligned;
// docs/abi.md). The first 640 bytes are a robust ticket queue for the
// writers, laid out exactly as a TicketMutex; then the state word;
// then one reader count per process-table slot and phase, and the owner
// token of the incarnation each slot's counts belong to.
const (
	rwObjSize  = rwObjStamps + regionProcSlots*4
	rwObjIn    = 640 // uint32: phase, writer, parked, stats, abandoned, arrival number
	rwObjDrain = 644 // uint32: bumped (by 2) when a reader count of the draining phase empties; bit 0: the writer may sleep
	// rwObjDeadReaders counts the reader slots found dead with read
	// holds and dropped; rwObjDeadReaderPID is the last one's PID.
	rwObjDeadReaders   = 648
	rwObjDeadReaderPID = 652
	// rwObjLines is a uint64 whose bit L is set (never cleared) once a
	// slot s with s%64 == L has been stamped: its counts lie on line L
	// (bytes 64L-64L+63) of each phase's counts, and a writer sums only
	// the lines whose bit is set.
	rwObjLines = 656
	// rwObjCounts: for phase p and slot s, a uint32 at rwObjCounts +
	// p*rwPhaseBytes + (s%64)*64 + (s/64)*4, so that 64 consecutive slots
	// (processes that attach one after another) count on 64 cache lines.
	rwObjCounts  = 704
	rwPhaseBytes = regionProcSlots * 4
	// rwObjStamps: for slot s, a uint32 at rwObjStamps + 4*s: the owner
	// token of the incarnation whose counts the slot's words hold (0:
	// none; the counts mean nothing).
	rwObjStamps = rwObjCounts + 2*rwPhaseBytes
)

// rwCountOff is the offset, in the object, of slot's reader count for
// phase p (0 or 1).
func rwCountOff(p, slot uint32) uint64 {
	return rwObjCounts + uint64(p)*rwPhaseBytes + uint64(slot%64)*64 + uint64(slot/64)*4
}

// rwStampOff is the offset, in the object, of slot's stamp.
func rwStampOff(slot uint32) uint64 { return rwObjStamps + 4*uint64(slot) }

// rwSlotAt is the slot whose count lies at index i (0-1023, in memory
// order) of a phase's counts.
func rwSlotAt(i uint32) uint32 { return i%16*64 + i/16 }

// A RWMutex is a reader/writer lock in a Region, shared by every
// process that maps it: any number of readers, or one writer, in any of
// the processes. Writers are robust as Mutex is: when a writer
// process dies holding the lock, the next writer gets it with
// ErrOwnerDead. Readers are robust too: a reader process that dies holding
// read locks is found dead by the next writer, which drops its holds and
// goes on. Get one with (*Region).RWMutex.
//
// It is phase-fair, as the ticket lock PF-T of Brandenburg and Anderson
// ("Spin-Based Reader-Writer Synchronization for Multiprocessor Real-Time
// Systems", Real-Time Systems 46, 2010), with sleeping waiters, and counts
// its readers per process, as Linux's per-CPU rw-semaphores count per CPU
// and as SRCU counts per phase (McKenney, "Sleepable RCU", 2006): every
// process-table slot has one reader count per phase, on a cache line that
// no other process's counts of the same phase share. A reader reads the
// state word, adds one to its process's count for the phase it read, and
// reads the state word again: no writer and no change, it holds (one add
// to a line of its own, so readers of different processes do not contend).
// A writer, first in the writers' queue (a robust FIFO ticket queue, as in
// TicketMutex), sets the writer bit and flips the phase with one
// add, then waits until the counts of the old phase, summed over the
// processes that are alive, reach zero. Readers that arrive while the
// writer bit is set count themselves in the new phase and wait until that
// arrival ends; the writer's release admits all of them before the next
// writer arrives, and that writer waits only for them. So neither side
// starves the other: a reader waits for at most one writer, a writer for
// the writers ahead of it and one batch of readers each. (A reader that
// counted itself in the old phase just as a writer flipped it moves to the
// new one: that may delay the writer, never admit the reader.)
//
// A writer that gives up (LockContext) or dies while the readers of the
// old phase are still inside leaves its writer bit set and marks its
// arrival abandoned: whoever then finds those readers gone clears it (the
// last of them, a reader waiting behind it, or the writer itself), unless
// the next writer adopts the arrival (keeps the bits, waits for the same
// readers) first. Clearing it at once would let the next writer flip the
// phase back while readers of that phase still hold.
//
// # Shared layout
//
// The object (kind 8, 12992 bytes; docs/abi.md): offsets 0-639 are the
// writers' queue, as TicketMutex (next, serving, held-since,
// statistics, flags, dead PID, stamp, records); then
//
//	offset  word
//	640     in: bit 0 phase      flipped by each arriving writer
//	            bit 1 writer     a writer holds, or waits for the old
//	                             phase's readers: new readers wait
//	            bit 2 parked     readers may sleep on in: clearing the
//	                             writer bit must wake them
//	            bit 3 stats      statistics on: RLock's fast path fails
//	            bit 4 abandoned  that writer gave up or died waiting
//	            bits 5-31        writer arrivals (wrapping)
//	644     drain: bits 1-31 bumped by a reader that empties its count
//	        while a writer waits; bit 0: the writer may sleep on it
//	648     dead reader slots dropped (count); 652: the last one's PID
//	656     lines (uint64): bit L set once a slot s with s%64 == L was
//	        stamped; writers sum only those lines of counts
//	704     counts: phase p, slot s at 704 + 4096p + 64(s%64) + 4(s/64):
//	        the read holds (and waits) of slot s's process in phase p
//	8896    stamps: slot s at 8896 + 4s: the owner token of the process
//	        whose counts slot s holds, written before its first count
//
//	state of in            read holds are counted in
//	writer clear, phase p  phase p (the other phase's counts hold no live holds)
//	writer set, phase p    phase 1-p; readers counted in p wait
//	writer|abandoned       as writer set; cleared once 1-p is empty
//
// RLock is a load, one add on its process's count and a second load (the
// fast path); RUnlock a load, one subtract and, when its process's count
// reaches zero, a load: with a writer waiting, a bump of drain and a futex
// wake. A reader that gives up (RLockContext) while the same writer is
// there takes its count back; once that arrival ended, it holds.
//
// # Owner death
//
// Writers: a writer's ticket record names it (see TicketMutex), and
// a waiter (writer or reader) that has waited 10 ms checks it. A writer
// that died holding leaves the writer bit set, so readers stay out of the
// data it may have left half-written; the lock is marked inconsistent, and
// the next writer (one already queued, or the next to call Lock) takes it
// over with ErrOwnerDead, repairs, calls MarkConsistent and Unlocks, which
// admits the readers. Until then readers wait (RLockContext returns at its
// context's end; stuck reports name the dead writer). A writer that died
// before it held the lock (queued, or waiting for readers to leave) never
// touched the data: its arrival is abandoned as if it had given up, nobody
// is told. Unlock without MarkConsistent makes the lock not recoverable:
// every acquisition, read or write, then fails with ErrNotRecoverable
// (RLock and Lock panic).
//
// Readers: a writer waiting for readers checks, every 10 ms, whether the
// processes whose counts it waits for are alive (their stamp names their
// process-table incarnation, checked as a dead writer's token is). The
// counts of a dead process are dropped (its stamp is cleared; the counts
// are zeroed when the slot's next process first uses the lock), so a
// reader killed holding read locks delays a writer by about 10 ms plus
// the time its process takes to die. The writer is not told with an
// error: readers do not write, so a dead reader cannot have left the data
// inconsistent, and there is nothing to repair. Until a writer comes,
// Inspect reports such holds as ObjectInfo.DeadReaders (not in
// Readers); the object counts the drops and keeps the last dead reader's
// PID (docs/abi.md).
// Readers waiting behind a writer that gave up do the same check, so an
// abandoned arrival whose last readers died is cleared too.
//
// Read holds belong to the Region handle (the process-table slot) that
// took them: RUnlock must be called through the same Region's
// RWMutex as its RLock (any goroutine of the process may call it);
// RUnlock with no read hold of this handle panics. Close refuses with
// ErrRegionBusy while this handle holds read locks.
//
// In the terminology of the Go memory model, the n'th call to Unlock
// synchronizes before the m'th call to Lock for any n < m; for any call to
// RLock there is an n such that the n'th Unlock synchronizes before that
// RLock, and the matching RUnlock synchronizes before the n+1'th Lock;
// across processes as within one.
//
// A RWMutex belongs to one Region handle; write ownership is per
// process (per handle), not per goroutine. Unlock by a process that does
// not hold the write lock panics.
type RWMutex struct {
	_         noCopy
	q         ticketQueue // the writers
	in, drain *atomic.Uint32
	// mine are this handle's slot's reader counts, by phase.
	mine [2]*atomic.Uint32
	// scanFrom is where drained starts: the line (0-63) of a phase's
	// counts where it last found a live reader (a hint).
	scanFrom atomic.Uint32
	// rsleeper lets one of this process's readers sleep in the kernel
	// waiting for a writer to leave; the others park (see rwait), so a
	// thousand blocked readers cost one OS thread.
	rsleeper kernelSleeper
}

var _ interface {
	Lock()
	Unlock()
	RLock()
	RUnlock()
} = (*RWMutex)(nil)

func init() {
	registerKind(kindRWMutex, &kindInfo{
		name: "rwmutex", size: rwObjSize, align: 64,
		ownerWords: rwOwnerWords(),
		inspect:    inspectRWMutex,
	})
	// Kind 4, the layout before per-process reader counts: still
	// validated, so that old regions open, never made or used.
	registerKind(kindRWMutexV1, &kindInfo{
		name: "rwmutex (kind 4: recreate the region)", size: 704, align: 64,
		ownerWords: queueOwnerWords(),
		inspect:    inspectRWMutexV1,
	})
}

// rwOwnerWords are the writers' records and the slots' stamps: a
// generation that a stamp names is not reissued, so a dead process's
// counts can never pass for its slot's next process's.
func rwOwnerWords() []uint32 {
	w := queueOwnerWords()
	for s := range uint32(regionProcSlots) {
		w = append(w, uint32(rwStampOff(s)))
	}
	return w
}

// RWMutex returns the RWMutex named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName), creating
// it, unlocked, if the region has no object of that name. Every call with
// the same name on one Region returns the same *RWMutex. It fails
// with ErrObjectKind if name is an object of another kind (also a
// RWMutex of the layout before per-process reader counts, kind 4),
// ErrRegionFull if there is no room, ErrRegionClosed after Close.
func (r *Region) RWMutex(name string) (*RWMutex, error) {
	return handle(r, name, kindRWMutex, func(obj []byte) *RWMutex { return newSharedRWMutex(r, name, obj) })
}

func newSharedRWMutex(r *Region, name string, obj []byte) *RWMutex {
	rw := &RWMutex{in: word32(obj, rwObjIn), drain: word32(obj, rwObjDrain)}
	rw.q.init(r, name, "shm.RWMutex", obj, ticketObjNext, ticketObjServing, ticketObjFlags, ticketObjStamp, ticketObjDeadPID, ticketObjRecords)
	rw.q.retire = rw.retire
	for p := range uint32(2) {
		rw.mine[p] = word32(obj, rwCountOff(p, r.slot))
	}
	if r.token != 0 && !r.readOnly {
		// Our slot's counts may be left by a process that died in it:
		// nobody writes them (it is gone), and nobody reads them while
		// the stamp names another incarnation. Zero them, then claim
		// them: from the stamp on, writers count them as ours.
		if !testBrokenKeepDeadCounts {
			rw.mine[0].Store(0)
			rw.mine[1].Store(0)
		}
		// Mark our counts' line before our first count. A reader holds
		// in phase p only if it read in before a writer's arrival that
		// closes p (else its second load sees the writer); the Or
		// precedes that read, the arrival precedes the writer's read of
		// the line bits, so the writer sees our bit (Go's atomics are
		// sequentially consistent).
		if !testBrokenNoLineBit {
			word64(obj, rwObjLines).Or(1 << (r.slot % 64))
		}
		word32(obj, rwStampOff(r.slot)).Store(r.token)
	}
	return rw
}

// testBrokenKeepDeadCounts, set by tests only, leaves a dead process's
// counts in its slot for the slot's next process: the broken variant that
// TestSharedRWMutexDeadReaderSlotReused must catch.
var testBrokenKeepDeadCounts bool

// testBrokenNoLineBit, set by tests only, leaves a handle's counts' line
// unmarked (rwObjLines), so writers skip its readers: the broken variant
// that TestSharedRWMutexLineBits must catch.
var testBrokenNoLineBit bool

// Lock locks rw for writing, waiting for the writers ahead of it and then
// for the readers inside to leave. On an owner death it runs the repair
// function (SetRepair); without one, or if it fails, Lock unlocks rw
// unrepaired (it becomes not recoverable) and panics, as Mutex.Lock
// does.
func (rw *RWMutex) Lock() {
	rw.q.checkOpen("Lock")
	repairAfterLocker(rw.LockContext(context.Background()), &rw.q.repair, rw.MarkConsistent, func() {
		if rw.q.heldByUs() {
			rw.Unlock()
		}
	})
}

// LockContext locks rw for writing, waiting until it can or ctx is done.
// If rw is free it is taken even when ctx is already done. It returns:
//
//   - nil: the caller holds the write lock;
//   - an *OwnerDeadError (errors.Is(err, ErrOwnerDead)): the caller holds
//     the write lock, whose previous holder died holding it; repair the
//     data, call MarkConsistent, Unlock;
//   - an error wrapping ErrNotRecoverable: the caller holds nothing;
//   - ctx.Err(): the caller holds nothing; the writers queued behind it
//     are served, and new readers stay out until the readers that were
//     inside when it arrived have left (see the type's doc).
func (rw *RWMutex) LockContext(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	q := &rw.q
	if err := q.errClosed("LockContext"); err != nil {
		return err
	}
	began := q.statsClock()
	if err := q.gate.LockContext(ctx); err != nil {
		q.countGiveUp(began, err)
		return err
	}
	slow, start, err := q.acquire(ctx, false)
	if err == nil {
		err = rw.arrive(ctx, &slow, &start)
	}
	if err == nil {
		err = q.hold(q.ticket)
	}
	if err == nil {
		err = q.acceptHold(slow, start)
	}
	if err != nil && !isOwnerDead(err) {
		q.gate.Unlock()
		q.countGiveUp(began, err)
	}
	return err
}

// srwArrive is the add with which the served writer arrives: it sets the
// writer bit, flips the phase (+1 from 0, -1 from 1) and counts the arrival.
func srwArrive(s uint32) uint32 { return srwArrival + srwWriter + srwPhase - 2*(s&srwPhase) }

// arrive shuts readers out and waits for those inside to leave. The
// caller's ticket is served and not yet held. If ctx ends first it
// abandons its arrival (see srwAbandoned) and gives the ticket up.
func (rw *RWMutex) arrive(ctx context.Context, slow *bool, start *time.Time) error {
	s, done, err := rw.setWriterBit()
	if done {
		return err
	}
	old := s&srwPhase ^ srwPhase // the phase whose readers we wait for
	if rw.drained(old, false) {
		return nil
	}
	if !*slow {
		*slow, *start = true, time.Now()
		rw.q.r.waiting.Add(1)
		defer rw.q.r.waiting.Add(-1)
	}
	defer rw.drain.And(^uint32(srwDrainSleeping))
	backoff := uint32(1)
	for range sharedSpinIterations {
		procyield(backoff)
		backoff = min(2*backoff, sharedSpinPause)
		if rw.drained(old, false) {
			return nil
		}
	}
	var sw stuckWait
	defer rw.q.stuck.leave(&sw)
	checked := time.Now()
	for {
		d := rw.drain.Load() // before the sum: a count emptied after it changes d
		checkDead := false
		if now := time.Now(); now.Sub(checked) >= ownerCheckInterval {
			checked, checkDead = now, true
		}
		if rw.drained(old, checkDead) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			// Leave our bits set for the readers inside (see
			// srwAbandoned), then pass the writers' ticket on.
			rw.abandonArrival(s)
			// Finish the ticket as it is, waiting, not held: a process
			// killed between a hold and the finish would look like a
			// writer that died holding, and the next writer would take
			// our bits for a dead holder's while the readers of the old
			// phase are still inside (models/sharedrw.pml).
			if testHookArriveGaveUp != nil {
				testHookArriveGaveUp()
			}
			rw.q.finish(rw.q.ticket, rw.q.rec(rw.q.ticket).Load())
			return err
		}
		rw.reportDrainStuck(&sw, *start, old)
		if d&srwDrainSleeping == 0 && !rw.drain.CompareAndSwap(d, d|srwDrainSleeping) {
			continue // a count emptied meanwhile: sum again
		}
		if rw.q.flags.Load()&queueStats != 0 {
			word64(rw.q.obj, mutexObjParks).Add(1)
		}
		// A context's end wakes the sleep at once (sharedwait.go).
		sleepShared(ctx, rw.drain, d|srwDrainSleeping, ownerCheckInterval)
	}
}

// setWriterBit, arrive's first step, sets the writer bit (or adopts an
// abandoned arrival) and returns the state word after. done: arrive returns
// err at once (a corrupt word, or the lock ours from a dead writer).
func (rw *RWMutex) setWriterBit() (s uint32, done bool, err error) {
	for i := 0; ; i++ {
		s = rw.in.Load()
		if s&(srwWriter|srwAbandoned) == srwAbandoned {
			return s, true, rw.arriveCorrupt(s, "abandoned bit without the writer bit")
		}
		if s&srwWriter == 0 {
			// Only the served writer sets the writer bit (parked and
			// abandoned are clear with it): one add sets it, flips the
			// phase and counts the arrival.
			return rw.in.Add(srwArrive(s)), false, nil
		}
		if rw.q.flags.Load()&(queueInconsistent|queueNotRecoverable) != 0 {
			// Left by a writer that died holding: readers are already
			// out; it is ours (acceptHold reports the owner death).
			return s, true, nil
		}
		if s&srwAbandoned != 0 {
			// Left by a writer that gave up, or died, while the readers
			// of the old phase were still inside: adopt its arrival
			// (same bits, same readers to wait for) rather than flip the
			// phase back under them. The CAS fails when a reader parks
			// or the arrival is released meanwhile: look again.
			if rw.in.CompareAndSwap(s, s&^srwAbandoned) {
				return s &^ srwAbandoned, false, nil
			}
			if i < retryLimit {
				continue
			}
		}
		// A writer bit that no writer owns: every writer that leaves it
		// set (giving up, or dead) marks it abandoned first, and retire
		// does so for one that died before.
		return s, true, rw.arriveCorrupt(s, "writer bit set with no writer")
	}
}

// arriveCorrupt reports a state word s that no valid history gives the
// served writer, and passes the writers' ticket on.
func (rw *RWMutex) arriveCorrupt(s uint32, why string) error {
	err := rw.q.errCorrupt("%s (state %#x)", why, s)
	if herr := rw.q.hold(rw.q.ticket); herr == nil {
		rw.q.finish(rw.q.ticket, packRecord(rw.q.ticket, rw.q.token, recHolding))
	}
	return err
}

// testHookArriveGaveUp, if set, runs in arrive after a writer that gave
// up has abandoned its arrival and before it finishes its ticket (tests
// kill the process there).
var testHookArriveGaveUp func()

// abandonArrival gives up the arrival whose state was s (writer set): it
// marks it abandoned, so that whoever finds its readers gone releases it
// (or the next writer adopts it), and releases it at once if they are.
// Already abandoned, adopted and released, or ended: nothing to do.
func (rw *RWMutex) abandonArrival(s uint32) {
	for range retryLimit { // a CAS fails only when a reader parks meanwhile
		cur := rw.in.Load()
		if cur&srwArrivalMask != s&srwArrivalMask || cur&srwAbandoned != 0 {
			break
		}
		if rw.in.CompareAndSwap(cur, cur|srwAbandoned) {
			break
		}
	}
	if cur := rw.in.Load(); cur&srwArrivalMask == s&srwArrivalMask {
		rw.releaseIfDrained(cur, false)
	}
}

// releaseIfDrained clears the bits of the abandoned arrival s if the
// readers it waited for have all left (see drained for checkDead). The
// arrival number in s makes the CAS fail once the arrival was adopted or
// released (by another party that found it drained) or a later one came;
// within one arrival the old phase only empties, so a sum taken after
// reading s stays true.
func (rw *RWMutex) releaseIfDrained(s uint32, checkDead bool) {
	if s&(srwWriter|srwAbandoned) != srwWriter|srwAbandoned || !rw.drained(s&srwPhase^srwPhase, checkDead) {
		return
	}
	for range retryLimit { // a CAS fails when a reader parks or stats are enabled meanwhile
		if rw.in.CompareAndSwap(s, s&^(srwWriter|srwParked|srwAbandoned)) {
			if s&srwParked != 0 {
				wakeShared(rw.in, wakeAll)
			}
			return
		}
		cur := rw.in.Load()
		if cur&(srwArrivalMask|srwAbandoned) != s&(srwArrivalMask|srwAbandoned) {
			return
		}
		s = cur
	}
}

// releaseBits clears the writer, parked and abandoned bits, keeping the
// phase (the next writer flips it) and the arrival number, and wakes the
// readers parked behind them.
func (rw *RWMutex) releaseBits() {
	if s := rw.in.And(^uint32(srwWriter | srwParked | srwAbandoned)); s&srwParked != 0 {
		wakeShared(rw.in, wakeAll)
	}
}

// retire is the writers' queue's hook for a ticket retired on its owner's
// behalf. A writer that died holding leaves its bits for the next writer,
// which takes the lock over with ErrOwnerDead. One that died (or gave up)
// before it held may have arrived: its arrival is abandoned, as a writer
// that gives up abandons it (released at once if its readers have left).
// A writer bit is the served writer's alone, so one set here is that
// writer's arrival, or an abandoned one it had not adopted yet.
func (rw *RWMutex) retire(_ context.Context, _ uint32, dead bool) error {
	if dead || rw.q.flags.Load()&(queueInconsistent|queueNotRecoverable) != 0 {
		return nil
	}
	if s := rw.in.Load(); s&srwWriter != 0 {
		rw.abandonArrival(s)
	}
	return nil
}

// TryLock locks rw for writing if it is free (no writer, no reader) and
// consistent, without waiting, and reports whether it did. A reader that
// arrives between its look at the counts and its arrival makes it fail
// as a LockContext whose context ends does: new readers wait until that
// reader has left.
func (rw *RWMutex) TryLock() bool {
	q := &rw.q
	q.checkOpen("TryLock")
	if !q.gate.TryLock() {
		return false
	}
	if q.flags.Load()&(queueInconsistent|queueNotRecoverable) == 0 {
		if tk, ok := q.tryTake(recWaiting); ok {
			q.ticket = tk
			s := rw.in.Load()
			if s&srwWriter == 0 && rw.drained(s&srwPhase, false) {
				s = rw.in.Add(srwArrive(s))
				if !rw.drained(s&srwPhase^srwPhase, false) {
					rw.abandonArrival(s)
					q.finish(tk, q.rec(tk).Load())
					q.gate.Unlock()
					return false
				}
				if q.hold(tk) != nil {
					q.gate.Unlock() // overwritten under us (corrupt): nothing to hand on
					return false
				}
				err := q.acceptHold(false, time.Time{})
				if err == nil {
					return true
				}
				if isOwnerDead(err) {
					q.held.Store(false)
					rw.releaseBits()
					q.finish(tk, packRecord(tk, q.token, recHolding))
				}
			} else if q.hold(tk) == nil {
				q.finish(tk, packRecord(tk, q.token, recHolding))
			}
		}
	}
	q.gate.Unlock()
	return false
}

// Unlock unlocks rw for writing: readers that arrived while it was held
// are admitted, then the next writer is served. If rw was taken from a
// dead owner and MarkConsistent was not called, it becomes not
// recoverable, and readers stay out. Unlock panics if this process does
// not hold the write lock.
func (rw *RWMutex) Unlock() {
	q := &rw.q
	q.checkOpen("Unlock")
	if !q.heldByUs() {
		if q.held.Load() {
			q.release() // overwritten under us (corrupt): release reports it
			q.gate.Unlock()
			return
		}
		q.unlockMisuse()
	}
	inconsistent := q.flags.Load()&queueInconsistent != 0
	if !inconsistent {
		rw.releaseBits()
	}
	q.release()
	if inconsistent {
		wakeShared(rw.in, wakeAll) // readers must learn it is not recoverable
	}
	q.gate.Unlock()
}

// MarkConsistent declares that the data protected by rw, taken with
// ErrOwnerDead, has been repaired. It returns an error if this process
// does not hold the write lock.
func (rw *RWMutex) MarkConsistent() error { return rw.q.markConsistent() }

// SetRepair sets the function that Lock runs, holding the write lock,
// when it takes it from a dead writer; see Mutex.SetRepair.
func (rw *RWMutex) SetRepair(fn func() error) { setRepair(&rw.q.repair, fn) }

// Name returns the object's name in its region.
func (rw *RWMutex) Name() string { return rw.q.name }

// SetStuckThreshold sets how long a waiter of this process, reader or
// writer, waits before the lock's stuck report is logged (one report for
// all its waiters, repeated only as the longest wait or their number
// doubles); zero restores
// DefaultStuckThreshold, a negative duration disables reports.
func (rw *RWMutex) SetStuckThreshold(threshold time.Duration) {
	rw.q.stuckNs.Store(int64(threshold))
}

// holdsLock reports whether this handle holds the write lock or read
// locks (or has a reader counted while it waits).
func (rw *RWMutex) holdsLock() bool {
	return rw.q.heldByUs() || rw.mine[0].Load() != 0 || rw.mine[1].Load() != 0
}

func inspectRWMutex(insp *inspector, obj []byte, info *ObjectInfo) {
	before := word32(obj, rwObjIn).Load()
	insp.queue(obj, info, word32(obj, ticketObjNext), word32(obj, ticketObjServing), word32(obj, ticketObjFlags),
		word32(obj, ticketObjStamp), word32(obj, ticketObjDeadPID), obj[ticketObjRecords:ticketObjRecords+queueRecords*queueRecordLen])
	in := word32(obj, rwObjIn).Load()
	info.Word = in
	if in&(srwWriter|srwAbandoned) == srwAbandoned && info.State != "corrupt" {
		info.State, info.Reason = "corrupt", fmt.Sprintf("state word %#x: abandoned bit without the writer bit", in)
	}
	if in == before && in&(srwWriter|srwAbandoned) == srwWriter && info.State == "free" {
		// A writer sets the bit only while first in the writers' queue,
		// and marks it abandoned before it leaves the queue with the bit
		// set; the word unchanged across a look at a free queue is no
		// moment of that (the rule rwait's check uses).
		info.State, info.Reason = "corrupt", fmt.Sprintf("state word %#x: writer bit set with no writer", in)
	}
	for s := range uint32(regionProcSlots) {
		n := int(word32(obj, rwCountOff(0, s)).Load()) + int(word32(obj, rwCountOff(1, s)).Load())
		t := word32(obj, rwStampOff(s)).Load()
		if n == 0 || t == 0 || tokenSlot(t) != s {
			continue
		}
		if a := insp.check(t); a.alive {
			info.Readers += n
		} else {
			info.DeadReaders += n
		}
	}
	if (info.State == "free" || info.State == "handoff") && info.Readers > 0 {
		// Readers only (a writer may wait for them: Queued).
		info.State = "read-held"
	}
	// Someone waits: a writer queued (the served one included, waiting
	// for the readers inside to leave), or readers parked behind a writer.
	info.Waiters = info.Waiters || info.Queued > 0 || in&srwParked != 0
}

// inspectRWMutexV1 describes a kind-4 object, the layout before
// per-process reader counts (in at 640 and out at 644 counted every
// reader in units of 16): its writers' queue and its readers.
func inspectRWMutexV1(insp *inspector, obj []byte, info *ObjectInfo) {
	insp.queue(obj, info, word32(obj, ticketObjNext), word32(obj, ticketObjServing), word32(obj, ticketObjFlags),
		word32(obj, ticketObjStamp), word32(obj, ticketObjDeadPID), obj[ticketObjRecords:ticketObjRecords+queueRecords*queueRecordLen])
	in := word32(obj, 640).Load()
	info.Word = in
	info.Readers = int((in&^15 - word32(obj, 644).Load()) / 16)
	if (info.State == "free" || info.State == "handoff") && info.Readers > 0 {
		info.State = "read-held"
	}
}
