package lockword

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// Bits of a SharedRWMutex's readers-in word. Phase and writer have the
// values of RWMutex's, so rwArrive serves both.
const (
	srwPhase      = rwPhase  // flipped by each writer as it arrives
	srwWriter     = rwWriter // a writer holds the lock or waits for readers to leave
	srwParked     = 1 << 2   // readers may sleep on the word: the writer's release must wake them
	srwStats      = 1 << 3   // statistics on: RLock's fast path fails
	srwReader     = 1 << 4   // one reader entry, in bits 4-31 (wraps)
	srwCountMask  = ^uint32(srwReader - 1)
	srwWriterBits = srwWriter | srwPhase
	// srwNoTarget, in the target word, says that no writer waits for
	// readers to leave. Any word without srwTargetSet says so (a fresh
	// object's is 0); this is the value written.
	srwNoTarget = 1
	// srwTargetSet marks a target: the word is the readers-in count a
	// waiting writer needs readers-out to reach (a multiple of
	// srwReader, so the low bits are free), plus this bit.
	srwTargetSet = 4
	// srwAbandoned, added to a target, says that the writer that set the
	// writer bits and waited for that count gave up (or died) before the
	// readers left. Its bits stay set, so that the phase never returns to
	// a value a slow reader may still be waiting on: the last of those
	// readers clears them, unless the next writer adopts the arrival
	// first. Whichever CASes the target first does it.
	srwAbandoned = 2
)

// SharedRWMutex object layout (kind 4, 704 bytes, 64-aligned). The first
// 640 bytes are a robust ticket queue for the writers, laid out exactly as
// a SharedTicketMutex; the readers' words have a cache line of their own.
const (
	rwObjSize   = 704
	rwObjIn     = 640 // uint32: readers in, and the writer bits
	rwObjOut    = 644 // uint32: readers out
	rwObjTarget = 648 // uint32: the readers-out count a waiting writer needs
)

