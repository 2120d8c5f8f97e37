package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword"
	"sync/atomic"
	"time"
)

// Semaphore object layout (kind 10, 16512 bytes, 64-aligned;
// docs/abi.md): a Mutex (the guard) that serialises every change to
// the words after it, the semaphore's counts, then one entry per
// process-table slot saying what that slot's process holds and awaits.
const (
	semObjGuard       = 0   // 64 bytes: a Mutex object (kind 1 layout)
	semObjPermits     = 64  // uint32: the capacity; 0 until the first handle records it
	semObjInUse       = 68  // uint32: permits held, = the sum of the entries' held outside the guard
	semObjSeq         = 72  // uint32: bit 0 sleepers; bits 1-31 bumped by every change a waiter may await
	semObjNext        = 76  // uint32: the next ticket to draw (0 is skipped: it means "none")
	semObjWaiters     = 80  // uint32: entries with a ticket
	semObjDeadHolders = 84  // uint32: dead processes whose permits or ticket were taken back (wraps)
	semObjRecovered   = 88  // uint64: permits taken back from dead processes, in all
	semObjDeadPID     = 96  // uint32: the last dead holder's PID, 0 if unknown
	semObjSlots       = 128 // the entries, one per process-table slot
	semSlotSize       = 16
	semObjSize        = semObjSlots + regionProcSlots*semSlotSize

	// Entry fields, at semObjSlots + semSlotSize*slot.
	semSlotHeld   = 0  // uint32: permits the slot's incarnation holds
	semSlotToken  = 4  // uint32: the owner token of that incarnation; 0 when it holds and awaits nothing
	semSlotTicket = 8  // uint32: its waiter's ticket; 0: none waits
	semSlotWant   = 12 // uint32: what that waiter asks for (for inspection)

	semSleepers = 1 // in seq: a waiter may sleep on it; whoever bumps it wakes the front ticket's
	semSeqOne   = 2 // one bump of seq
)

func semSlotOff(slot uint32) uint64 { return semObjSlots + semSlotSize*uint64(slot) }

// ErrPermitsMismatch is returned by (*Region).Semaphore when the region
// holds a semaphore of that name made with another number of permits.
var ErrPermitsMismatch = errors.New("lockword: shared semaphore exists with another number of permits")

