package shm

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

// What the robust ticket queue (sharedqueue.go) shows to others: its
// holder, its words checked for states that no valid history produces
// (ErrCorrupt), stuck reports, misuse messages, and the inspector of a
// queue in a region (lockword inspect). The protocol itself is in
// sharedqueue.go.

// corruption looks at the queue's words for a state that no valid history
// produces, and returns ErrCorrupt naming it. It reads serving, then next
// and the served ticket's record, then serving again: serving only grows,
// so if it is unchanged the three describe one moment (next and the record
// can only have been as read while serving stood there). Nil if the words
// are consistent, or moved too fast to tell.
func (q *ticketQueue) corruption() error {
	s := q.serving.Load()
	n := q.next.Load()
	if int32(n-s) < 0 {
		// Read in this order, serving cannot pass next in between.
		return q.errCorrupt("serving %d is ahead of next %d", s, n)
	}
	r := q.rec(s).Load()
	if q.serving.Load() != s {
		return nil
	}
	if why := queueSnapshotCorrupt(s, n, r); why != "" {
		return q.errCorrupt("%s", why)
	}
	// No record names a ticket not issued yet: a claim names next or
	// less, and next only grows, so a record read before next that is
	// ahead of it was written by something else.
	if rn := q.rec(n).Load(); rn != 0 {
		if n2 := q.next.Load(); int32(recTicket(rn)-n2) > 0 {
			return q.errCorrupt("record of ticket %d is ahead of next %d (%#x)", recTicket(rn), n2, rn)
		}
	}
	return nil
}

// queueSnapshotCorrupt says what is impossible about a queue whose serving
// s, next n and record of ticket s (r) were read at one moment, or "".
// Invariants: serving never passes next; each outstanding ticket has its
// own record (so at most queueRecords are outstanding); the served ticket
// of a non-empty queue has its record, claimed before next passed it and
// freed only after serving did, in one of the states of the table, owned
// by a token some region issued.
func queueSnapshotCorrupt(s, n uint32, r uint64) string {
	switch {
	case int32(n-s) < 0:
		return fmt.Sprintf("serving %d is ahead of next %d", s, n)
	case n-s > queueRecords:
		return fmt.Sprintf("%d tickets outstanding (next %d, serving %d), at most %d", n-s, n, s, queueRecords)
	case n == s:
		return ""
	case recTicket(r) != s:
		return fmt.Sprintf("served ticket %d has no record (its slot holds %#x)", s, r)
	case recState(r) == 0 || recState(r) > recSkippingDead:
		return fmt.Sprintf("the record of served ticket %d has state %d, not one of 1-5 (%#x)", s, recState(r)>>28, r)
	case !validToken(recToken(r)):
		return fmt.Sprintf("the record of served ticket %d names owner token %#x, which no region issues (%#x)", s, recToken(r), r)
	}
	return ""
}

func (q *ticketQueue) errCorrupt(format string, args ...any) error {
	return &lockword.CorruptError{Kind: q.kind, Object: q.name, Region: q.r.path, Reason: fmt.Sprintf(format, args...)}
}

// heldByUs reports whether this process holds the lock (the served
// ticket's record is ours and held).
func (q *ticketQueue) heldByUs() bool {
	s := q.serving.Load()
	r := q.rec(s).Load()
	return recTicket(r) == s && recToken(r) == q.token && recState(r) == recHolding
}

// holderOf returns the token and state of the served ticket's record, for
// inspection and misuse messages; token 0 if the lock is free.
func (q *ticketQueue) holder() (token, state uint32) {
	s := q.serving.Load()
	if s == q.next.Load() {
		return 0, 0
	}
	r := q.rec(s).Load()
	if recTicket(r) != s {
		return 0, 0
	}
	return recToken(r), recState(r)
}

func (q *ticketQueue) unlockMisuse() {
	tok, state := q.holder()
	switch {
	case q.flags.Load()&queueNotRecoverable != 0:
		panic(fmt.Sprintf("lockword: Unlock of not-recoverable %s %q, which this process does not hold", q.kind, q.name))
	case tok == 0 || state != recHolding:
		panic(fmt.Sprintf("lockword: Unlock of unlocked %s %q", q.kind, q.name))
	}
	alive, pid := q.r.tokenAlive(tok)
	if alive && int(pid) == q.r.pid() {
		// Our PID, another slot: a second Region handle of this
		// process. Ownership is per handle.
		panic(fmt.Sprintf("lockword: Unlock of %s %q held through another Region handle in this process (unlock through the handle that locked it)", q.kind, q.name))
	}
	panic(fmt.Sprintf("lockword: Unlock of %s %q held by another process (PID %s)", q.kind, q.name, pidText(pid)))
}