// A SharedRWMutex is a reader/writer lock in a Region, shared by every
// process that maps it: any number of readers, or one writer, in any of
// the processes. Writers are robust as SharedMutex is: when a writer
// process dies holding the lock, the next writer gets it with
// ErrOwnerDead. Get one with (*Region).RWMutex.
//
// It is the phase-fair ticket lock PF-T of Brandenburg and Anderson
// ("Spin-Based Reader-Writer Synchronization for Multiprocessor Real-Time
// Systems", Real-Time Systems 46, 2010), with sleeping waiters: readers
// count their entries on one word (in) and their exits on another (out);
// a writer, first in the writers' queue (a robust FIFO ticket queue, as in
// SharedTicketMutex), sets the writer bit and flips the phase bit of in
// with one add that also reads how many readers ever entered, and waits
// until out reaches that count. Readers that arrive while the writer bit
// is set wait until the writer bits change; the writer's release admits
// all of them before the next writer arrives, and that writer waits only
// for them. So neither side starves the other: a reader waits for at most
// one writer, a writer for the writers ahead of it and one batch of
// readers each.
//
// A writer that gives up (LockContext) or dies while the readers it
// counted are still inside leaves its writer bits set and marks its
// target abandoned: the last of those readers clears the bits, or the
// next writer adopts the arrival (keeps the bits, waits for the same
// count) if it comes first. Clearing them at once would let the next
// writer flip the phase back to the value a slow reader, counted in but
// not yet running, still waits on: that reader would then wait for a
// writer that waits for it. So, as with RWMutex, new readers stay out
// until the readers inside when the writer arrived have left.
//
// # Shared layout
//
// The object (kind 4, 704 bytes; docs/abi.md): offsets 0-639 are the
// writers' queue, as SharedTicketMutex (next, serving, held-since,
// statistics, flags, dead PID, stamp, records); then
//
//	offset  word
//	640     in: bits 4-31 count reader entries (wrapping), and
//	        bit 0 phase    flipped by each arriving writer
//	        bit 1 writer   a writer holds or waits for readers: readers wait
//	        bit 2 parked   readers may sleep on in: release must wake them
//	        bit 3 stats    statistics on: RLock's fast path fails
//	644     out: reader exits, counted in the same units (wrapping)
//	648     target: the out value a waiting writer needs, plus 4 (bit 2,
//	        set); bit 1: that writer gave up or died (abandoned); a word
//	        without bit 2 (0 or 1): no writer waits
//
//	in & ~15 - out  readers holding, or waiting behind the writer
//	writer bit      a writer is inside, or waits for out to reach target
//
// RLock is one atomic add on in (the fast path: no writer bit, done);
// RUnlock one add on out, and a futex wake of the writer when out reaches
// its target. A reader that gives up (RLockContext) while the same writer
// is there takes its entry back with a CAS; once the writer bits changed,
// the next writer has counted it, and it holds the read lock.
//
// # Owner death
//
// Writers: a writer's ticket record names it (see SharedTicketMutex), and
// a waiter (writer or reader) that has waited 10 ms checks it. A writer
// that died holding the lock leaves the writer bits set, so readers stay
// out of the data it may have left half-written; the lock is marked
// inconsistent, and the next writer (one already queued, or the next to
// call Lock) takes it over with ErrOwnerDead, repairs, calls
// MarkConsistent and Unlocks, which admits the readers. Until then readers
// wait (RLockContext returns at its context's end; stuck reports name the
// dead writer). A writer that died before it held the lock (queued, or
// waiting for readers to leave) never touched the data: its turn is
// skipped, its writer bits cleared, nobody is told. Unlock without
// MarkConsistent makes the lock not recoverable: every acquisition, read
// or write, then fails with ErrNotRecoverable (RLock and Lock panic).
//
// Readers are counted, not owned: a reader process that dies holding a
// read lock (or is killed between RLock and RUnlock) stays counted in in,
// and, as its exit never comes, the next writer waits for it forever
// (LockContext returns at its context's end; stuck reports say how many
// readers it waits for, and lockword inspect shows the count). Readers
// keep working until that writer arrives. Recovering would need a record
// per reader, which costs every RLock a second shared write; POSIX
// read-write locks have no robust form either. Use a SharedMutex or
// SharedTicketMutex for data that processes killed mid-read must not
// block, or recreate the region. Likewise Close cannot see this process's
// read holds: close only after every RUnlock.
//
// At most 2^27 readers may hold or wait at once (the count's range); the
// count is not checked on the fast path. RUnlock without RLock is detected
// when out would pass in, and panics.
//
// In the terminology of the Go memory model, the n'th call to Unlock
// synchronizes before the m'th call to Lock for any n < m; for any call to
// RLock there is an n such that the n'th Unlock synchronizes before that
// RLock, and the matching RUnlock synchronizes before the n+1'th Lock;
// across processes as within one.
//
// A SharedRWMutex belongs to one Region handle; write ownership is per
// process (per handle), not per goroutine. Unlock by a process that does
// not hold the write lock panics.
type SharedRWMutex struct {
	_               noCopy
	q               ticketQueue // the writers
	in, out, target *atomic.Uint32
	// rsleeper is 1 while one of this process's readers sleeps in the
	// kernel waiting for a writer to leave; the others park on rseq (see
	// rwait), so a thousand blocked readers cost one OS thread.
	rsleeper, rseq atomic.Uint32
}

var _ interface {
	Lock()
	Unlock()
	RLock()
	RUnlock()
} = (*SharedRWMutex)(nil)

func init() {
	registerKind(kindRWMutex, &kindInfo{
		name: "rwmutex", size: rwObjSize, align: 64,
		ownerWords: queueOwnerWords(),
		inspect:    inspectRWMutex,
	})
}

// RWMutex returns the SharedRWMutex named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName), creating
// it, unlocked, if the region has no object of that name. Every call with
// the same name on one Region returns the same *SharedRWMutex. It fails
// with ErrObjectKind if name is an object of another kind, ErrRegionFull if
// there is no room, ErrRegionClosed after Close.
func (r *Region) RWMutex(name string) (*SharedRWMutex, error) {
	return handle(r, name, kindRWMutex, func(obj []byte) *SharedRWMutex { return newSharedRWMutex(r, name, obj) })
}