// A Semaphore is a weighted counting semaphore in a Region, shared by
// every process that maps it: Acquire(ctx, k) takes k of its permits,
// waiting while fewer are free; Release(k) gives k back. Get one with
// (*Region).Semaphore.
//
// It is robust: permits are held by processes (process-table slots), not
// anonymously, as System V's SEM_UNDO keeps a per-process adjustment for
// the kernel to undo at exit. Each slot's entry records the permits its
// process holds and that process's owner token (regionowner.go). When a
// process dies holding k permits, they come back: an acquirer that finds
// too few permits free checks, every 10 ms (ownerCheckInterval, as a
// Mutex waiter does), whether the processes named in the entries
// live; a dead one's entry is cleared and its permits freed, once (the
// entry is cleared under the guard, so a second checker finds nothing), and
// safely across PID reuse (the token's generation and the process's start
// time name one incarnation). The acquirer that took them back is told:
// it returns a *SemaphoreOwnerDeadError (errors.Is lockword.ErrOwnerDead) naming the
// dead PID and the permits recovered, holding what it asked for. Every
// Open and Close of the region reaps the same way, under the same guard
// (so still once), without telling anyone: the permits come back even
// if nobody acquires (semaphorereclaim.go).
//
// No MarkConsistent: a semaphore protects no data of its own. What the
// dead process owned was a count, and the recovery restores the count
// exactly (the entry is the only record of those permits), so there is
// nothing left inconsistent for a caller to repair, and no later caller is
// refused: the error is a report, not a demand. Data that the permits
// guarded in the application is the application's to check; the error
// says whose death to check for.
//
// Every change happens under the guard, a Mutex embedded in the
// object (so it sleeps, is robust and is checked as one): its critical
// sections are a few stores. A holder of the guard that dies leaves the
// counts possibly half-updated; the next guard holder recomputes them from
// the entries (each entry field is one atomic store), which are the truth.
//
//	word     meaning
//	permits  capacity, written once (0 → N by the first handle)
//	in use   sum of the entries' held (recomputed after a guard owner death)
//	seq      bit 0: a waiter may sleep on seq (kept while a ticket
//	         queues); bits 1-31: bumped on every release, recovery, and
//	         waiter leaving the queue; each bump wakes the process of the
//	         front ticket only (FUTEX_WAKE_BITSET, the ticket's bit)
//	next     next ticket; waiters: entries with a ticket
//	entry s  held (by the incarnation named by token), token, ticket, want
//
// Waiting is FIFO by ticket across processes, and the tickets are per
// process: while any ticket waits, no newcomer in any process takes free
// permits (Acquire and TryAcquire queue behind it), and tickets are
// granted in the order they were drawn. But a process draws one ticket at
// a time: its first waiting goroutine draws it (for the process's entry)
// and sleeps in the kernel on seq; its other acquirers park behind it on
// an in-process lockword.Mutex, the gate, holding no ticket, and pass the
// gate in that Mutex's order (not strict FIFO: it hands off to a waiter
// that has waited 1 ms). So the exact guarantee is:
//
//   - once a request holds its ticket, it is granted after at most one
//     earlier request per other process (the tickets drawn before it:
//     each process holds at most one), as soon as their permits and its
//     own are free; no request that draws a ticket after it, in any
//     process, is granted before it, so a stream of small requests cannot
//     starve a large one;
//   - until then, while it waits at its own process's gate behind that
//     process's ticket holder, requests of other processes that draw
//     their tickets first are granted before it, including ones that
//     arrived after it; how many depends on scheduling (from the earlier
//     local request's grant until the gate's next holder draws a ticket,
//     one wake-up), not on a count. Conversely, a request queued in
//     another process is not overtaken by this process's gate waiters:
//     they queue behind its ticket.
//
// Across processes arrival order holds for the first waiter of each
// process; a process that needs it for every goroutine's request keeps
// one acquirer per process. A waiter whose context ends leaves the queue
// and wakes the new front if its request fits; a waiter that dies is
// dropped from the queue by the next checker, 10 ms or more after its
// death.
//
// Weights: Acquire(ctx, 0) returns nil; a negative weight or one above
// the capacity gets a *lockword.WeightError (lockword.ErrWeight). Release(k) of more
// permits than this process holds in the semaphore panics: holds are per
// process, so a process cannot release what another holds. Close refuses
// (ErrRegionBusy) while this process holds permits. What this process
// holds is also counted in Go memory, out of reach of stray writes to the
// region: misuse is judged on that count, so an entry that disagrees with
// it is corruption, not misuse, and Close and Held go by it.
//
// Memory model: a Release synchronizes before any Acquire (or successful
// TryAcquire) that obtains permits it released, across processes as within
// one: every change is made under the guard.
//
// Corruption: words that no valid history produces (in use above the
// capacity or unlike the entries' sum, an entry holding or awaiting more
// than the capacity, naming a token of another slot or an impossible
// generation; docs/abi.md lists the checks) make the call return a
// *lockword.CorruptError (lockword.ErrCorrupt) holding nothing, before any
// count is trusted; Release panics with it, its permits counted as given
// back; (*Region).Semaphore returns it rather than ErrPermitsMismatch. Errors
// of the guard name the Semaphore too; a guard word naming this process
// while none of its goroutines holds the guard is one of them, reported at
// once, not waited on (semaphoreguard.go). lockword inspect runs the same
// checks.
// Every call checks the counts and its own entry; every entry is checked
// by a process's first call, then every 10 ms or more, and before any
// reap.
// A waiter returns when its context ends, whatever the words hold.
type Semaphore struct {
	_     noCopy
	guard *Mutex
	obj   []byte
	me    []byte // this process's entry
	r     *Region
	name  string
	// gate queues this process's waiters: one at a time holds the
	// process's ticket.
	gate lockword.Mutex
	// local is held by the one goroutine of this process that takes or
	// holds the guard (semaphoreguard.go): a guard word naming this
	// process found by local's holder before it takes the guard is
	// corrupt, not another goroutine's hold.
	local lockword.Mutex
	// reapedNs is when this process last checked the entries' processes,
	// checkedNs when it last validated every word (monotonic ns).
	reapedNs, checkedNs atomic.Int64
	// held is the permits this process holds, as its calls returned
	// them, in Go memory that no stray write reaches: Release tells
	// misuse (more than held) from corruption (the entry disagrees), and
	// Close asks it, not the entry. The entry's held is at least this
	// between calls (it rises first and falls last).
	held atomic.Int64
}

