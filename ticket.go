package lockword

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// Waiting tuning for the ticket protocol (see BENCHMARKS.md). Only the
// waiter next in line spins, and briefly (about 8 PAUSEs, 0.15 µs on the
// 2-core benchmark machine): a holder running on another core hands over
// within that, and when the holder waits for our own core every spin is
// wasted. Measured there, longer spins, yielding the processor in ticket
// order, and waking the waiter after the new holder ahead of its turn all
// lost throughput to a plain park and a targeted wake-up. Unlock must not
// yield after its wake-up either (as Mutex's does): the unlocker would take
// its next ticket only when it ran again, after the queue drained, and one
// goroutine would then re-lock uncontended for a whole time slice
// (TestTicketMutexFairShares fails that variant).
const (
	ticketSpinIterations = 8 // looks at serving, next in line only
	ticketSpinPause      = 1 // PAUSE/YIELD hints between looks
)

// aux word of a ticket lock: bit 31 is statsFlag; bits 0-30 count
// abandoned tickets (their waiters gave up) that Unlock has yet to skip.
const ticketAbandonedMask = statsFlag - 1

// A ticketRef points at the three lock words of a ticket lock
// (Mellor-Crummey & Scott, 1991), which TicketMutex holds as fields
// (fields, not a struct, so that its fast paths stay within the inliner's
// budget), and at the lock's diagnostics, where the tickets of waiters
// that gave up are recorded. TicketMutex is its only user; tests build
// one over their own words to inject faults (hookTicket). All comparisons
// are equalities or int32 differences, so both counters wrap at 2^32.
type ticketRef struct {
	next    *atomic.Uint32 // the next ticket to hand out
	serving *atomic.Uint32 // the ticket that holds the lock
	aux     *atomic.Uint32 // statsFlag | abandoned tickets awaiting skip
	d       *diag          // the lock's own: its skips live there
}

// ticketSkips records a lock's abandoned tickets: those whose waiters'
// contexts ended before their turn. A ticket once taken cannot be given
// back, so the unlocker that reaches an abandoned ticket skips it,
// releasing on its behalf. Exactly one party removes a recorded ticket
// (remove reports whether it did): the unlocker, or the waiter itself if
// its turn came while it was leaving.
//
// The set belongs to the lock (in its lockInfo, allocated on the first
// abandonment), not to a table of the process: a global table keyed by
// the lock's address kept every lock with an unskipped abandoned ticket
// (a lock dropped while held, say) reachable for ever, with whatever
// embedded it, and never shrank. It is touched only when a waiter gives up
// and by an Unlock that finds the abandoned count nonzero; the map is
// dropped when it empties.
type ticketSkips struct {
	mu sync.Mutex
	m  map[uint32]struct{}
}

func (k *ticketSkips) add(ticket uint32) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[uint32]struct{})
	}
	k.m[ticket] = struct{}{}
	k.mu.Unlock()
}

func (k *ticketSkips) remove(ticket uint32) bool {
	k.mu.Lock()
	_, ok := k.m[ticket]
	if ok {
		delete(k.m, ticket)
		if len(k.m) == 0 {
			k.m = nil // a burst of give-ups leaves no table behind
		}
	}
	k.mu.Unlock()
	return ok
}

// ticketAbandonHook, nil outside tests, runs in abandon just after the
// ticket is recorded: tests use it to lose the record (a ticket lock whose
// cancelled waiters simply leave) or to hold the window between the record
// and the check of serving open, and show that the checks catch it.
var ticketAbandonHook func(r ticketRef, ticket uint32)

// addSkip and removeSkip record and take back an abandoned ticket of r.
func (r ticketRef) addSkip(ticket uint32) { r.d.getInfo().skips.add(ticket) }

func (r ticketRef) removeSkip(ticket uint32) bool {
	info := r.d.info.Load()
	return info != nil && info.skips.remove(ticket) // no info: nothing recorded yet
}

// await waits until ticket is served or ctx is done. On nil the caller
// holds the lock; on ctx.Err() the ticket has been given up and its turn
// will be passed on (see abandon). tr follows the wait for diagnostics.
func (r ticketRef) await(ctx context.Context, ticket uint32, tr *noteTrack, kind string) error {
	for {
		s := r.serving.Load()
		if s == ticket {
			return nil
		}
		if ticket-s == 1 {
			// Next in line: the holder may be running on another core,
			// about to hand over.
			for range ticketSpinIterations {
				procyield(ticketSpinPause)
				if s = r.serving.Load(); s == ticket {
					return nil
				}
			}
		}
		// Park until our turn: Unlock wakes the new holder by its ticket.
		// A change of serving between the load and the park returns at
		// once, and we look again.
		note, since := tr.sleeping()
		if err := wait.WaitOne(ctx, r.serving, s, ticket, note, since); err != nil {
			r.abandon(ticket, kind)
			return err
		}
	}
}