func newSharedRWMutex(r *Region, name string, obj []byte) *SharedRWMutex {
	rw := &SharedRWMutex{in: word32(obj, rwObjIn), out: word32(obj, rwObjOut), target: word32(obj, rwObjTarget)}
	rw.q.init(r, name, "SharedRWMutex", obj, ticketObjNext, ticketObjServing, ticketObjFlags, ticketObjStamp, ticketObjDeadPID, ticketObjRecords)
	rw.q.retire = rw.retire
	return rw
}

// RLock locks rw for reading, waiting while a writer holds it or waits for
// the readers inside to leave. It panics with ErrNotRecoverable if the
// lock is not recoverable.
func (rw *SharedRWMutex) RLock() {
	// Fast path: count ourselves in; no writer, no statistics: done.
	if s := rw.in.Add(srwReader); s&(srwWriter|srwStats) != 0 {
		rw.rlockSlowLocker(s)
	}
}

// RLockContext locks rw for reading, waiting until it can or ctx is done.
// If no writer is present the read lock is taken even when ctx is done. It
// returns nil (the caller holds a read lock), ctx.Err(), or an error
// wrapping ErrNotRecoverable (the caller holds nothing).
func (rw *SharedRWMutex) RLockContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s := rw.in.Add(srwReader); s&(srwWriter|srwStats) != 0 {
		return rw.rlockSlow(ctx, s)
	}
	return nil
}

// TryRLock locks rw for reading if no writer holds or awaits it, without
// waiting, and reports whether it did.
func (rw *SharedRWMutex) TryRLock() bool {
	for range retryLimit { // a CAS fails only when in changed: others' progress
		s := rw.in.Load()
		if s&srwWriter != 0 {
			return false
		}
		if rw.in.CompareAndSwap(s, s+srwReader) {
			if s&srwStats != 0 {
				word64(rw.q.obj, mutexObjAcquired).Add(1)
			}
			return true
		}
	}
	return false
}

// RUnlock undoes one RLock. It panics with "lockword: RUnlock of unlocked
// SharedRWMutex" if more read locks would have ended than began.
func (rw *SharedRWMutex) RUnlock() {
	// Fast path: count ourselves out; not the reader a writer waits for,
	// not more exits than entries: done.
	if o := rw.out.Add(srwReader); o == rw.target.Load()&^(srwAbandoned|srwTargetSet) || int32(rw.in.Load()&srwCountMask-o) < 0 {
		rw.runlockSlow(o)
	}
}

//go:noinline
func (rw *SharedRWMutex) runlockSlow(o uint32) {
	switch t := rw.target.Load(); t {
	case o | srwTargetSet:
		// The last reader the writer waits for: wake it. (target is
		// stored before the writer's last look at out, so either it sees
		// our exit or we see its target.)
		wait.FutexWake(rw.out, 1, wait.Shared)
	case o | srwTargetSet | srwAbandoned:
		// The last reader a writer that gave up waited for: release on
		// its behalf, unless the next writer adopted its arrival.
		rw.releaseAbandoned(t)
	}
	if int32(rw.in.Load()&srwCountMask-o) < 0 {
		rw.out.Add(^uint32(srwReader - 1))
		panic(fmt.Sprintf("lockword: RUnlock of unlocked SharedRWMutex %q", rw.q.name))
	}
}

// RLocker returns a sync.Locker whose Lock and Unlock call rw.RLock and
// rw.RUnlock.
func (rw *SharedRWMutex) RLocker() sync.Locker { return (*sharedRLocker)(rw) }

type sharedRLocker SharedRWMutex

func (r *sharedRLocker) Lock()   { (*SharedRWMutex)(r).RLock() }
func (r *sharedRLocker) Unlock() { (*SharedRWMutex)(r).RUnlock() }

//go:noinline
func (rw *SharedRWMutex) rlockSlowLocker(s uint32) {
	if err := rw.rlockSlow(context.Background(), s); err != nil {
		panic(err)
	}
}

func (rw *SharedRWMutex) rlockSlow(ctx context.Context, s uint32) error {
	if s&srwWriter == 0 {
		word64(rw.q.obj, mutexObjAcquired).Add(1) // statistics only
		return nil
	}
	rw.q.r.waiting.Add(1)
	defer rw.q.r.waiting.Add(-1)
	start := time.Now()
	err := rw.rwait(ctx, s&srwWriterBits, start)
	if err == nil && s&srwStats != 0 {
		countSlowAcquisition(rw.q.obj, start)
	}
	return err
}