// A SemaphoreOwnerDeadError is returned by Semaphore.Acquire (and
// TryAcquire's error form, AcquireNow) holding the permits asked for, when
// the call took back permits of processes that died holding them. It
// matches lockword.ErrOwnerDead; no MarkConsistent step follows (see
// Semaphore).
type SemaphoreOwnerDeadError struct {
	Semaphore, Region string
	// PID is the last dead holder's process ID, or 0 if it is unknown
	// (its process-table slot was reused before its death was noticed).
	PID int
	// Holders is how many dead processes the call found; Permits is how
	// many permits they held, now free again (or held by the caller).
	Holders int
	Permits int64
}

// Error names the semaphore, the dead process and the permits recovered.
func (e *SemaphoreOwnerDeadError) Error() string {
	return fmt.Sprintf("lockword: Semaphore %q in %s: %d permits taken back from %d dead process(es) (last PID %s); the caller holds the permits it asked for",
		e.Semaphore, e.Region, e.Permits, e.Holders, pidText(uint32(e.PID)))
}

// Is reports whether target is lockword.ErrOwnerDead.
func (e *SemaphoreOwnerDeadError) Is(target error) bool { return target == lockword.ErrOwnerDead }

// Semaphore returns the Semaphore named name with permits permits (1
// to lockword.MaxSemaphorePermits, else an error matching lockword.ErrWeight), creating it,
// with every permit free, if the region has no object of that name. Every
// call with the same name on one Region returns the same handle. It fails
// with ErrPermitsMismatch if the semaphore was made with another number of
// permits, and as (*Region).Mutex does otherwise (ErrObjectName,
// ErrObjectKind, ErrRegionFull, ErrRegionClosed).
func (r *Region) Semaphore(name string, permits int64) (*Semaphore, error) {
	if permits < 1 || permits > lockword.MaxSemaphorePermits {
		return nil, fmt.Errorf("%w: Semaphore %q: %d permits, want 1 to %d", lockword.ErrWeight, name, permits, int64(lockword.MaxSemaphorePermits))
	}
	s, err := handle(r, name, kindSemaphore, func(obj []byte) *Semaphore { return newSharedSemaphore(r, name, obj) })
	if err != nil {
		return nil, err
	}
	// The first handle anywhere records the capacity; a zero object is a
	// semaphore whose capacity nobody has recorded yet.
	// A corrupt object is reported as such, not as a mismatch.
	if reason := semValidate(s.obj, false, -1); reason != "" {
		return nil, s.errCorrupt("%s", reason)
	}
	c := word32(s.obj, semObjPermits)
	c.CompareAndSwap(0, uint32(permits))
	if got := c.Load(); got != uint32(permits) {
		return nil, fmt.Errorf("%w: %q in %s has %d, not %d", ErrPermitsMismatch, name, r.path, got, permits)
	}
	return s, nil
}

func newSharedSemaphore(r *Region, name string, obj []byte) *Semaphore {
	s := &Semaphore{guard: newSharedMutex(r, name, obj[semObjGuard:semObjGuard+mutexObjSize:semObjGuard+mutexObjSize]),
		obj: obj, r: r, name: name}
	if r.token != 0 {
		off := semSlotOff(r.slot)
		s.me = obj[off : off+semSlotSize : off+semSlotSize]
	}
	s.gate.SetStuckThreshold(-1)
	s.local.SetStuckThreshold(-1)
	return s
}