// release is Unlock's slow path, after an Unlock advanced serving and found
// it not equal to next: the ticket now served has a waiter, or was
// abandoned, or (misuse) nobody held the lock. It reads serving afresh
// (the fast path passes nothing, to stay inlinable): if serving moved on
// meanwhile, its new holder has released too, and the extra wake-up is
// harmless.
func (r ticketRef) release(kind string) {
	s := r.serving.Load()
	for {
		n := r.next.Load()
		if s == n {
			return // every ticket up to s was skipped: the lock is free
		}
		if int32(n-s) < 0 {
			// serving ran past next: nobody held the lock.
			r.serving.Add(^uint32(0))
			panic("lockword: Unlock of unlocked " + kind)
		}
		// serving was stored before this load of aux, and an abandoning
		// waiter counts itself in aux and records its ticket before it
		// loads serving, so either we see its count (and then find its
		// record) or it sees its turn (see abandon).
		if r.aux.Load()&ticketAbandonedMask != 0 && r.removeSkip(s) {
			// Ticket s was given up: release on its behalf.
			r.aux.Add(^uint32(0)) // one fewer to skip
			s = r.serving.Add(1)
			continue
		}
		// Wake the new holder, if it sleeps: only it, found by its ticket.
		wait.WakeOne(r.serving, s)
		return
	}
}

// unlock advances serving and releases: Unlock on behalf of a holder that
// is not a TicketMutex method (an abandoned ticket whose turn came).
func (r ticketRef) unlock(kind string) {
	if r.serving.Add(1) != r.next.Load() {
		r.release(kind)
	}
}

// abandon gives up ticket, whose waiter's context ended while it was not
// woken: record it so that the unlocker that reaches it skips it. If its
// turn came meanwhile and nobody skipped it yet, we hold the lock, so we
// pass it on ourselves.
func (r ticketRef) abandon(ticket uint32, kind string) {
	// Count before recording, so that every recorded ticket is counted:
	// were it the other way round, an unlocker that found the count
	// nonzero for another ticket could remove and uncount this one in
	// between, and the other would then go unseen while counted as zero.
	// (The count may exceed the record for a moment; that only costs an
	// unlocker a needless look.) Counted before serving is loaded: see
	// release.
	r.aux.Add(1)
	r.addSkip(ticket)
	if ticketAbandonHook != nil {
		ticketAbandonHook(r, ticket)
	}
	if r.serving.Load() == ticket && r.removeSkip(ticket) {
		r.aux.Add(^uint32(0))
		r.unlock(kind)
	}
}

// tryLock takes a ticket only if it would be served at once: no ticket is
// outstanding. If serving was s at the load and next is s at the CAS, then
// serving is still s (it never passes next), so the lock was free.
func (r ticketRef) tryLock() bool {
	s := r.serving.Load()
	return r.next.CompareAndSwap(s, s+1)
}

// A TicketMutex is a fair (FIFO) mutual exclusion lock: the ticket lock of
// Mellor-Crummey and Scott, "Algorithms for Scalable Synchronization on
// Shared-Memory Multiprocessors" (ACM TOCS, 1991), whose waiters park
// rather than spin. Lock takes a ticket with one atomic add on next and
// holds the lock when serving reaches it; Unlock adds one to serving. Its
// lock words:
//
//	word     meaning
//	next     the next ticket to hand out
//	serving  the ticket that holds the lock
//	aux      bit 31: statistics on; bits 0-30: abandoned tickets to skip
//
//	next - serving   state
//	0                unlocked
//	1                locked, nobody waiting
//	k > 1            locked, k-1 tickets waiting, in order
//
// Acquisitions are granted strictly in ticket order: Lock and LockContext
// calls are served in the order of their atomic add on next, whatever the
// scheduler does, so no waiter is overtaken; TryLock succeeds only when no
// ticket is outstanding. The price is that a handover must wait for the
// next waiter to run. Only the waiter next in line spins, briefly; the
// others park, each keyed by its ticket (internal/wait's WaitOne: in a
// slot that Unlock reads directly, without a search), and Unlock wakes
// the new holder alone, so that no goroutine is woken only to find that
// its turn has not come. Under contention every handover costs a
// park and a wake-up: prefer Mutex where throughput matters more than order.
//
// A LockContext whose context ends before its turn gives its ticket up:
// the ticket is recorded as abandoned and the Unlock that reaches it skips
// it, so the queue never stalls behind a waiter that has left. The record
// is the lock's own (in its diagnostics block): a TicketMutex dropped in
// any state, held or with waiters that gave up, is garbage like any value.
//
// Both counters wrap at 2^32; more than 2^31 goroutines waiting at once
// is not supported.
//
// The zero value is an unlocked TicketMutex. It must not be copied after
// first use. It is not tied to a goroutine.
//
// In the terminology of the Go memory model, the n'th call to Unlock
// synchronizes before the m'th call to Lock (or successful TryLock or
// LockContext) for any n < m.
//
// A TicketMutex is 24 bytes: next, serving and aux at offsets 0, 4 and 8,
// 4 bytes of alignment, then a pointer to optional diagnostics (SetName,
// SetStuckThreshold, EnableStats, and the abandoned tickets to skip). The protocol itself (ticketRef) sees
// only the three words, so that they can be placed elsewhere.
type TicketMutex struct {
	_       noCopy
	next    atomic.Uint32
	serving atomic.Uint32
	aux     atomic.Uint32
	diag
}