// rwait waits, counted in, for the writer bits to change from w, which
// means that writer has gone and the next one (if any) counted us as
// inside. If it gives up, it takes its entry back (retreat).
//
// One goroutine per process (the sleeper) sleeps in the kernel on in; the
// others park as goroutines on rseq, which the sleeper bumps whenever it
// wakes (at least every ownerCheckInterval). Not a mutex: a reader behind
// an earlier writer must never queue behind a reader that waits for a
// later one, which waits, through that writer, for the first.
func (rw *SharedRWMutex) rwait(ctx context.Context, w uint32, start time.Time) error {
	checked := start
	reported := false
	for {
		s := rw.in.Load()
		if s&srwWriterBits != w {
			return nil
		}
		if rw.q.flags.Load()&queueNotRecoverable != 0 {
			return rw.retreat(w, rw.q.errNotRecoverable())
		}
		if err := ctx.Err(); err != nil {
			return rw.retreat(w, err)
		}
		if !rw.rsleeper.CompareAndSwap(0, 1) {
			// Another goroutine of ours sleeps in the kernel: read rseq,
			// then look once more, then park while rseq is unchanged.
			v := rw.rseq.Load()
			if rw.rsleeper.Load() == 0 || rw.in.Load()&srwWriterBits != w {
				continue
			}
			wait.Wait(ctx, &rw.rseq, v)
			continue
		}
		if now := time.Now(); now.Sub(checked) >= ownerCheckInterval {
			// Retire the writer if it died; report a long wait once.
			checked = now
			blocker, alive := rw.q.retireIfStalled(ctx, rw.q.serving.Load())
			if !reported {
				reported = rw.reportReaderStuck(start, blocker, alive)
			}
		} else if s&srwParked != 0 || rw.in.CompareAndSwap(s, s|srwParked) {
			// Asked the writer's release to wake us: sleep while in is
			// unchanged.
			timeout := ownerCheckInterval
			if dl, ok := ctx.Deadline(); ok {
				timeout = max(min(timeout, time.Until(dl)), 0)
			}
			if rw.q.flags.Load()&queueStats != 0 {
				word64(rw.q.obj, mutexObjParks).Add(1)
			}
			stop := wakeOnDone(ctx, func() { wait.FutexWake(rw.in, wakeAll, wait.Shared) })
			wait.FutexWait(rw.in, s|srwParked, timeout, wait.Shared)
			stop()
		}
		rw.rsleeper.Store(0)
		rw.rseq.Add(1)
		wait.Wake(&rw.rseq, wakeAll)
	}
}

// retreat takes a waiting reader's entry back, unless the writer bits
// changed first: then the next writer counted it as inside, and it holds a
// read lock (nil).
//
// Its CAS fails only when in changed (readers came or went); in a valid
// history that ends, but a word rewritten without end would hold the
// reader here: after retryLimit tries it reports ErrCorrupt, still
// counted in (the words are no longer to be trusted either way).
func (rw *SharedRWMutex) retreat(w uint32, err error) error {
	for range retryLimit {
		s := rw.in.Load()
		if s&srwWriterBits != w {
			return nil
		}
		if rw.in.CompareAndSwap(s, s-srwReader) {
			return err
		}
	}
	return rw.q.errCorrupt("readers-in word keeps changing while a reader leaves")
}

// reportReaderStuck is the stuck report of a reader: blocker is the
// writers' queue head's token (0: none, or a writer that died holding and
// whose successor has not come).
func (rw *SharedRWMutex) reportReaderStuck(start time.Time, blocker uint32, alive bool) bool {
	threshold, on := stuckThreshold(&rw.q.stuckNs)
	if !on {
		return true
	}
	waited := time.Since(start)
	if waited < threshold {
		return false
	}
	var pid uint32
	if blocker != 0 {
		_, pid = rw.q.r.tokenAlive(blocker)
	} else {
		pid, alive = rw.q.deadPID.Load(), false
	}
	logSharedStuck("SharedRWMutex", rw.q.name, rw.q.r.path, pid, alive, waited, threshold,
		"waiting_as", "reader", "note", "a writer that died holding leaves readers out until the next writer repairs (LockContext, MarkConsistent, Unlock)")
	return true
}