// holdsLock reports whether this process holds permits: Close refuses
// then. It asks Go memory, not the entry (a corrupt entry must not keep
// Close refusing forever), nor the guard, which only a call in progress
// holds (Close during a call is the caller's race, as for any handle).
func (s *Semaphore) holdsLock() bool { return s.held.Load() != 0 }

// Name returns the object's name in its region.
func (s *Semaphore) Name() string { return s.name }

// Capacity returns the number of permits the semaphore was made with. It
// panics with an error wrapping ErrRegionClosed after the region's Close.
func (s *Semaphore) Capacity() int64 {
	s.r.checkOpen("Semaphore", s.name, "Capacity")
	return s.capacity()
}

func (s *Semaphore) capacity() int64 { return int64(word32(s.obj, semObjPermits).Load()) }

// Held returns the permits this process holds: what its Acquire calls
// took and its Release calls have not given back (counted in Go memory,
// so a corrupt entry does not change it). It panics with an error
// wrapping ErrRegionClosed after the region's Close, as every call on a
// closed region's handle does.
func (s *Semaphore) Held() int64 {
	s.r.checkOpen("Semaphore", s.name, "Held")
	return s.held.Load()
}

// Acquire takes n permits, waiting until they are free and every earlier
// waiter has been served, or until ctx is done (it takes free permits
// even then, if nobody waits). It returns nil (n permits held), a
// *SemaphoreOwnerDeadError (n permits held; permits of dead processes
// were taken back on the way), ctx.Err() (nothing held), a *lockword.WeightError,
// a *lockword.CorruptError (nothing held), or, after the region's Close,
// an error wrapping ErrRegionClosed.
func (s *Semaphore) Acquire(ctx context.Context, n int64) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if err := s.r.errClosed("Semaphore", s.name, "Acquire"); err != nil {
		return err
	}
	if err := s.weight(n); err != nil || n == 0 {
		return err
	}
	took, err := s.tryTake(ctx, uint32(n))
	if !took && err == nil {
		err = s.acquireSlow(ctx, uint32(n))
	}
	s.count(n, err == nil || errors.Is(err, lockword.ErrOwnerDead))
	return err
}

// count adds n to the permits this process holds if the call that took
// them reports them held. One that took them but returns a CorruptError
// (the guard overwritten while held) told its caller it holds nothing:
// they are not counted, and stay recorded in the entry only until this
// process detaches (another process's reap then frees them).
func (s *Semaphore) count(n int64, held bool) {
	if held {
		s.held.Add(n)
	}
}

// TryAcquire takes n permits if they are free and nobody waits, without
// waiting for them, and reports whether it did (false for a bad weight or
// a corrupt semaphore; it panics with an error wrapping ErrRegionClosed
// after the region's Close, as TryLock does). It waits for the guard (a critical section of a
// few stores, or 10 ms and more if the guard's holder died in it). Permits
// taken back from a dead process on the way are not reported: use
// AcquireNow for that.
func (s *Semaphore) TryAcquire(n int64) bool {
	s.r.checkOpen("Semaphore", s.name, "TryAcquire")
	took, err := s.AcquireNow(n)
	return took && (err == nil || errors.Is(err, lockword.ErrOwnerDead))
}

// AcquireNow is TryAcquire with its error: a *SemaphoreOwnerDeadError
// (took true) when it took back a dead process's permits, a *lockword.WeightError
// or a *lockword.CorruptError (took false), and an error wrapping
// ErrRegionClosed after the region's Close.
func (s *Semaphore) AcquireNow(n int64) (took bool, err error) {
	if err := s.r.errClosed("Semaphore", s.name, "AcquireNow"); err != nil {
		return false, err
	}
	if err := s.weight(n); err != nil || n == 0 {
		return err == nil, err
	}
	took, err = s.tryTake(context.Background(), uint32(n))
	took = took && (err == nil || errors.Is(err, lockword.ErrOwnerDead))
	s.count(n, took)
	return took, err
}

