package lockword

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// A robust ticket queue: the ticket lock of Mellor-Crummey and Scott (1991)
// in shared memory, with a record per outstanding ticket naming the process
// that owns it, so that a ticket whose owner died or gave up can be told
// from one whose owner is merely slow, and retired on its behalf. It is the
// SharedTicketMutex, and the writers' queue of SharedRWMutex.
//
// Why not the in-process protocol (ticketRef) on shared words: there a
// ticket is taken with an atomic add on next, and whatever records the
// taker afterwards, a process killed between the add and the record leaves
// a ticket that nobody can attribute, so its turn can never be safely
// skipped (its taker may be alive, only stopped). Here the record is
// claimed first, by a CAS of an empty record slot to (ticket, owner), and
// next advances only past a claimed record (any process that sees the claim
// helps advance it), so every issued ticket names its owner from the
// moment it exists.
//
// Record of ticket t, a 64-bit word at records[t mod queueRecords]:
//
//	bits   meaning
//	0-27   owner token (waiting, holding, abandoned) or, while a ticket
//	       is being retired on someone's behalf, the retiring actor's
//	28-30  state, below
//	31     sleeping: the owner may sleep in the kernel; whoever serves
//	       t must FUTEX_WAKE_BITSET it (bit t mod 32)
//	32-63  t
//
//	state          meaning                        when served, becomes
//	0 free         no outstanding ticket here     -
//	1 waiting      owner waits for its turn       holding (by the owner)
//	2 holding      owner holds the lock           free (owner's Unlock,
//	                                              after serving moves on)
//	3 abandoned    owner gave up (context ended)  skipping (by whoever
//	                                              serves it, or adopted
//	                                              by the owner's process)
//	4 skipping     an actor retires t quietly: its owner gave up, or
//	               died before its turn (it never held the lock)
//	5 skip-dead    an actor retires t whose owner died holding the lock:
//	               the lock is marked inconsistent first
//
// Whoever moves a record into a skipping state (one CAS: exactly one party
// wins) advances serving from t with a CAS and frees the record; if it dies
// half-way, a waiter finds the actor dead and takes the job over by the
// same CAS. A holder's Unlock advances serving first and frees its record
// after, so a holder killed between the two leaves a record whose ticket is
// behind serving: stale, cleared by the next claim of that slot.
//
// Owner death is decided as for SharedMutex (owner tokens, a process table
// with start times, tokenAlive) and only on proof, by a waiter that has
// seen serving stand still for ownerCheckInterval: a live owner is never
// skipped, however long it takes.
const (
	queueRecords   = 64 // outstanding tickets at most: see SharedTicketMutex
	queueRecordLen = 8

	recStateMask    = 7 << 28
	recWaiting      = 1 << 28
	recHolding      = 2 << 28
	recAbandoned    = 3 << 28
	recSkipping     = 4 << 28
	recSkippingDead = 5 << 28
	recSleeping     = 1 << 31
)

// Bits of the flags word of a robust ticket queue. Statistics and
// inconsistency share SharedMutex's bit numbers.
const (
	queueStats          = sharedStats        // statistics on: acquisitions take the slow path and count
	queueInconsistent   = sharedInconsistent // taken from a dead holder; MarkConsistent not yet called
	queueNotRecoverable = 1 << 30            // a holder unlocked while inconsistent: every acquisition fails
)

func packRecord(ticket, token, state uint32) uint64 {
	return uint64(ticket)<<32 | uint64(token|state)
}
func recTicket(r uint64) uint32 { return uint32(r >> 32) }
func recToken(r uint64) uint32  { return uint32(r) & ownerMask }
func recState(r uint64) uint32  { return uint32(r) & recStateMask }

// ticketBit is the futex bitset bit of ticket t's waiter.
func ticketBit(t uint32) uint32 { return 1 << (t % 32) }

// anyBit matches every bitset: sleepers that wait for any change.
const anyBit = ^uint32(0)