// Lock locks rw for writing, waiting for the writers ahead of it and then
// for the readers inside to leave. On an owner death it runs the repair
// function (SetRepair); without one, or if it fails, Lock unlocks rw
// unrepaired (it becomes not recoverable) and panics, as SharedMutex.Lock
// does.
func (rw *SharedRWMutex) Lock() {
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
func (rw *SharedRWMutex) LockContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	q := &rw.q
	if err := q.gate.LockContext(ctx); err != nil {
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
	}
	return err
}

// arrive shuts readers out and waits for those inside to leave. The
// caller's ticket is served and not yet held. If ctx ends first it
// abandons its arrival (see srwAbandoned) and gives the ticket up.
func (rw *SharedRWMutex) arrive(ctx context.Context, slow *bool, start *time.Time) error {
	var target uint32
	adopted := false
	for s := rw.in.Load(); s&srwWriter != 0; s = rw.in.Load() {
		if rw.q.flags.Load()&(queueInconsistent|queueNotRecoverable) != 0 {
			// Left by a writer that died holding: readers are already
			// out; it is ours (acceptHold reports the owner death).
			return nil
		}
		// Left by a writer that gave up, or died, while readers it
		// counted were still inside: adopt its arrival (same bits, same
		// count to wait for) rather than flip the phase back to a value
		// that a reader it counted may still be waiting on.
		if t := rw.target.Load(); t&(srwTargetSet|srwAbandoned) == srwTargetSet|srwAbandoned && rw.target.CompareAndSwap(t, t&^srwAbandoned) {
			target, adopted = t&srwCountMask, true
			break
		}
		// The last of those readers is clearing the bits (between its
		// CAS of the target and its clear): let it finish. If it died
		// there, every reader that writer counted has left, and the
		// bits are ours to clear. (A bounded wait; a target that says a
		// writer waits while we, the served writer, are here is
		// corrupt, and then only ctx ends this loop.)
		if t := rw.target.Load(); t&(srwTargetSet|srwAbandoned) == srwAbandoned {
			err := rw.q.errCorrupt("writer target %#x is abandoned without being set", t)
			if herr := rw.q.hold(rw.q.ticket); herr == nil {
				rw.q.finish(rw.q.ticket, packRecord(rw.q.ticket, rw.q.token, recHolding))
			}
			return err
		}
		rw.awaitBitsCleared()
		if err := ctx.Err(); err != nil {
			if herr := rw.q.hold(rw.q.ticket); herr != nil {
				return herr
			}
			rw.q.finish(rw.q.ticket, packRecord(rw.q.ticket, rw.q.token, recHolding))
			return err
		}
	}
	if !adopted {
		// Only the served writer changes the writer and phase bits: one
		// add sets ours and reads how many readers ever entered.
		s := rw.in.Load()
		s = rw.in.Add(rwArrive(s))
		target = s & srwCountMask
		if rw.out.Load() == target {
			return nil
		}
		rw.target.Store(target | srwTargetSet) // before our next look at out: see RUnlock
	}
	if !*slow {
		*slow, *start = true, time.Now()
		rw.q.r.waiting.Add(1)
		defer rw.q.r.waiting.Add(-1)
	}
	gaveUp := false
	defer func() {
		if !gaveUp {
			rw.target.Store(srwNoTarget)
		}
	}()
	defer wakeOnDone(ctx, func() { wait.FutexWake(rw.out, wakeAll, wait.Shared) })()
	backoff := uint32(1)
	for range sharedSpinIterations {
		if rw.out.Load() == target {
			return nil
		}
		procyield(backoff)
		backoff = min(2*backoff, sharedSpinPause)
	}
	reported := false
	for {
		o := rw.out.Load()
		if o == target {
			return nil
		}
		if err := ctx.Err(); err != nil {
			// Leave our bits set for the readers we counted (see
			// srwAbandoned), then pass the writers' ticket on.
			gaveUp = true
			rw.abandonArrival(target)
			// Finish the ticket as it is, waiting, not held: a process
			// killed between a hold and the finish would look like a
			// writer that died holding, and the next writer would take
			// our bits for a dead holder's while the readers we
			// counted are still inside (models/sharedrw.pml).
			if testHookArriveGaveUp != nil {
				testHookArriveGaveUp()
			}
			rw.q.finish(rw.q.ticket, rw.q.rec(rw.q.ticket).Load())
			return err
		}
		if !reported {
			if threshold, on := stuckThreshold(&rw.q.stuckNs); !on {
				reported = true
			} else if waited := time.Since(*start); waited >= threshold {
				reported = true
				logSharedStuck("SharedRWMutex", rw.q.name, rw.q.r.path, 0, true, waited, threshold,
					"waiting_as", "writer", "readers_inside", (target-o)/srwReader,
					"note", "readers are counted, not owned: a reader process that died holding is never released")
			}
		}
		timeout := ownerCheckInterval
		if dl, ok := ctx.Deadline(); ok {
			timeout = max(min(timeout, time.Until(dl)), 0)
		}
		if rw.q.flags.Load()&queueStats != 0 {
			word64(rw.q.obj, mutexObjParks).Add(1)
		}
		wait.FutexWait(rw.out, o, timeout, wait.Shared)
	}
}

