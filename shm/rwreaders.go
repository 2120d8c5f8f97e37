package shm

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

// The readers of a RWMutex: counted per process slot and phase
// (RLock, RUnlock, the one kernel sleeper per process in rwait), and what
// a writer asks of them (drained, the liveness of a slot's readers). The
// type, its state word and the writers are sharedrw.go's.

// RLock locks rw for reading, waiting while a writer holds it or waits for
// the readers inside to leave. It panics with ErrNotRecoverable if the
// lock is not recoverable.
func (rw *RWMutex) RLock() {
	// Fast path: count ourselves in the phase we see, then look again:
	// no writer, no statistics, no change: done (a writer that arrives
	// later sees our count). One compare: a state with a writer or
	// statistics bit never equals itself without them afterwards, except
	// when the writer left in between, and then we hold too.
	// One call site (a wrapped count, c == 0, is the slow path's to
	// report) and the word's pointer loaded once: a second call and a
	// second pointer load cost this path about 10%.
	in := rw.in
	s := in.Load()
	c := rw.mine[s&srwPhase].Add(1)
	if s2 := in.Load(); s2 != s&^(srwWriter|srwStats) || c == 0 {
		rw.rlockSlowLocker(s, s2, c)
	}
}

// RLockContext locks rw for reading, waiting until it can or ctx is done.
// If no writer is present the read lock is taken even when ctx is done. It
// returns nil (the caller holds a read lock), ctx.Err(), or an error
// wrapping ErrNotRecoverable or ErrCorrupt (the caller holds nothing; a
// process's reader count that wraps at 2^32 is reported as corrupt, and
// RLock panics with it).
func (rw *RWMutex) RLockContext(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	s := rw.in.Load()
	if rw.mine[s&srwPhase].Add(1) == 0 {
		return rw.countWrapped(s & srwPhase)
	}
	if s2 := rw.in.Load(); s2 != s || s&(srwWriter|srwStats) != 0 {
		return rw.rlockSlow(ctx, s, s2)
	}
	return nil
}

// TryRLock locks rw for reading if no writer holds or awaits it, without
// waiting, and reports whether it did.
func (rw *RWMutex) TryRLock() bool {
	s := rw.in.Load()
	if s&srwWriter != 0 {
		rw.q.checkOpen("TryRLock") // a closed region's state has the writer bit
		return false
	}
	p := s & srwPhase
	if rw.mine[p].Add(1) == 0 {
		rw.countWrapped(p) // corrupt: not taken
		return false
	}
	if rw.in.Load()&srwArrivalMask != s&srwArrivalMask {
		rw.leave(p) // a writer arrived meanwhile
		return false
	}
	if s&srwStats != 0 {
		word64(rw.q.obj, mutexObjAcquired).Add(1)
	}
	return true
}

// RUnlock undoes one RLock of this handle. It panics with "lockword:
// RUnlock of unlocked RWMutex" if this handle holds no read lock.
func (rw *RWMutex) RUnlock() {
	// Our hold is counted in the phase of in, or, while a writer is
	// there, in the other one (the phase it waits to empty). Fast path:
	// not our process's last hold, or no writer waits for it: done.
	in := rw.in
	s := in.Load()
	if c := rw.mine[(s^s>>1)&srwPhase].Add(^uint32(0)); c == 0 && in.Load()&srwWriter != 0 || int32(c) < 0 {
		rw.runlockSlow(s, c)
	}
}

// countWrapped undoes an add that wrapped this process's count of phase p
// to 0 (2^32 holds: a word rewritten from outside) and reports it: a count
// of 0 would tell writers that the holds it stands for have ended.
//
//go:noinline
func (rw *RWMutex) countWrapped(p uint32) error {
	rw.mine[p].Add(^uint32(0))
	return rw.q.errCorrupt("reader count of phase %d of slot %d wrapped at 2^32", p, rw.q.r.slot)
}

//go:noinline
func (rw *RWMutex) runlockSlow(s, c uint32) {
	rw.q.checkOpen("RUnlock")
	if int32(c) < 0 {
		rw.mine[(s^s>>1)&srwPhase].Add(1)
		panic(fmt.Sprintf("lockword: RUnlock of unlocked shm.RWMutex %q", rw.q.name))
	}
	rw.emptied()
}

// leave takes one count of this process out of phase p, for a reader
// that is not holding (it counted itself in a phase a writer had just
// closed, or gave up waiting); if that empties our count while a writer
// is there, it tells the writer.
func (rw *RWMutex) leave(p uint32) {
	if rw.mine[p].Add(^uint32(0)) == 0 && rw.in.Load()&srwWriter != 0 {
		rw.emptied()
	}
}