// tryTake takes n permits under the guard if they are free and nobody
// waits; with nobody waiting and too few free, it first takes back what
// dead processes hold (at most once per ownerCheckInterval per process).
func (s *Semaphore) tryTake(ctx context.Context, n uint32) (bool, error) {
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	var rec semRecovery
	if err := s.check(); err != nil {
		return s.unlock(false, false, err)
	}
	waiters := word32(s.obj, semObjWaiters)
	if testBrokenSemNoFIFO {
		waiters = new(atomic.Uint32) // sees nobody waiting: takes past the queue
	}
	if waiters.Load() != 0 || !s.fits(n) {
		// Short, or behind waiters: any of them may be dead.
		if err := s.reapIfDue(&rec); err != nil || waiters.Load() != 0 || !s.fits(n) {
			return s.unlock(rec.entries != 0, false, err)
		}
	}
	s.take(n, &rec)
	return s.unlock(rec.entries != 0, true, rec.err(s))
}

// testBrokenSemNoFIFO, set by tests only, lets Acquire's and
// TryAcquire's first try take free permits past the waiters, so that the
// FIFO test is shown to fail without the queue's discipline.
var testBrokenSemNoFIFO bool

// testBrokenSemNoWake, set by tests only, leaves the sleepers of a bump
// asleep (until their 10 ms slice ends), so that the wake-latency test is
// shown to fail on a lost wake-up.
var testBrokenSemNoWake bool

// testBrokenSemWrongWake, set by tests only, makes a bump wake the ticket
// behind the front instead of the front, so that the wake-latency test is
// shown to fail on the wrong ticket's wake-up.
var testBrokenSemWrongWake bool

// Release gives back n permits that this process holds, and wakes the
// waiters if any sleep. It panics if n is negative or more than this
// process holds (Held: misuse, as sync panics), and with a
// *lockword.CorruptError if the words are corrupt (the entry records fewer
// permits than Held, or the counts or guard are impossible): then the n
// permits count as given back for this process (Held drops, Close does not
// refuse for them), and what the entry still records is freed once this
// process detaches, by another process's reap. After the region's Close it
// panics with an error wrapping ErrRegionClosed, as Unlock does.
func (s *Semaphore) Release(n int64) {
	s.r.checkOpen("Semaphore", s.name, "Release")
	if n == 0 {
		return
	}
	// Misuse is judged on Go memory, which no stray write reaches.
	for h := s.held.Load(); ; h = s.held.Load() {
		if n < 0 || n > h {
			panic(fmt.Sprintf("lockword: Release(%d) of more permits than this process holds (%d) in Semaphore %q", n, h, s.name))
		}
		if s.held.CompareAndSwap(h, h-n) {
			break
		}
	}
	if err := s.lock(context.Background()); err != nil {
		panic(err) // a CorruptError naming s (lock), or ErrRegionClosed
	}
	held := word32(s.me, semSlotHeld)
	if t := word32(s.me, semSlotToken).Load(); t != s.r.token || int64(held.Load()) < n {
		_, err := s.unlock(false, false, s.errCorrupt("Release(%d): this process's entry records %d permits for token %#x, but this process (token %#x) holds %d",
			n, held.Load(), t, s.r.token, s.held.Load()+n))
		panic(err)
	}
	// Release trusts only its own entry and the counts: it checks those.
	if reason := semValidate(s.obj, true, int(s.r.slot)); reason != "" {
		_, err := s.unlock(false, false, s.errCorrupt("%s", reason))
		panic(err)
	}
	held.Store(held.Load() - uint32(n))
	inUse := word32(s.obj, semObjInUse)
	inUse.Store(inUse.Load() - uint32(n))
	s.settle()
	if _, err := s.unlock(true, false, nil); err != nil {
		panic(err) // the guard was overwritten while held: the permits are back
	}
}

func (s *Semaphore) weight(n int64) error {
	if c := s.capacity(); n < 0 || n > c {
		return &lockword.WeightError{N: n, Capacity: uint32(c)}
	}
	return nil
}