// testHookArriveGaveUp, if set, runs in arrive after a writer that gave
// up has abandoned its arrival and before it finishes its ticket (tests
// kill the process there).
var testHookArriveGaveUp func()

// abandonArrival gives up a writer's arrival whose readers (up to count
// target) have not all left: it marks the target abandoned, so that the
// last of them, or the next writer, takes the bits over; if they have
// all left meanwhile, it releases the bits itself.
func (rw *SharedRWMutex) abandonArrival(target uint32) {
	if !rw.target.CompareAndSwap(target|srwTargetSet, target|srwTargetSet|srwAbandoned) {
		return // already abandoned (a retire on our behalf) or adopted
	}
	if rw.out.Load() == target {
		rw.releaseAbandoned(target | srwTargetSet | srwAbandoned)
	}
}

// releaseAbandoned clears the writer bits of an abandoned arrival whose
// readers have all left, unless someone else (another reader, the writer
// itself, or the next writer adopting it) took the target t first.
func (rw *SharedRWMutex) releaseAbandoned(t uint32) {
	if rw.target.CompareAndSwap(t, srwNoTarget) {
		rw.releaseBits()
	}
}

// awaitBitsCleared waits for the writer bits, left with no abandoned
// target by a reader that is clearing them, to clear. That is two
// instructions away, so it spins, then yields; if they are still set
// after ownerCheckInterval the reader died in between, and it clears
// them itself.
func (rw *SharedRWMutex) awaitBitsCleared() {
	deadline := time.Now().Add(ownerCheckInterval)
	for i := 0; rw.in.Load()&srwWriter != 0; i++ {
		if rw.target.Load()&srwAbandoned != 0 {
			return // a retire marked one meanwhile: adopt it
		}
		if i < sharedSpinIterations {
			procyield(1)
			continue
		}
		if time.Now().After(deadline) {
			if rw.target.Load()&srwTargetSet == 0 {
				rw.releaseBits()
			}
			return
		}
		runtime.Gosched()
	}
}

// releaseBits clears the writer and parked bits, keeping the phase (the
// next writer flips it), and wakes the readers parked behind them.
func (rw *SharedRWMutex) releaseBits() {
	if s := rw.in.And(^uint32(srwWriter | srwParked)); s&srwParked != 0 {
		wait.FutexWake(rw.in, wakeAll, wait.Shared)
	}
}