// emptied tells a writer that this process's count of the phase it waits
// for is empty: it bumps drain (before the writer's next sum, or after it
// read drain: then its sleep returns at once) and wakes it if it sleeps.
// If that writer gave up, the arrival is released once every reader has
// left.
func (rw *RWMutex) emptied() {
	if rw.drain.Add(srwDrainOne)&srwDrainSleeping != 0 {
		wakeShared(rw.drain, 1)
	}
	if s := rw.in.Load(); s&(srwWriter|srwAbandoned) == srwWriter|srwAbandoned {
		rw.releaseIfDrained(s, false)
	}
}

// drained reports whether the read holds counted in phase p have all
// ended: every slot's count of p is zero, or belongs to no live process.
// A slot whose stamp names an incarnation that its process-table slot no
// longer carries is dead at once; with checkDead, so is one whose process
// is gone (a /proc look-up per such slot: writers ask every
// ownerCheckInterval). A dead slot's stamp is cleared, so later sums skip
// it without looking.
func (rw *RWMutex) drained(p uint32, checkDead bool) bool {
	obj := rw.q.obj
	base := uint64(rwObjCounts) + uint64(p)*rwPhaseBytes
	// Only the lines of stamped slots (rwObjLines, read after our
	// arrival, which a reader's first count follows its line bit), two
	// counts per load (each read of a 64-bit word is atomic, and either
	// half is a count of its own). The scan starts at the line where
	// the last one found a reader, so that a writer spinning behind one
	// looks at it first.
	counts := obj[base : base+rwPhaseBytes : base+rwPhaseBytes]
	from := rw.scanFrom.Load() % 64
	for lines := bits.RotateLeft64(word64(obj, rwObjLines).Load(), -int(from)); lines != 0; lines &= lines - 1 {
		line := (from + uint32(bits.TrailingZeros64(lines))) % 64
		for i := uint64(line) * 64; i < uint64(line)*64+64; i += 8 {
			if word64(counts, i).Load() == 0 {
				continue
			}
			for _, j := range [2]uint64{i, i + 4} {
				if word32(counts, j).Load() != 0 && rw.readerLive(rwSlotAt(uint32(j/4)), checkDead) {
					rw.scanFrom.Store(line)
					return false
				}
			}
		}
	}
	return true
}

// readerLive reports whether the counts of slot belong to a live process
// (see drained), clearing the stamp of a dead one.
func (rw *RWMutex) readerLive(slot uint32, checkDead bool) bool {
	stamp := word32(rw.q.obj, rwStampOff(slot))
	t := stamp.Load()
	if t == 0 || tokenSlot(t) != slot {
		return false // counts of no incarnation: left by a dead one whose stamp was cleared
	}
	if t == rw.q.token {
		return true
	}
	st := word32(rw.q.r.slotWord(slot), procState).Load()
	if st == procLive|tokenGen(t) {
		if !checkDead {
			return true
		}
		if alive, _ := rw.q.r.tokenAlive(t); alive {
			return true
		}
	}
	// Dead: drop its counts. Only its own next incarnation writes the
	// stamp again, after zeroing the counts, so a CAS that fails means
	// that happened (or another writer dropped it first).
	var pid uint32
	if st == procLive|tokenGen(t) {
		pid = word32(rw.q.r.slotWord(slot), procPID).Load()
	}
	if stamp.CompareAndSwap(t, 0) {
		word32(rw.q.obj, rwObjDeadReaders).Add(1)
		word32(rw.q.obj, rwObjDeadReaderPID).Store(pid)
	}
	return false
}

// liveReaders sums the counts of phase p of live slots (for stuck
// reports and inspection: not a snapshot).
func (rw *RWMutex) liveReaders(p uint32) uint64 {
	var n uint64
	for s := range uint32(regionProcSlots) {
		if c := word32(rw.q.obj, rwCountOff(p, s)).Load(); c != 0 && rw.readerLive(s, false) {
			n += uint64(c)
		}
	}
	return n
}

// RLocker returns a sync.Locker whose Lock and Unlock call rw.RLock and
// rw.RUnlock.
func (rw *RWMutex) RLocker() sync.Locker { return (*sharedRLocker)(rw) }

type sharedRLocker RWMutex

func (r *sharedRLocker) Lock()   { (*RWMutex)(r).RLock() }
func (r *sharedRLocker) Unlock() { (*RWMutex)(r).RUnlock() }

//go:noinline
func (rw *RWMutex) rlockSlowLocker(s, s2, c uint32) {
	rw.q.checkOpen("RLock")
	if c == 0 {
		panic(rw.countWrapped(s & srwPhase))
	}
	if err := rw.rlockSlow(context.Background(), s, s2); err != nil {
		panic(err)
	}
}