// A ticketQueue is one process's handle on a robust ticket queue in a
// region. Only the goroutine holding gate takes, waits with or holds a
// ticket, so a process has at most one outstanding ticket per queue and at
// most one goroutine per queue asleep in the kernel; the others park on
// the gate, a process-local TicketMutex, in FIFO order.
type ticketQueue struct {
	next, serving, flags, stamp, deadPID *atomic.Uint32
	records                              []byte // queueRecords records in the mapping
	obj                                  []byte // the whole object: statistics, held-since
	r                                    *Region
	token                                uint32
	name, kind                           string
	// retire, if set, runs when a served ticket is retired on its owner's
	// behalf, before serving moves on (the reader-writer lock releases a
	// dead writer's hold on its readers there). dead: the owner died
	// holding. An error leaves the ticket unretired (see SharedRWMutex).
	retire func(ctx context.Context, t uint32, dead bool) error

	gate TicketMutex
	// Guarded by gate: the ticket this process holds or waits with, and a
	// ticket it abandoned that has not been skipped yet (its next waiter
	// adopts it rather than queue again).
	ticket       uint32
	abandoned    uint32
	hasAbandoned bool
	// held is set while this handle holds the lock (from a successful
	// acquisition to its release), so that an Unlock that finds its
	// record overwritten can tell corruption from misuse.
	held atomic.Bool

	stuckNs atomic.Int64
	repair  atomic.Pointer[func() error]
}

func (q *ticketQueue) rec(t uint32) *atomic.Uint64 {
	return word64(q.records, uint64(t%queueRecords)*queueRecordLen)
}

// take claims the next ticket: it returns the ticket and whether it is
// already held (holdIfFree and the lock was free), or ok false when every
// record is in use (the queue is full). See the protocol above. Every
// retry is caused by another party's progress in a valid history; words
// that keep it retrying are checked for corruption (ErrCorrupt), and ctx
// is looked at, every retryCheckEvery tries and after every undone claim.
func (q *ticketQueue) take(ctx context.Context, holdIfFree bool) (t uint32, holding, ok bool, err error) {
	for i := 1; ; i++ {
		if i%retryCheckEvery == 0 {
			if err := q.corruption(); err != nil {
				return 0, false, false, err
			}
			if err := ctx.Err(); err != nil {
				return 0, false, false, err
			}
		}
		n := q.next.Load()
		rec := q.rec(n)
		r := rec.Load()
		if r != 0 {
			switch rt := recTicket(r); {
			case rt == n:
				// Claimed, next not yet advanced: help.
				q.next.CompareAndSwap(n, n+1)
				continue
			case q.next.Load() != n:
				continue // moved on meanwhile: look again
			case int32(q.serving.Load()-rt) > 0:
				// Served and gone, but its owner died before freeing
				// the record: clear it.
				rec.CompareAndSwap(r, 0)
				continue
			}
			return 0, false, false, nil // ticket n-queueRecords is still outstanding
		}
		// serving == n (the lock is free) stays true until ticket n's
		// owner, which a successful CAS makes us, moves it on.
		state := uint32(recWaiting)
		free := holdIfFree && q.serving.Load() == n
		if free {
			state = recHolding
		}
		mine := packRecord(n, q.token, state)
		if rec.CompareAndSwap(0, mine) {
			if !q.claimed(n, mine) {
				// A stale read of next, or serving ahead of next
				// (corrupt): which, the words say.
				if err := q.corruption(); err != nil {
					return 0, false, false, err
				}
				if err := ctx.Err(); err != nil {
					return 0, false, false, err
				}
				continue
			}
			q.next.CompareAndSwap(n, n+1)
			return n, free, true, nil
		}
	}
}

// claimed validates a claim of ticket n's record, which we just made with
// value mine: n may have been a stale read of next, issued to another
// process, served and its record freed before our CAS. Then serving has
// passed n, and the claim is undone. Otherwise nobody else owns n: its
// record would still be there (records are freed only once serving has
// passed their ticket), and serving cannot pass n without us.
func (q *ticketQueue) claimed(n uint32, mine uint64) bool {
	if int32(q.serving.Load()-n) > 0 {
		q.rec(n).CompareAndSwap(mine, 0)
		return false
	}
	return true
}