var _ interface {
	Lock()
	Unlock()
} = (*TicketMutex)(nil)

// words returns t's lock words for the protocol.
func (t *TicketMutex) words() ticketRef { return ticketRef{&t.next, &t.serving, &t.aux, &t.diag} }

// Lock locks t, waiting for its turn: Lock calls are served in the order
// in which they take their tickets.
func (t *TicketMutex) Lock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		t.lockTracked(nil)
		return
	}
	// Fast path: take a ticket; if it is served at once, the lock was
	// free. With statistics on, go and count it.
	ticket := t.next.Add(1) - 1
	if t.serving.Load() == ticket && t.aux.Load() < statsFlag {
		return
	}
	t.wait(nil, ticket)
}

// TryLock locks t if it is free, without waiting, and reports whether it
// did. It never takes a ticket that would have to wait.
func (t *TicketMutex) TryLock() bool {
	if deadlockBuilt && lockTracking.Load() != 0 {
		return trackAcquire(nil, t.ref(), t.tryAcquire, nil) == nil
	}
	s := t.serving.Load()
	if !t.next.CompareAndSwap(s, s+1) { // see ticketRef.tryLock
		return false
	}
	if t.aux.Load() >= statsFlag {
		t.uncontended()
	}
	return true
}

// LockContext locks t, waiting for its turn until ctx is done. If the lock
// is free it is taken even when ctx is already done, and a waiter whose
// turn comes as ctx ends may take it too. On failure it returns
// ctx.Err() (errors.Is works with context.Canceled and
// context.DeadlineExceeded), the caller does not hold the lock, and its
// ticket is passed over so that the waiters behind it are not held up.
func (t *TicketMutex) LockContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if deadlockBuilt && lockTracking.Load() != 0 {
		return t.lockTracked(ctx)
	}
	return t.wait(ctx, t.next.Add(1)-1)
}

// Unlock unlocks t, handing it to the next ticket. Unlocking an unlocked
// TicketMutex panics with "lockword: Unlock of unlocked TicketMutex"
// (detected when no ticket is outstanding).
func (t *TicketMutex) Unlock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		trackRelease(t) // before the release: see trackRelease
	}
	// Fast path: serve the next ticket; if nobody holds it, done.
	if t.serving.Add(1) != t.next.Load() {
		t.unlockSlow()
	}
}

// EnableStats starts collecting contention statistics (see Stats). It may
// be called at any time. From then on every acquisition takes the slow
// path and pays a few atomic adds on counters shared by all its users.
func (t *TicketMutex) EnableStats() {
	t.enableStats()
	t.aux.Or(statsFlag)
}

// ref is t for deadlock detection.
func (t *TicketMutex) ref() lockRef { return lockRef{t, "TicketMutex", &t.diag} }

// tryAcquire is TryLock without deadlock detection (TryLock keeps its own
// copy: a call to this one would cost it a call frame).
func (t *TicketMutex) tryAcquire() bool {
	if !t.words().tryLock() {
		return false
	}
	if t.aux.Load() >= statsFlag {
		t.uncontended()
	}
	return true
}

// lockTracked is LockContext (Lock if ctx is nil) with deadlock detection
// (deadlock.go).
func (t *TicketMutex) lockTracked(ctx context.Context) error {
	return trackAcquire(ctx, t.ref(), t.tryAcquire, func(ctx context.Context) error {
		return t.wait(ctx, t.next.Add(1)-1)
	})
}

// stuckInfo is for the stuck watcher (stuckOwner).
func (t *TicketMutex) stuckInfo() (string, *diag) { return "TicketMutex", &t.diag }

//go:noinline
func (t *TicketMutex) unlockSlow() { t.words().release("TicketMutex") }

// wait waits for ticket to be served, counting and reporting as the other
// locks do.
func (t *TicketMutex) wait(ctx context.Context, ticket uint32) error {
	if t.serving.Load() == ticket {
		t.uncontended() // free: we came only to be counted
		return nil
	}
	tr := t.trackNoted(t)
	if err := t.words().await(ctx, ticket, &tr, "TicketMutex"); err != nil {
		tr.abandoned()
		return err
	}
	tr.acquired()
	return nil
}