// bumpSeq bumps seq, under the guard, and returns the futex bits to wake
// (0: none): those of the front ticket, if a waiter may sleep and the
// front's request fits. Only the front can go after any change (a waiter
// takes only once no earlier ticket waits, and only what fits), and every
// change that could let it go (permits freed; the front taking, leaving
// or being reaped) bumps again, after which this looks again: so at most
// one process is woken per change, not every process's sleeper. The
// sleepers bit stays set while a ticket is queued, since the waiters
// behind the front sleep on through this bump.
func (s *Semaphore) bumpSeq() uint32 {
	seq := word32(s.obj, semObjSeq)
	old := seq.Load()
	v, bits := old+semSeqOne, uint32(0)
	if old&semSleepers != 0 {
		switch front, want := s.front(); {
		case front == 0:
			v &^= semSleepers // nobody queued: nobody sleeps
		case testBrokenSemWrongWake:
			bits = ticketBit(front + 1) // the ticket behind the front (or none): a lost wake-up
		case s.fits(want):
			bits = ticketBit(front)
		}
	}
	seq.Store(v)
	return bits
}

// front returns, under the guard, the earliest ticket in the queue and
// what its waiter wants (0, 0: none; tickets compare modulo 2^32, as in
// behind).
func (s *Semaphore) front() (ticket, want uint32) {
	if word32(s.obj, semObjWaiters).Load() == 0 {
		return 0, 0
	}
	for slot := range uint32(regionProcSlots) {
		off := semSlotOff(slot)
		t := word32(s.obj, off+semSlotTicket).Load()
		if t != 0 && (ticket == 0 || int32(t-ticket) < 0) {
			ticket, want = t, word32(s.obj, off+semSlotWant).Load()
		}
	}
	return ticket, want
}

// fits reports, under the guard, whether n more permits are free.
func (s *Semaphore) fits(n uint32) bool {
	return uint64(word32(s.obj, semObjInUse).Load())+uint64(n) <= uint64(word32(s.obj, semObjPermits).Load())
}

// take records, under the guard, n permits held by this process; a
// previous incarnation of our slot that still holds or waits (it died:
// we have its slot) is taken back first.
func (s *Semaphore) take(n uint32, rec *semRecovery) {
	s.own(rec)
	held := word32(s.me, semSlotHeld)
	held.Store(held.Load() + n)
	inUse := word32(s.obj, semObjInUse)
	inUse.Store(inUse.Load() + n)
}

// own makes, under the guard, our entry name this process: a previous
// incarnation of our slot that still holds or waits there died (we have
// its slot), and is taken back first.
func (s *Semaphore) own(rec *semRecovery) {
	tok := word32(s.me, semSlotToken)
	if t := tok.Load(); t != s.r.token {
		if t != 0 {
			s.reclaim(s.r.slot, 0, rec)
		}
		tok.Store(s.r.token)
	}
}

// settle clears our entry's token once it holds and awaits nothing, so
// that attach may reissue the generation and inspect shows no holder.
func (s *Semaphore) settle() {
	if word32(s.me, semSlotHeld).Load() == 0 && word32(s.me, semSlotTicket).Load() == 0 {
		word32(s.me, semSlotToken).Store(0)
	}
}

// semRecovery accumulates what one call took back from dead processes.
type semRecovery struct {
	entries int // entries cleared: holders and waiters
	holders int // of which held permits
	permits int64
	pid     uint32
}

func (rec *semRecovery) err(s *Semaphore) error {
	if rec.holders == 0 {
		return nil
	}
	return &SemaphoreOwnerDeadError{Semaphore: s.name, Region: s.r.path, PID: int(rec.pid), Holders: rec.holders, Permits: rec.permits}
}