// adopt takes back this process's abandoned ticket, if it has one that
// was not skipped yet: it keeps its place in the queue. The caller holds
// the gate.
func (q *ticketQueue) adopt() (t uint32, ok bool) {
	if !q.hasAbandoned {
		return 0, false
	}
	q.hasAbandoned = false
	t = q.abandoned
	r := q.rec(t).Load()
	if recTicket(r) != t || recState(r) != recAbandoned || recToken(r) != q.token {
		return 0, false
	}
	return t, q.rec(t).CompareAndSwap(r, packRecord(t, q.token, recWaiting))
}

// tryTake claims a ticket only if it would be served at once, as holdState
// (recHolding, or recWaiting for a caller that has more to do before it
// holds).
func (q *ticketQueue) tryTake(holdState uint32) (uint32, bool) {
	n := q.next.Load()
	if q.serving.Load() != n {
		return 0, false
	}
	rec := q.rec(n)
	r := rec.Load()
	if r != 0 && (recTicket(r) == n || int32(q.serving.Load()-recTicket(r)) <= 0 || !rec.CompareAndSwap(r, 0)) {
		return 0, false
	}
	mine := packRecord(n, q.token, holdState)
	if !rec.CompareAndSwap(0, mine) || !q.claimed(n, mine) {
		return 0, false
	}
	q.next.CompareAndSwap(n, n+1)
	return n, true
}

// hold marks the caller's served ticket t as held. Only the sleeping bit
// of a waiting record changes under its owner, so a record that is no
// longer ours, or that keeps changing, was overwritten: ErrCorrupt.
func (q *ticketQueue) hold(t uint32) error {
	rec := q.rec(t)
	for range retryLimit {
		r := rec.Load()
		if recTicket(r) != t || recToken(r) != q.token || recState(r) != recWaiting {
			return q.errCorrupt("the record of ticket %d, ours and waiting, now reads %#x", t, r)
		}
		if rec.CompareAndSwap(r, packRecord(t, q.token, recHolding)) {
			return nil
		}
	}
	return q.errCorrupt("the record of ticket %d keeps changing under its owner", t)
}

// stampHeld records when the hold of ticket t began, for lockword inspect.
func (q *ticketQueue) stampHeld(t uint32) {
	word64(q.obj, mutexObjHeldSince).Store(uint64(monoNowNs()))
	q.stamp.Store(t)
}

// finish ends ticket t, whose record is r, by its owner: serving moves on,
// then the record is freed, then the next ticket is served.
func (q *ticketQueue) finish(t uint32, r uint64) {
	s := q.serving.Add(1)
	q.rec(t).CompareAndSwap(r, 0)
	if s != q.next.Load() {
		q.handOn(s, nil)
	}
}

// handOn serves ticket s, which serving has just reached: it wakes its
// owner if it sleeps, or, if s was abandoned, retires it and serves the
// next. ctx bounds a retire hook's wait (nil: none).
//
// In a valid history it skips at most the outstanding tickets (64) and
// retries a CAS only when the record's owner changed it; the loop stops
// after retryCheckEvery+queueRecords rounds regardless (a waiter's
// resolve retires what is left, ownerCheckInterval later).
func (q *ticketQueue) handOn(s uint32, ctx context.Context) {
	for range retryCheckEvery + queueRecords {
		if s == q.next.Load() {
			return
		}
		rec := q.rec(s)
		r := rec.Load()
		if recTicket(r) != s {
			return // not claimed yet (it is, whenever s != next: see take) or retired
		}
		switch recState(r) {
		case recAbandoned:
			if !rec.CompareAndSwap(r, packRecord(s, q.token, recSkipping)) {
				continue
			}
			if !q.complete(ctx, s, recSkipping) {
				return
			}
			s++
			continue
		case recWaiting, recHolding:
			if r&recSleeping != 0 {
				wakeSharedBits(q.serving, wakeAll, ticketBit(s))
			}
		}
		return
	}
}

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
	return &CorruptError{Kind: q.kind, Object: q.name, Region: q.r.path, Reason: fmt.Sprintf(format, args...)}
}