// rlockSlow is RLock's slow path: s is the state it read before counting
// itself in s's phase, cur the state it read after. The reader is
// classified by cur, the first load after its add, never a later one: a
// writer that arrives after that load sees the count (Go's atomics are
// sequentially consistent) and waits for it, so a reader that cur shows
// behind one arrival holds once that arrival ends, even if the next
// writer has arrived by then (waiting for it too would break "a reader
// waits for at most one writer").
func (rw *RWMutex) rlockSlow(ctx context.Context, s, cur uint32) error {
	if err := rw.q.errClosed("RLockContext"); err != nil {
		rw.mine[s&srwPhase].Add(^uint32(0)) // our count, on a detached word
		return err
	}
	p := s & srwPhase // the phase we are counted in
	// Each turn follows a writer's arrival or release: bounded in a
	// valid history; a word rewritten without end ends it (ErrCorrupt).
	for i := range retryLimit {
		if i > 0 {
			cur = rw.in.Load() // after our add in phase p
		}
		if cur&srwWriter == 0 && cur&srwPhase == p {
			// Counted in the phase of no writer (after our add): held.
			if cur&srwStats != 0 {
				word64(rw.q.obj, mutexObjAcquired).Add(1) // statistics only
			}
			return nil
		}
		if cur&srwWriter != 0 && cur&srwPhase == p {
			// Counted in the batch after this arrival's: wait for it to
			// end; the next writer will wait for us.
			rw.q.r.waiting.Add(1)
			defer rw.q.r.waiting.Add(-1)
			start := time.Now()
			err := rw.rwait(ctx, cur&srwArrivalMask, p, start)
			switch {
			case cur&srwStats == 0:
			case err == nil:
				countSlowAcquisition(rw.q.obj, start)
			case isContextErr(err):
				countQueueGiveUp(rw.q.obj, start)
			}
			return err
		}
		// Counted in a phase that is not the one to join now: a writer
		// flipped it between our look and our add (the writer may have
		// seen our count: it waits, never lets us in), or came and
		// went. Count ourselves in the current phase, then leave the
		// other.
		if rw.mine[cur&srwPhase].Add(1) == 0 {
			err := rw.countWrapped(cur & srwPhase)
			rw.leave(p)
			return err
		}
		rw.leave(p)
		p = cur & srwPhase
	}
	rw.leave(p)
	return rw.q.errCorrupt("state word %#x keeps changing while a reader arrives", rw.in.Load())
}

// rwait waits, counted in phase p, for the arrival w (the state's
// srwArrivalMask bits) to end, which means that writer has gone and the
// next one (if any) counts us as inside. If it gives up, it takes its
// count back (retreat).
//
// One goroutine per process (the sleeper) sleeps in the kernel on in; the
// others park as goroutines behind it (kernelSleeper) until it wakes (at
// least every ownerCheckInterval). Not a mutex: a reader behind
// an earlier writer must never queue behind a reader that waits for a
// later one, which waits, through that writer, for the first.
func (rw *RWMutex) rwait(ctx context.Context, w, p uint32, start time.Time) error {
	defer profileEnd(profileBegin())
	checked := start
	var sw stuckWait
	defer rw.q.stuck.leave(&sw)
	var waitsFor uint16                               // our waits-for record while we sleep (waitsfor.go)
	defer func() { rw.q.r.clearWaitsFor(waitsFor) }() // a reader inside is a self-edge until then
	for {
		s := rw.in.Load()
		if s&srwArrivalMask != w {
			return nil
		}
		if rw.q.flags.Load()&queueNotRecoverable != 0 {
			return rw.retreat(w, p, rw.q.errNotRecoverable())
		}
		if err := ctx.Err(); err != nil {
			return rw.retreat(w, p, err)
		}
		if !rw.rsleeper.enter(ctx, func() bool { return rw.in.Load()&srwArrivalMask != w }) {
			continue // another goroutine of ours slept in the kernel: look again
		}
		if now := time.Now(); now.Sub(checked) >= ownerCheckInterval {
			// Retire the writer if it died; release an abandoned
			// arrival whose readers left or died; report a long wait
			// once.
			checked = now
			blocker, alive := rw.q.retireIfStalled(ctx, rw.q.serving.Load())
			if s&srwAbandoned != 0 {
				rw.releaseIfDrained(s, true)
			} else if rw.ownerless(s) {
				rw.rsleeper.leave()
				return rw.retreat(w, p, rw.q.errCorrupt("writer bit set with no writer (state %#x)", s))
			}
			rw.reportReaderStuck(&sw, start, p, blocker, alive)
		} else if s&srwParked != 0 || rw.in.CompareAndSwap(s, s|srwParked) {
			// Asked the writer's release to wake us: sleep while in is
			// unchanged.
			if rw.q.flags.Load()&queueStats != 0 {
				word64(rw.q.obj, mutexObjParks).Add(1)
			}
			if waitsFor == 0 {
				waitsFor = rw.q.r.setWaitsFor(rw.q.waitsFor1) // the served writer is the holder
			}
			sleepShared(ctx, rw.in, s|srwParked, ownerCheckInterval)
		}
		rw.rsleeper.leave()
	}
}