// reclaim clears, under the guard, the entry of slot, whose incarnation is
// dead (pid: its PID, 0 if unknown): its permits are freed and its ticket
// leaves the queue. Each field is one store, so a guard holder dying in
// the middle leaves entries that recount reads right.
func (s *Semaphore) reclaim(slot, pid uint32, rec *semRecovery) {
	e := s.obj[semSlotOff(slot):][:semSlotSize]
	h := word32(e, semSlotHeld).Load()
	if word32(e, semSlotTicket).Load() != 0 {
		word32(e, semSlotTicket).Store(0)
		waiters := word32(s.obj, semObjWaiters)
		waiters.Store(waiters.Load() - 1)
	}
	word32(e, semSlotHeld).Store(0)
	word32(e, semSlotToken).Store(0)
	inUse := word32(s.obj, semObjInUse)
	inUse.Store(inUse.Load() - h)
	word32(s.obj, semObjDeadHolders).Add(1)
	rec.entries++
	if h != 0 {
		word64(s.obj, semObjRecovered).Add(uint64(h))
		word32(s.obj, semObjDeadPID).Store(pid)
		rec.holders++
		rec.permits += int64(h)
		rec.pid = pid
	}
}

// reapIfDue takes back, under the guard, the entries of dead processes,
// if this process has not looked for ownerCheckInterval.
func (s *Semaphore) reapIfDue(rec *semRecovery) error {
	now := monoNowNs()
	if now-s.reapedNs.Load() < int64(ownerCheckInterval) {
		return nil
	}
	s.reapedNs.Store(now)
	return s.reap(rec)
}

// reap takes back, under the guard, the entries of dead processes (a
// /proc look-up per entry of another process), once every word is valid.
func (s *Semaphore) reap(rec *semRecovery) error {
	if reason := semValidate(s.obj, true, -1); reason != "" {
		return s.errCorrupt("%s", reason)
	}
	for slot := range uint32(regionProcSlots) {
		e := s.obj[semSlotOff(slot):][:semSlotSize]
		t := word32(e, semSlotToken).Load()
		if t == 0 || t == s.r.token {
			continue
		}
		if alive, pid := s.r.tokenAlive(t); !alive {
			s.reclaim(slot, pid, rec)
		}
	}
	return nil
}

// recount sets, under a guard taken from a dead holder, the counts from
// the entries, which are the truth (each entry field is written with one
// store; the counts follow them). It fixes nothing in the entries: reap
// and check find what is wrong there.
func (s *Semaphore) recount() {
	var held uint64
	var waiters uint32
	for slot := range uint32(regionProcSlots) {
		e := s.obj[semSlotOff(slot):][:semSlotSize]
		held += uint64(word32(e, semSlotHeld).Load())
		if word32(e, semSlotTicket).Load() != 0 {
			waiters++
		}
	}
	word32(s.obj, semObjInUse).Store(uint32(min(held, 1<<32-1)))
	word32(s.obj, semObjWaiters).Store(waiters)
}

// check validates, under the guard, the counts and this process's entry,
// and every word (semValidate) on this process's first call, then at
// least every ownerCheckInterval, as reap looks at the entries: a full
// check reads 16 KiB. reap runs a full one before trusting any entry.
func (s *Semaphore) check() error {
	only := int(s.r.slot)
	if now := monoNowNs(); s.r.token == 0 || now-s.checkedNs.Load() >= int64(ownerCheckInterval) {
		s.checkedNs.Store(now)
		only = -1
	}
	if reason := semValidate(s.obj, true, only); reason != "" {
		s.checkedNs.Store(0) // stays corrupt: check it all again
		return s.errCorrupt("%s", reason)
	}
	return nil
}

func (s *Semaphore) errCorrupt(format string, args ...any) error {
	return &lockword.CorruptError{Kind: "Semaphore", Object: s.name, Region: s.r.path, Reason: fmt.Sprintf(format, args...)}
}

// SetStuckThreshold sets how long a waiter of this process waits for the
// guard before it logs a stuck report (see Mutex.SetStuckThreshold).
func (s *Semaphore) SetStuckThreshold(threshold time.Duration) {
	s.guard.SetStuckThreshold(threshold)
}

func init() {
	owners := []uint32{semObjGuard + mutexObjWord}
	for slot := range uint32(regionProcSlots) {
		owners = append(owners, uint32(semSlotOff(slot))+semSlotToken)
	}
	registerKind(kindSemaphore, &kindInfo{
		name: "semaphore", size: semObjSize, align: 64,
		ownerWords: owners,
		inspect:    inspectSemaphore,
	})
}