// complete retires ticket s, whose record this process moved to state (a
// skipping state, actor q.token): mark the lock inconsistent if its owner
// died holding, move serving past s, free the record. It reports false if
// the retire hook gave up (the record is then no longer ours).
func (q *ticketQueue) complete(ctx context.Context, s, state uint32) bool {
	if q.retire != nil {
		if ctx == nil {
			ctx = context.Background()
		}
		if q.retire(ctx, s, state == recSkippingDead) != nil {
			return false
		}
	}
	if state == recSkippingDead {
		if q.serving.Load() != s {
			// Its owner had moved serving on (finish) and died before
			// it freed its record, after we had looked: it released the
			// lock, and the next holder may hold it now. Nothing to mark.
			q.rec(s).CompareAndSwap(packRecord(s, q.token, state), 0)
			return true
		}
		q.flags.Or(queueInconsistent)
	}
	q.serving.CompareAndSwap(s, s+1) // fails only if a dead actor got this far
	q.rec(s).CompareAndSwap(packRecord(s, q.token, state), 0)
	return true
}

// resolve looks at ticket s, served for at least ownerCheckInterval
// without moving on: if its owner (or the actor retiring it) is dead, or it
// was abandoned and nobody skipped it, this process retires it. It returns
// the token that holds things up and whether it lives, for stuck reports.
func (q *ticketQueue) resolve(ctx context.Context, s uint32) (blocker uint32, alive bool) {
	rec := q.rec(s)
	r := rec.Load()
	if recTicket(r) != s || q.serving.Load() != s {
		return 0, true
	}
	tok := recToken(r)
	next := uint32(recSkipping)
	switch recState(r) {
	case recAbandoned:
	case recWaiting, recHolding, recSkipping, recSkippingDead:
		if tok == q.token {
			return tok, true // ours: another of our goroutines is at it
		}
		live, pid := q.r.tokenAlive(tok)
		if live {
			return tok, true
		}
		switch recState(r) {
		case recHolding:
			next = recSkippingDead
			q.deadPID.Store(pid)
		case recSkipping, recSkippingDead:
			next = recState(r) // the actor died: carry on its job
		}
	default:
		return 0, true
	}
	if rec.CompareAndSwap(r, packRecord(s, q.token, next)) && q.complete(ctx, s, next) {
		q.handOn(s+1, ctx)
	}
	return 0, true
}