// ownerless reports whether the state s (writer set, not abandoned) is
// still in's while no writer is queued and the lock is consistent: no
// valid history gives that (docs/abi.md's invariants), since a writer sets
// the bit holding a served ticket, and clears it, or marks it abandoned,
// before it passes the ticket on (retire does so for a dead one; one that
// died holding marks the lock inconsistent first). Read in that order:
// the queue before the flags, in last, so that a writer leaving meanwhile
// (it clears or abandons its bits first) changes in.
func (rw *RWMutex) ownerless(s uint32) bool {
	q := &rw.q
	return q.next.Load() == q.serving.Load() &&
		q.flags.Load()&(queueInconsistent|queueNotRecoverable) == 0 &&
		rw.in.Load() == s
}

// retreat takes a waiting reader's count (phase p) back and returns err,
// unless arrival w ended first: then the next writer counts it as inside,
// and it holds a read lock (nil). If w ends between the look and the
// take-back, the reader has left without holding, which is as safe: a
// writer waiting for it sees its count fall.
func (rw *RWMutex) retreat(w, p uint32, err error) error {
	if rw.in.Load()&srwArrivalMask != w {
		return nil
	}
	rw.leave(p)
	return err
}

// reportReaderStuck is the stuck report of a reader of phase p, our part
// sw of the lock's: blocker is the writers' queue head's token (0: none,
// or a writer that died holding and whose successor has not come). Only
// the process's kernel sleeper checks; the waiters it reports are this
// process's count of phase p, which holds every reader of ours waiting
// for it (none is inside while a writer shuts the phase out).
func (rw *RWMutex) reportReaderStuck(sw *stuckWait, start time.Time, p, blocker uint32, alive bool) {
	due, waiters, waited, threshold := rw.q.stuck.check(&rw.q.stuckNs, sw, start, int(rw.mine[p].Load()))
	if !due {
		return
	}
	var pid uint32
	if blocker != 0 {
		_, pid = rw.q.r.tokenAlive(blocker)
	} else {
		pid, alive = rw.q.deadPID.Load(), false
	}
	logSharedStuck(sharedStuck{kind: "shm.RWMutex", name: rw.q.name, path: rw.q.r.path, holderPID: pid, alive: alive,
		heldFor: rw.q.heldFor(), waiters: waiters, waited: waited, threshold: threshold},
		append([]any{"waiting_as", "reader", "note", "a writer that died holding leaves readers out until the next writer repairs (LockContext, MarkConsistent, Unlock)"},
			rw.q.r.deadlockAttrs()...)...)
}

// reportDrainStuck is the stuck report of a writer, our part sw of the
// lock's, that holds the writers' ticket and waits since start for the
// readers of phase p to leave.
func (rw *RWMutex) reportDrainStuck(sw *stuckWait, start time.Time, p uint32) {
	due, waiters, waited, threshold := rw.q.stuck.check(&rw.q.stuckNs, sw, start, 0)
	if !due {
		return
	}
	logSharedStuck(sharedStuck{kind: "shm.RWMutex", name: rw.q.name, path: rw.q.r.path, alive: true, waiters: waiters, waited: waited, threshold: threshold},
		"waiting_as", "writer", "readers_inside", rw.liveReaders(p),
		"note", "the readers inside are alive: a dead process's readers are dropped within 10 ms")
}

// EnableStats starts collecting contention statistics, read and write
// acquisitions together, for every process using rw. From then on RLock
// takes its slow path too.
func (rw *RWMutex) EnableStats() {
	rw.q.checkOpen("EnableStats")
	rw.q.flags.Or(queueStats)
	rw.in.Or(srwStats)
}

// Stats returns the statistics collected since EnableStats, summed over
// all processes.
func (rw *RWMutex) Stats() lockword.Stats {
	rw.q.checkOpen("Stats")
	return queueObjStats(rw.q.obj)
}

// detach points the words that the readers' fast paths touch away from
// the mapping as Close unmaps it: the state on closedWord32 (writer and
// statistics bits set) and the counts on fresh words send every reader
// call to a slow path, which checks first. The writers' calls check on
// entry.
func (rw *RWMutex) detach() {
	rw.in, rw.drain = closedWord32, closedWord32
	rw.mine = [2]*atomic.Uint32{new(atomic.Uint32), new(atomic.Uint32)}
}
