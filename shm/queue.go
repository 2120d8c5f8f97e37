package shm

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

// A robust ticket queue: the ticket lock of Mellor-Crummey and Scott (1991)
// in shared memory, with a record per outstanding ticket naming the process
// that owns it, so that a ticket whose owner died or gave up can be told
// from one whose owner is merely slow, and retired on its behalf. It is the
// TicketMutex, and the writers' queue of RWMutex.
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
// Owner death is decided as for Mutex (owner tokens, a process table
// with start times, tokenAlive) and only on proof, by a waiter that has
// seen serving stand still for ownerCheckInterval: a live owner is never
// skipped, however long it takes.
const (
	queueRecords   = 64 // outstanding tickets at most: see TicketMutex
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
// inconsistency share Mutex's bit numbers.
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
	// holding. An error leaves the ticket unretired (see RWMutex).
	retire func(ctx context.Context, t uint32, dead bool) error

	gate lockword.TicketMutex
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
	stuck   stuckEpisode // this process's stuck reports (diag.go)
	repair  atomic.Pointer[func() error]
	// waitsFor1 is 1 + the object's table index: what our kernel
	// sleeper records that it waits for (waitsfor.go), in the queue and,
	// for RWMutex, as a reader behind a writer.
	waitsFor1 uint32
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
		q.serveTicket(s, nil)
	}
}

// serveTicket serves ticket s, which serving has just reached: it wakes its
// owner if it sleeps, or, if s was abandoned, retires it and serves the
// next. ctx bounds a retire hook's wait (nil: none).
//
// In a valid history it skips at most the outstanding tickets (64) and
// retries a CAS only when the record's owner changed it; the loop stops
// after retryCheckEvery+queueRecords rounds regardless (a waiter's
// retireIfStalled retires what is left, ownerCheckInterval later).
func (q *ticketQueue) serveTicket(s uint32, ctx context.Context) {
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
			if !q.retireTicket(ctx, s, recSkipping) {
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

// retireTicket retires ticket s, whose record this process moved to state (a
// skipping state, actor q.token): mark the lock inconsistent if its owner
// died holding, move serving past s, free the record. It reports false if
// the retire hook gave up (the record is then no longer ours).
func (q *ticketQueue) retireTicket(ctx context.Context, s, state uint32) bool {
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

// retireIfStalled looks at ticket s, served for at least ownerCheckInterval
// without moving on: if its owner (or the actor retiring it) is dead, or it
// was abandoned and nobody skipped it, this process retires it. It returns
// the token that holds things up and whether it lives, for stuck reports.
func (q *ticketQueue) retireIfStalled(ctx context.Context, s uint32) (blocker uint32, alive bool) {
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
	if rec.CompareAndSwap(r, packRecord(s, q.token, next)) && q.retireTicket(ctx, s, next) {
		q.serveTicket(s+1, ctx)
	}
	return 0, true
}

// waitServing sleeps on serving until done(s) is true of its value s, or
// ctx ends, or the lock becomes not recoverable. bits is the futex bitset
// to sleep with; sleeping, if set, marks the caller's record so that its
// server wakes it. Every ownerCheckInterval that serving stands still it
// looks at the ticket served (retireIfStalled); past the stuck threshold
// it reports once.
func (q *ticketQueue) waitServing(ctx context.Context, start time.Time, bits uint32, sleeping func(), done func(s uint32) bool) error {
	defer profileEnd(profileBegin())
	last := q.serving.Load()
	since, checked := time.Now(), time.Time{}
	var sw stuckWait
	defer q.stuck.leave(&sw)
	var waitsFor uint16                            // our waits-for record while we sleep (waitsfor.go)
	defer func() { q.r.clearWaitsFor(waitsFor) }() // a waiter served is a self-edge until then
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
			blocker, alive := q.retireIfStalled(ctx, s)
			if blocker != 0 {
				q.reportIfStuck(&sw, start, blocker, alive)
			}
			continue
		}
		if sleeping != nil {
			sleeping()
		}
		if q.flags.Load()&queueStats != 0 {
			word64(q.obj, mutexObjParks).Add(1)
		}
		if waitsFor == 0 {
			waitsFor = q.r.setWaitsFor(q.waitsFor1)
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

// statsClock returns the start of a wait to count if it gives up: now
// with statistics on, else the zero time (nothing to count).
func (q *ticketQueue) statsClock() time.Time {
	if q.flags.Load()&queueStats == 0 {
		return time.Time{}
	}
	return time.Now()
}

// countGiveUp counts a LockContext that waited since began (statsClock)
// and failed with err, if err is its context's.
func (q *ticketQueue) countGiveUp(began time.Time, err error) {
	if !began.IsZero() && isContextErr(err) {
		countQueueGiveUp(q.obj, began)
	}
}

// acceptHold finishes an acquisition whose ticket is now served and held:
// the lock may have been taken over from a dead holder (ErrOwnerDead, the
// caller holds it) or made not recoverable meanwhile (the caller does not
// hold it: it is passed on).
func (q *ticketQueue) acceptHold(slow bool, start time.Time) error {
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
		return &lockword.OwnerDeadError{Lock: q.name, Region: q.r.path, PID: int(q.deadPID.Load())}
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

// markConsistent is MarkConsistent.
// checkOpen and errClosed are the Region's, for this queue's lock.
func (q *ticketQueue) checkOpen(call string)       { q.r.checkOpen(q.kind, q.name, call) }
func (q *ticketQueue) errClosed(call string) error { return q.r.errClosed(q.kind, q.name, call) }

func (q *ticketQueue) markConsistent() error {
	if err := q.errClosed("MarkConsistent"); err != nil {
		return err
	}
	if !q.heldByUs() {
		return fmt.Errorf("lockword: MarkConsistent of %s %q, which this process does not hold", q.kind, q.name)
	}
	q.flags.And(^uint32(queueInconsistent))
	return nil
}

func (q *ticketQueue) errNotRecoverable() error {
	return fmt.Errorf("%w (lock %q in %s)", lockword.ErrNotRecoverable, q.name, q.r.path)
}

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

func (q *ticketQueue) init(r *Region, name, kind string, obj []byte, next, serving, flags, stamp, deadPID, records uint64) {
	q.next, q.serving, q.flags = word32(obj, next), word32(obj, serving), word32(obj, flags)
	q.stamp, q.deadPID = word32(obj, stamp), word32(obj, deadPID)
	q.records = obj[records : records+queueRecords*queueRecordLen]
	q.obj, q.r, q.token, q.name, q.kind = obj, r, r.token, name, kind
	q.waitsFor1 = r.tableIndex1(r.objects[name].offset)
	// The gate's own stuck reports would speak of an unnamed in-process
	// lock; the shared queue reports instead, naming the holder process.
	q.gate.SetStuckThreshold(-1)
}