// waitServing sleeps on serving until done(s) is true of its value s, or
// ctx ends, or the lock becomes not recoverable. bits is the futex bitset
// to sleep with; sleeping, if set, marks the caller's record so that its
// server wakes it. Every ownerCheckInterval that serving stands still it
// resolves the ticket served; past the stuck threshold it reports once.
func (q *ticketQueue) waitServing(ctx context.Context, start time.Time, bits uint32, sleeping func(), done func(s uint32) bool) error {
	last := q.serving.Load()
	since, checked := time.Now(), time.Time{}
	reported := false
	for {
		s := q.serving.Load()
		if done(s) {
			return nil
		}
		if q.flags.Load()&queueNotRecoverable != 0 {
			return q.errNotRecoverable()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		now := time.Now()
		if s != last {
			last, since = s, now
		} else if now.Sub(since) >= ownerCheckInterval && now.Sub(checked) >= ownerCheckInterval {
			checked = now
			if err := q.corruption(); err != nil {
				return err
			}
			blocker, alive := q.resolve(ctx, s)
			if !reported && blocker != 0 {
				reported = q.reportIfStuck(start, blocker, alive)
			}
			continue
		}
		if sleeping != nil {
			sleeping()
		}
		if q.flags.Load()&queueStats != 0 {
			word64(q.obj, mutexObjParks).Add(1)
		}
		sleepSharedBits(ctx, q.serving, s, bits, ownerCheckInterval)
	}
}

// markSleeping sets the sleeping bit of ticket t's record, ours.
func (q *ticketQueue) markSleeping(t uint32) {
	rec := q.rec(t)
	for range retryLimit { // a CAS fails only if the record changed: see hold
		r := rec.Load()
		if r&recSleeping != 0 || recTicket(r) != t || recState(r) != recWaiting || rec.CompareAndSwap(r, r|recSleeping) {
			return
		}
	}
}

// acquire takes a ticket (adopting this process's abandoned one if it can)
// and waits for it to be served. The caller holds the gate. holdAtOnce
// marks the ticket held when served (the mutex); otherwise the caller
// calls hold itself. On nil the ticket q.ticket is served.
func (q *ticketQueue) acquire(ctx context.Context, holdAtOnce bool) (slow bool, start time.Time, err error) {
	if q.flags.Load()&queueNotRecoverable != 0 {
		return false, start, q.errNotRecoverable()
	}
	t, ok := q.adopt()
	held := false
	if !ok {
		if t, held, ok, err = q.take(ctx, holdAtOnce); err != nil {
			return false, start, err
		}
	}
	if ok && (held || q.serving.Load() == t) {
		q.ticket = t
		if !held && holdAtOnce {
			err = q.hold(t)
		}
		return false, start, err
	}
	q.r.waiting.Add(1)
	defer q.r.waiting.Add(-1)
	start = time.Now()
	for !ok {
		// Full: wait for the oldest ticket to go, then try again. Each
		// round follows another ticket's service in a valid history;
		// words that say the queue is full while its oldest ticket is
		// served already are corrupt, and ctx bounds the rest.
		if err := q.corruption(); err != nil {
			return true, start, err
		}
		if err := ctx.Err(); err != nil {
			return true, start, err
		}
		oldest := q.next.Load() - queueRecords
		err := q.waitServing(ctx, start, anyBit, nil, func(s uint32) bool { return int32(s-oldest) > 0 })
		if err != nil {
			return true, start, err
		}
		if t, held, ok, err = q.take(ctx, holdAtOnce); err != nil {
			return true, start, err
		}
	}
	q.ticket = t
	if !held {
		// Next in line: the holder may be running in another process on
		// another core, about to hand over; a kernel sleep and wake-up
		// costs microseconds.
		if t-q.serving.Load() == 1 {
			backoff := uint32(1)
			for range sharedSpinIterations {
				procyield(backoff)
				backoff = min(2*backoff, sharedSpinPause)
				if q.serving.Load() == t {
					break
				}
			}
		}
		err = q.waitServing(ctx, start, ticketBit(t), func() { q.markSleeping(t) }, func(s uint32) bool { return s == t })
		if err != nil {
			if aerr := q.abandon(t); aerr != nil {
				err = aerr
			}
			return true, start, err
		}
		if holdAtOnce {
			err = q.hold(t)
		}
	}
	return true, start, err
}

// abandon gives up ticket t, ours, not yet served when we looked: record
// it abandoned so that whoever serves it skips it (or our process's next
// waiter adopts it). If its turn came meanwhile and nobody skipped it, we
// hold the lock, so we pass it on ourselves. The caller holds the gate.
// A record that is no longer ours was overwritten: ErrCorrupt, and the
// ticket is left as it is.
func (q *ticketQueue) abandon(t uint32) error {
	rec := q.rec(t)
	for i := 0; ; i++ {
		r := rec.Load()
		if recTicket(r) != t || recToken(r) != q.token || recState(r) != recWaiting {
			return q.errCorrupt("the record of ticket %d, ours and waiting, now reads %#x", t, r)
		}
		if rec.CompareAndSwap(r, packRecord(t, q.token, recAbandoned)) {
			break
		}
		if i == retryLimit {
			return q.errCorrupt("the record of ticket %d keeps changing under its owner", t)
		}
	}
	// The record is abandoned before serving is loaded, and a server
	// moves serving before it loads the record: either it sees the
	// abandonment or we see our turn (and both may: the CAS decides).
	q.abandoned, q.hasAbandoned = t, true
	if q.serving.Load() == t {
		r := packRecord(t, q.token, recAbandoned)
		if rec.CompareAndSwap(r, packRecord(t, q.token, recHolding)) {
			q.hasAbandoned = false
			q.finish(t, packRecord(t, q.token, recHolding))
		}
	}
	return nil
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

// afterServed finishes an acquisition whose ticket is now served and held:
// the lock may have been taken over from a dead holder (ErrOwnerDead, the
// caller holds it) or made not recoverable meanwhile (the caller does not
// hold it: it is passed on).
func (q *ticketQueue) afterServed(slow bool, start time.Time) error {
	f := q.flags.Load()
	if f&queueNotRecoverable != 0 {
		q.finish(q.ticket, packRecord(q.ticket, q.token, recHolding))
		return q.errNotRecoverable()
	}
	if f&queueStats != 0 {
		if slow {
			countSlowAcquisition(q.obj, start)
		} else {
			word64(q.obj, mutexObjAcquired).Add(1)
		}
	}
	if slow || f&queueStats != 0 {
		q.stampHeld(q.ticket)
	}
	q.held.Store(true)
	if f&queueInconsistent != 0 {
		return &OwnerDeadError{Lock: q.name, Region: q.r.path, PID: int(q.deadPID.Load())}
	}
	return nil
}

// release ends this process's hold: an inconsistent lock becomes not
// recoverable and every waiter learns it.
func (q *ticketQueue) release() {
	if !q.heldByUs() {
		if q.held.Swap(false) {
			// We hold it, but the served record is not ours: the words
			// were overwritten under us. Nothing can be handed on.
			slog.Warn("lockword: Unlock of a lock whose shared words were overwritten while held; nothing handed on",
				"kind", q.kind, "lock", q.name, "region", q.r.path, "error", q.corruption())
			return
		}
		q.unlockMisuse()
	}
	q.held.Store(false)
	f := q.flags.Load()
	if f&queueInconsistent != 0 {
		q.flags.Or(queueNotRecoverable)
	}
	q.finish(q.ticket, packRecord(q.ticket, q.token, recHolding))
	if f&queueInconsistent != 0 {
		wakeSharedBits(q.serving, wakeAll, anyBit)
	}
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

// markConsistent is MarkConsistent.
func (q *ticketQueue) markConsistent() error {
	if !q.heldByUs() {
		return fmt.Errorf("lockword: MarkConsistent of %s %q, which this process does not hold", q.kind, q.name)
	}
	q.flags.And(^uint32(queueInconsistent))
	return nil
}

func (q *ticketQueue) errNotRecoverable() error {
	return fmt.Errorf("%w (lock %q in %s)", ErrNotRecoverable, q.name, q.r.path)
}

// reportIfStuck logs one stuck report once the wait passes the threshold;
// it reports whether the wait is done reporting.
func (q *ticketQueue) reportIfStuck(start time.Time, blocker uint32, alive bool) bool {
	threshold, on := stuckThreshold(&q.stuckNs)
	if !on {
		return true
	}
	waited := time.Since(start)
	if waited < threshold {
		return false
	}
	_, pid := q.r.tokenAlive(blocker)
	logSharedStuck(q.kind, q.name, q.r.path, pid, alive, waited, threshold,
		"queued_tickets", q.next.Load()-q.serving.Load())
	return true
}

// A SharedTicketMutex is a fair (FIFO) mutual exclusion lock in a Region,
// shared by every process that maps the region, and robust like
// SharedMutex: when a holder process dies holding it, the next holder is
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
//	8-55    held-since and statistics, as SharedMutex
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
// SharedMutex: a live, stopped or slow holder is never robbed) the waiter
// retires the ticket on its behalf: if the owner held the lock, the lock is
// marked inconsistent first, and the next ticket's holder, whoever and
// wherever it is, gets the lock together with ErrOwnerDead; if it only
// waited (it died before its turn) or gave up, its turn is skipped and
// nobody is told, since it never touched the data. A holder death is
// noticed within 100 ms unless the waiters cannot get a CPU. Repair,
// MarkConsistent, Unlock, as with SharedMutex; Unlock without
// MarkConsistent makes the lock not recoverable (ErrNotRecoverable for
// every later acquisition). Lock (sync.Locker) runs the SetRepair function
// or panics, as SharedMutex.Lock does.
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
// 0.01-0.06 M at 8 and 16, against 3-5 M for SharedMutex, which lets a
// running process take the lock again. (Waking the next ticket early so
// that it spins did not help measurably here.) Use it where the order of
// processes matters more than throughput.
//
// Counters wrap at 2^32. In the terminology of the Go memory model, the
// n'th call to Unlock synchronizes before the m'th call to Lock (or
// successful TryLock or LockContext) for any n < m, across processes.
//
// A SharedTicketMutex belongs to one Region handle; ownership is per
// process (per handle), not per goroutine. Unlock by a process that does
// not hold it panics.
type SharedTicketMutex struct {
	_ noCopy
	q ticketQueue
}

var _ interface {
	Lock()
	Unlock()
} = (*SharedTicketMutex)(nil)

// Shared ticket-lock object layout (kind 3). Offsets 8-55 are SharedMutex's
// held-since and statistics (mutexObj*).
const (
	ticketObjSize    = 640
	ticketObjNext    = 0
	ticketObjServing = 4
	ticketObjFlags   = 56
	ticketObjDeadPID = 60
	ticketObjStamp   = 64
	ticketObjRecords = 128
)

// queueOwnerWords are the offsets of the owner tokens of a robust ticket
// queue's records, for kindInfo.ownerWords: the ticket mutex's and the
// RW mutex's writers' queue.
func queueOwnerWords() []uint32 {
	owners := make([]uint32, queueRecords)
	for i := range owners {
		owners[i] = ticketObjRecords + uint32(i)*queueRecordLen
	}
	return owners
}

func init() {
	registerKind(kindTicketMutex, &kindInfo{
		name: "ticket mutex", size: ticketObjSize, align: 64,
		ownerWords: queueOwnerWords(),
		inspect:    inspectTicketMutex,
	})
}

func newSharedTicketMutex(r *Region, name string, obj []byte) *SharedTicketMutex {
	t := &SharedTicketMutex{}
	t.q.init(r, name, "SharedTicketMutex", obj, ticketObjNext, ticketObjServing, ticketObjFlags, ticketObjStamp, ticketObjDeadPID, ticketObjRecords)
	return t
}

func (q *ticketQueue) init(r *Region, name, kind string, obj []byte, next, serving, flags, stamp, deadPID, records uint64) {
	q.next, q.serving, q.flags = word32(obj, next), word32(obj, serving), word32(obj, flags)
	q.stamp, q.deadPID = word32(obj, stamp), word32(obj, deadPID)
	q.records = obj[records : records+queueRecords*queueRecordLen]
	q.obj, q.r, q.token, q.name, q.kind = obj, r, r.token, name, kind
	// The gate's own stuck reports would speak of an unnamed in-process
	// lock; the shared queue reports instead, naming the holder process.
	q.gate.SetStuckThreshold(-1)
}

// Lock locks t, waiting for its turn. On an owner death it runs the repair
// function (SetRepair); without one, or if it fails, Lock unlocks t
// unrepaired (it becomes not recoverable) and panics; see SharedMutex.Lock.
func (t *SharedTicketMutex) Lock() {
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
func (t *SharedTicketMutex) TryLock() bool {
	if !t.q.gate.TryLock() {
		return false
	}
	if t.q.flags.Load()&(queueInconsistent|queueNotRecoverable) == 0 {
		if tk, ok := t.q.tryTake(recHolding); ok {
			t.q.ticket = tk
			err := t.q.afterServed(false, time.Time{})
			if err == nil {
				return true
			}
			if isOwnerDead(err) {
				// Became inconsistent between the look and the take:
				// give the lock back rather than take it without
				// telling. (Not recoverable: afterServed passed it on.)
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
func (t *SharedTicketMutex) LockContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if err := t.q.gate.LockContext(ctx); err != nil {
		return err
	}
	slow, start, err := t.q.acquire(ctx, true)
	if err == nil {
		err = t.q.afterServed(slow, start)
	}
	if err != nil && !isOwnerDead(err) {
		t.q.gate.Unlock()
	}
	return err
}

// Unlock unlocks t, handing it to the next ticket. If t was taken from a
// dead owner and MarkConsistent was not called, it becomes not
// recoverable. Unlock panics if this process does not hold t.
func (t *SharedTicketMutex) Unlock() {
	t.q.release()
	t.q.gate.Unlock()
}

// MarkConsistent declares that the data protected by t, taken with
// ErrOwnerDead, has been repaired (POSIX pthread_mutex_consistent). It
// returns an error if this process does not hold t.
func (t *SharedTicketMutex) MarkConsistent() error { return t.q.markConsistent() }

// SetRepair sets the function that Lock runs, holding the lock, when it
// takes it from a dead owner; see SharedMutex.SetRepair.
func (t *SharedTicketMutex) SetRepair(fn func() error) { setRepair(&t.q.repair, fn) }

// Name returns the object's name in its region.
func (t *SharedTicketMutex) Name() string { return t.q.name }

// SetStuckThreshold sets how long a waiter of this process waits before it
// logs one stuck report naming the holder's PID; zero restores
// DefaultStuckThreshold, a negative duration disables reports.
func (t *SharedTicketMutex) SetStuckThreshold(threshold time.Duration) {
	t.q.stuckNs.Store(int64(threshold))
}

// EnableStats starts collecting contention statistics for every process
// using t (in the region: Stats and lockword inspect show all processes
// together). Parks counts kernel sleeps.
func (t *SharedTicketMutex) EnableStats() { t.q.flags.Or(queueStats) }

// Stats returns the statistics collected since EnableStats, summed over
// all processes.
func (t *SharedTicketMutex) Stats() Stats { return mutexObjStats(t.q.obj) }

func (t *SharedTicketMutex) holdsLock() bool { return t.q.heldByUs() }

func isOwnerDead(err error) bool {
	_, ok := err.(*OwnerDeadError)
	return ok
}

func inspectTicketMutex(insp *inspector, obj []byte, info *ObjectInfo) {
	insp.queue(obj, info, word32(obj, ticketObjNext), word32(obj, ticketObjServing), word32(obj, ticketObjFlags),
		word32(obj, ticketObjStamp), word32(obj, ticketObjDeadPID), obj[ticketObjRecords:ticketObjRecords+queueRecords*queueRecordLen])
	info.Word = word32(obj, ticketObjServing).Load()
}

// queue describes a robust ticket queue: its state, holder, queue length,
// how long the hold has lasted, and statistics. Like the SharedMutex
// inspector, it stamps a hold it sees for the first time whose start was
// not recorded (a fast-path acquisition).
func (insp *inspector) queue(obj []byte, info *ObjectInfo, next, serving, flags, stamp, deadPID *atomic.Uint32, records []byte) {
	f := flags.Load()
	s, n := serving.Load(), next.Load()
	if r := word64(records, uint64(s%queueRecords)*queueRecordLen).Load(); serving.Load() == s {
		if why := queueSnapshotCorrupt(s, n, r); why != "" {
			info.State, info.Reason = "corrupt", why
			return
		}
	}
	info.Inconsistent = f&queueInconsistent != 0
	if f&queueStats != 0 {
		st := mutexObjStats(obj)
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
	r := word64(records, uint64(s%queueRecords)*queueRecordLen).Load()
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