// reportIfStuck logs the lock's stuck report if the wait, our part sw of
// it, passes the threshold and the episode calls for a line.
func (q *ticketQueue) reportIfStuck(sw *stuckWait, start time.Time, blocker uint32, alive bool) {
	due, waiters, waited, threshold := q.stuck.check(&q.stuckNs, sw, start, 0)
	if !due {
		return
	}
	_, pid := q.r.tokenAlive(blocker)
	logSharedStuck(sharedStuck{kind: q.kind, name: q.name, path: q.r.path, holderPID: pid, alive: alive,
		heldFor: q.heldFor(), waiters: waiters, waited: waited, threshold: threshold},
		append([]any{"queued_tickets", q.next.Load() - q.serving.Load()}, q.r.deadlockAttrs()...)...)
}

// heldFor is how long the ticket served has been held, for a stuck report.
func (q *ticketQueue) heldFor() any { return heldFor(q.obj, q.stamp.Load() == q.serving.Load()) }

// queueSnapshotTries bounds the inspector's retries for a snapshot in
// which serving and next stood still.
const queueSnapshotTries = 100

// queue describes a robust ticket queue: its state, holder, queue length,
// how long the hold has lasted, and statistics. Like the Mutex
// inspector, it stamps a hold it sees for the first time whose start was
// not recorded (a fast-path acquisition).
func (insp *inspector) queue(obj []byte, info *ObjectInfo, next, serving, flags, stamp, deadPID *atomic.Uint32, records []byte) {
	// One snapshot: serving, next, the served record, then the flags, kept
	// only if serving and next have not moved meanwhile. A retirer marks
	// the lock inconsistent before it moves serving past a dead holder's
	// ticket, and the next holder clears the mark only after it took its
	// ticket, so flags read after the counters carry the mark whenever the
	// counters show the dead holder's ticket retired. Read in another
	// order, the words of one retire showed the lock free or handed off
	// with no holder at all (a torture run's supervisor judged a killed
	// holder no holder that way). A lock that moves on at every one of
	// the tries (a handover takes microseconds, a snapshot tens of
	// nanoseconds) is described from the last.
	var f, s, n uint32
	var r uint64
	for try := 0; ; try++ {
		s, n = serving.Load(), next.Load()
		r = word64(records, uint64(s%queueRecords)*queueRecordLen).Load()
		f = flags.Load()
		if serving.Load() == s && next.Load() == n {
			if why := queueSnapshotCorrupt(s, n, r); why != "" {
				info.State, info.Reason = "corrupt", why
				return
			}
			break
		}
		if try == queueSnapshotTries {
			break
		}
		if try >= 10 {
			time.Sleep(time.Microsecond) // let a burst of handovers pass
		}
	}
	info.Inconsistent = f&queueInconsistent != 0
	if f&queueStats != 0 {
		st := queueObjStats(obj)
		info.Stats = &st
	}
	switch {
	case f&queueNotRecoverable != 0:
		info.State = "not-recoverable"
		return
	case s == n:
		info.State = "free"
		if info.Inconsistent {
			// Taken from a dead holder, whose successor has not come yet.
			info.State, info.HolderPID = "owner-dead", int(deadPID.Load())
		}
		return
	}
	info.Queued = int(n - s - 1)
	info.Waiters = info.Queued > 0
	switch {
	case recTicket(r) == s && recState(r) == recSkippingDead:
		// Being retired on behalf of a holder that died.
		info.State, info.HolderPID = "owner-dead", int(deadPID.Load())
		return
	case recTicket(r) != s || recState(r) != recHolding:
		// Granted to ticket s, whose owner has not taken it yet: it is
		// waking up, or (an RW mutex's writer) waits for readers to
		// leave, or the ticket is being skipped. Nobody holds it.
		info.State = "handoff"
		info.Queued++
		if info.Inconsistent {
			info.State, info.HolderPID = "owner-dead", int(deadPID.Load())
		}
		return
	}
	setHolder(info, insp.check(recToken(r)))
	now := monoNowNs()
	// A zero held-since is a fresh object's, not a time: the zero stamp
	// then names ticket 0 without describing its hold.
	if since := word64(obj, mutexObjHeldSince).Load(); stamp.Load() == s && since != 0 {
		info.HeldFor = time.Duration(max(now-int64(since), 0))
		info.HeldForKnown = true
		return
	}
	if insp.r.readOnly {
		return // cannot stamp: unknown
	}
	// Stamp "held since at most now"; the stamp names the ticket it
	// describes, so a later holder never inherits it.
	word64(obj, mutexObjHeldSince).Store(uint64(now))
	info.HeldForKnown = stamp.CompareAndSwap(stamp.Load(), s) && serving.Load() == s
}