// retire is the writers' queue's hook for a ticket retired on its owner's
// behalf. A writer that died holding leaves its bits for the next writer,
// which takes the lock over with ErrOwnerDead. One that died (or gave up)
// before it held may have set its bits while waiting for readers: clear
// them, unless they are a dead holder's, inherited (the lock is then
// inconsistent or not recoverable).
func (rw *SharedRWMutex) retire(_ context.Context, _ uint32, dead bool) error {
	if dead || rw.q.flags.Load()&(queueInconsistent|queueNotRecoverable) != 0 {
		return nil
	}
	if rw.in.Load()&srwWriter == 0 {
		return nil
	}
	switch t := rw.target.Load(); {
	case t&srwTargetSet == 0:
		// It died after its readers left, or in the few instructions
		// between its add to in and its store of the target: the count
		// it read died with it, so its bits are cleared at once. In the
		// second case a reader it counted that has not run since it
		// arrived can still meet the phase reuse that abandoned targets
		// prevent (see srwAbandoned), if two more writers come before it
		// runs: a known, narrow limit. The first case includes the last
		// reader of an abandoned arrival between its CAS of the target
		// and its releaseBits: let it finish, as arrive does, or its late
		// clear would remove the next writer's bits (models/sharedrw.pml).
		rw.awaitBitsCleared()
	case t&srwAbandoned == 0:
		// It died waiting for readers: leave its bits to them (or to the
		// next writer), as a writer that gives up does.
		rw.abandonArrival(t & srwCountMask)
	}
	return nil
}

// TryLock locks rw for writing if it is free (no writer, no reader) and
// consistent, without waiting, and reports whether it did.
func (rw *SharedRWMutex) TryLock() bool {
	q := &rw.q
	if !q.gate.TryLock() {
		return false
	}
	if q.flags.Load()&(queueInconsistent|queueNotRecoverable) == 0 {
		if tk, ok := q.tryTake(recWaiting); ok {
			q.ticket = tk
			s := rw.in.Load()
			if s&srwWriter == 0 && rw.out.Load() == s&srwCountMask && rw.in.CompareAndSwap(s, s+rwArrive(s)) {
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
func (rw *SharedRWMutex) Unlock() {
	q := &rw.q
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
		wait.FutexWake(rw.in, wakeAll, wait.Shared) // readers must learn it is not recoverable
	}
	q.gate.Unlock()
}

// MarkConsistent declares that the data protected by rw, taken with
// ErrOwnerDead, has been repaired. It returns an error if this process
// does not hold the write lock.
func (rw *SharedRWMutex) MarkConsistent() error { return rw.q.markConsistent() }

// SetRepair sets the function that Lock runs, holding the write lock,
// when it takes it from a dead writer; see SharedMutex.SetRepair.
func (rw *SharedRWMutex) SetRepair(fn func() error) { setRepair(&rw.q.repair, fn) }

// Name returns the object's name in its region.
func (rw *SharedRWMutex) Name() string { return rw.q.name }

// SetStuckThreshold sets how long a waiter of this process, reader or
// writer, waits before it logs one stuck report; zero restores
// DefaultStuckThreshold, a negative duration disables reports.
func (rw *SharedRWMutex) SetStuckThreshold(threshold time.Duration) {
	rw.q.stuckNs.Store(int64(threshold))
}

// EnableStats starts collecting contention statistics, read and write
// acquisitions together, for every process using rw. From then on RLock
// takes its slow path too.
func (rw *SharedRWMutex) EnableStats() {
	rw.q.flags.Or(queueStats)
	rw.in.Or(srwStats)
}

// Stats returns the statistics collected since EnableStats, summed over
// all processes.
func (rw *SharedRWMutex) Stats() Stats { return mutexObjStats(rw.q.obj) }

// holdsLock reports whether this process holds the write lock (read holds
// are counted, not owned: see the type's documentation).
func (rw *SharedRWMutex) holdsLock() bool { return rw.q.heldByUs() }

func inspectRWMutex(insp *inspector, obj []byte, info *ObjectInfo) {
	insp.queue(obj, info, word32(obj, ticketObjNext), word32(obj, ticketObjServing), word32(obj, ticketObjFlags),
		word32(obj, ticketObjStamp), word32(obj, ticketObjDeadPID), obj[ticketObjRecords:ticketObjRecords+queueRecords*queueRecordLen])
	in := word32(obj, rwObjIn).Load()
	info.Word = in
	info.Readers = int((in&srwCountMask - word32(obj, rwObjOut).Load()) / srwReader)
	if (info.State == "free" || info.State == "handoff") && info.Readers > 0 {
		// Readers only (a writer may wait for them: Queued).
		info.State = "read-held"
	}
}
