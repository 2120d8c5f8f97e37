package shm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

// Lock word of Mutex (and of any later robust kind: the owner token
// layout, bits 0-27, is regionowner.go's):
//
//	bits   meaning
//	0-17   owner generation: with the slot, the owner token; 0 when free
//	18-27  owner slot in the region's process table
//	28     statistics enabled: fast paths fail, slow paths count (shared)
//	29     inconsistent: taken from a dead owner, MarkConsistent not yet called
//	30     waiters: a process may sleep in the kernel; Unlock must FUTEX_WAKE
//	31     timed: the object's held-since stamp describes this hold
const (
	sharedStats        = 1 << 28
	sharedInconsistent = 1 << 29
	sharedWaiters      = 1 << 30
	sharedTimed        = 1 << 31
)

// Mutex object layout in a region (kind 1, 64 bytes, 64-aligned: one
// cache line, so two locks never share one). See docs/abi.md.
const (
	mutexObjSize      = 64
	mutexObjWord      = 0  // uint32: the lock word
	mutexObjGiveUps   = 4  // uint32: statistics: LockContext calls that waited and gave up (wrapping)
	mutexObjHeldSince = 8  // uint64: CLOCK_MONOTONIC ns at or just after the hold began; valid while sharedTimed
	mutexObjAcquired  = 16 // uint64: statistics, all processes together
	mutexObjSlow      = 24 // uint64
	mutexObjParks     = 32 // uint64: kernel sleeps
	mutexObjWaitNs    = 40 // uint64
	mutexObjWaitMaxNs = 48 // uint64
	mutexObjHandoff   = 56 // uint32: the hand-off word (sharedhandoff.go)
	// uint32: statistics: the longest give-up's wait in µs (saturating).
	// The object has no room left for a total.
	mutexObjGiveUpMaxUs = 60
)

// Waiting tuning for Mutex. A waiter spins as Mutex does (the holder
// is usually running in another process on another core), then sleeps in
// the kernel in slices of ownerCheckInterval, checking between slices
// whether the holder process still lives, so a holder killed while holding
// is noticed one slice after its death plus the time the waiter needs to
// get a CPU: about 10 ms on an idle host, with a tail set by the
// scheduler on a loaded one (README gives measured figures). A check reads /proc/PID/stat,
// some 10 µs: a hundred a second cost a waiting process 0.1% of a core.
const (
	sharedSpinIterations = 8
	sharedSpinPause      = 64
	ownerCheckInterval   = 10 * time.Millisecond
)

// A Mutex is a mutual exclusion lock in a Region, shared by every
// process that maps the region, and robust: when a holder process dies
// while holding it, the next acquirer is told (ErrOwnerDead) and may repair
// the data, as with a POSIX PTHREAD_MUTEX_ROBUST mutex. Get one with
// (*Region).Mutex. Its lock word, a uint32 at offset 0 of its 64-byte
// object (docs/abi.md gives the whole object and every transition):
//
//	bits   meaning
//	0-17   owner generation: with the slot, the owner token; 0 when free
//	18-27  owner slot in the region's process table
//	28     statistics enabled: fast paths fail, slow paths count
//	29     inconsistent: taken from a dead owner, MarkConsistent not yet called
//	30     waiters: a process may sleep in the kernel; Unlock must FUTEX_WAKE
//	31     timed: the object's held-since stamp describes this hold
//
//	word                        state
//	0                           unlocked
//	token                       locked by the token's process
//	token | waiters             locked, a process may sleep
//	token | inconsistent        locked after an owner death, not yet repaired
//	bits 0-27 all ones          not recoverable (ErrNotRecoverable)
//
// Beside it, the hand-off word, a uint32 at offset 56 (offset 60 reserved):
//
//	h                   state
//	0                   no request
//	T                   process T's kernel sleeper has waited 1 ms and asks
//	                    for the lock: Unlock hands it to T
//	T | 1<<31           handed to T: the word names T (or, for a moment,
//	                    still the granter), and T has not yet returned
//	bits 28-30 set, or  corrupt (ErrCorrupt)
//	T not a valid token
//
// # Protocol
//
// Lock's fast path is one CAS of the whole word from 0 to this process's
// owner token; Unlock's is one CAS back to 0. A contended acquirer spins
// briefly, then sets the waiters bit and sleeps on the word with the kernel
// futex in its shared flavour (any process may wake it); Unlock from a word
// with the waiters bit wakes one sleeper, which then takes the lock with the
// waiters bit set, as in Drepper's mutex ("Futexes Are Tricky", 2011,
// mutex #3), so a sleeper is never forgotten. Within one process goroutines
// queue locally first (a process-local Mutex, which parks goroutines), so at
// most one goroutine per process per lock sleeps in the kernel and a
// thousand waiting goroutines cost one OS thread, not a thousand.
//
// # Fairness: the hand-off
//
// A woken sleeper races running acquirers, and a process that re-locks in a
// tight loop would win every race. So, as sync.Mutex (Go 1.9) and Mutex do,
// a waiter that has waited 1 ms stops racing: the process's kernel sleeper
// files a request in the hand-off word (CAS 0 → its token T; one request at
// a time, and one that names a dead process may be replaced), makes sure the
// waiters bit is set, so that the next Unlock takes its slow path, and sleeps
// on the hand-off word. The fast paths do not change. Unlock's slow path,
// finding a request, grants it (CAS T → T|granted) and then moves the lock
// word from its own token to T (keeping the waiters and statistics bits)
// instead of to 0, and wakes the hand-off word. T, woken, holds the lock
// once the word names it: it clears the hand-off word and returns. So a
// waiter past 1 ms gets the lock at the next Unlock, or at the Unlock after
// the one other request ahead of it: the bound is structural, not a race.
//
// A hand-off survives the death of either side. T dead after the grant
// leaves the word naming a dead T with the hand-off word T|granted: T had
// not returned to a caller holding the lock, so the data is as the last
// Unlock left it, and the next waiter that proves T dead (its 10 ms check)
// takes the lock without ErrOwnerDead or the inconsistent bit. U dead
// between its two CASes leaves the word naming a dead U with T|granted:
// that is reported as an owner death (U died in Unlock, still holding),
// because a grant to another process proves nothing about the dead
// holder's hold: a build without the hand-off, taking over from a dead
// grantee, leaves its grant behind. Every take-over from a dead holder
// clears the grant. A request whose waiter leaves (its context ended) is
// withdrawn (CAS T → 0); one found granted is kept: the lock is taken. An
// Unlock that released the word without seeing a request filed meanwhile
// (the request's store and the release CAS passed each other) withdraws it
// for its waiter and wakes it, which then looks at the word again (a Dekker
// pair: the requester stores h, then reads the word; Unlock writes the
// word, then reads h). TryLock takes only a free word, and a granted lock
// is never free, so it cannot overtake a hand-off.
//
// # Owner identity
//
// The word holds an owner token, (process-table slot, generation), not a
// PID. A process claims a slot when it opens the region, before it can take
// any lock, and fills the slot's identity (PID, start time from
// /proc/PID/stat, boot ID) before publishing the slot as live with a new
// generation, under the region's file lock. So whenever a lock word names
// (slot, generation), the identity behind it is complete: there is no
// window, as there is when a PID goes into the word by CAS and a start time
// into another field afterwards, in which a holder killed between the two
// stores leaves a stale start time that makes a checker either rob a live
// process or wait on a dead one forever.
//
// A waiter decides "dead" only on proof: the slot no longer carries the
// token's generation (reclaimed, which requires its process to have been
// found dead, or detached, which Close refuses while holding), or the
// slot's process is gone, a zombie, or a different incarnation (another
// start time or boot). PIDs are looked up only in the PID namespace that
// the region records for its processes (see Region): where that is
// unknown, a holder of this boot is never declared dead by PID. A reused PID therefore never makes a dead holder
// look alive, and a stopped or slow holder is never robbed, however long it
// holds: waiters report it instead (a log/slog warning naming the lock, the
// holder PID and how long they have waited, past the stuck threshold). The
// slot's generation advances on every attach and skips any value that a
// lock word in the region still names, so a stale token is never reissued.
//
// We do not use the kernel's robust-futex list: it is per thread, goroutines
// migrate between threads, and it records thread IDs, which the kernel
// clears from the word when it marks a dead owner. Instead a sleeping waiter
// wakes every ownerCheckInterval to check the holder. A dead holder is
// noticed at a waiter's next liveness check, made every 10 ms whenever the
// waiter gets a CPU: about 10 ms after the death when CPUs are free, later
// as the load grows (2 cores, p99: 12 ms at load 5-9, 28-92 ms at load
// 9-23, 1.2 s at load 24-32). README has the runs.
//
// # Owner death and sync.Locker
//
// No path acquires a lock whose holder died without telling the caller:
//
//   - LockContext returns ErrOwnerDead with the lock held (repair, then
//     MarkConsistent, then Unlock), or ErrNotRecoverable without it. Use it
//     in code that can repair the protected data.
//   - Lock (and so sync.Locker) cannot return an error. If a repair function
//     was set with SetRepair, Lock runs it on an owner death while holding
//     the lock and marks the lock consistent when it returns nil; otherwise,
//     or if it fails (or panics), Lock unlocks without marking, which makes
//     the lock not recoverable for every process, and panics with an error
//     that wraps ErrOwnerDead and ErrNotRecoverable. Giving the lock up
//     first matters: a recovered panic (net/http recovers its handlers')
//     must not leave a live process holding it forever, where no waiter
//     would ever take it. Lock panics with ErrNotRecoverable likewise. So a
//     sync.Locker user either declared how to repair, or stops.
//   - TryLock never waits and never inspects the holder: it takes a free
//     lock or reports false (also for a not-recoverable lock).
//
// Getting out of ErrNotRecoverable: a lock becomes not recoverable when a
// holder that took it from a dead owner unlocks without MarkConsistent, so
// nothing vouches for the data any more. Restore the data by other means,
// then call Reinitialize (it refuses while any process holds the lock);
// or use a new object name; or remove the region (Remove, once no
// live process is attached) and create a new one.
//
// # Memory model
//
// The n'th call to Unlock synchronizes before the m'th call to Lock (or
// successful TryLock or LockContext) for any n < m, across processes as
// within one: the word is changed only by sequentially consistent atomics
// on the shared mapping.
//
// A Mutex belongs to one Region handle; ownership is per process (per
// handle), not per goroutine: any goroutine of the holding process may
// Unlock through that handle. Unlock through a handle that does not hold
// it panics, a second handle of the same process included.
type Mutex struct {
	_       noCopy
	word    *atomic.Uint32 // in the mapping
	handoff *atomic.Uint32 // in the mapping: the hand-off word
	token   uint32         // our owner token
	obj     []byte         // the object's bytes in the mapping
	r       *Region
	name    string
	// gate queues this process's slow-path waiters, parked as goroutines,
	// so that only its holder sleeps in the kernel.
	gate    lockword.Mutex
	stuckNs atomic.Int64 // 0: DefaultStuckThreshold; <0: never
	stuck   stuckEpisode
	repair  atomic.Pointer[func() error]
	// waitsFor1 is 1 + the object's table index: what our kernel
	// sleeper records as the lock it waits for (waitsfor.go).
	waitsFor1 uint32
}

var _ interface {
	Lock()
	Unlock()
} = (*Mutex)(nil)

// Mutex returns the Mutex named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName), creating it,
// unlocked, if the region has no object of that name. Every call with the
// same name on one Region returns the same *Mutex. It fails with
// ErrObjectKind if name is an object of another kind, ErrRegionFull if
// there is no room, ErrRegionClosed after Close.
func (r *Region) Mutex(name string) (*Mutex, error) {
	return handle(r, name, kindMutex, func(obj []byte) *Mutex { return newSharedMutex(r, name, obj) })
}

func newSharedMutex(r *Region, name string, obj []byte) *Mutex {
	m := &Mutex{word: word32(obj, mutexObjWord), handoff: word32(obj, mutexObjHandoff), token: r.token, obj: obj, r: r, name: name,
		waitsFor1: r.tableIndex1(r.objects[name].offset)}
	// The gate's own stuck reports would speak of an unnamed in-process
	// Mutex; the Mutex reports instead, naming the holder process.
	m.gate.SetStuckThreshold(-1)
	return m
}

// holdsLock reports whether this process holds m: Close refuses then.
func (m *Mutex) holdsLock() bool { return m.word.Load()&ownerMask == m.r.token }

func init() {
	registerKind(kindMutex, &kindInfo{
		name: "mutex", size: mutexObjSize, align: mutexObjSize,
		ownerWords: []uint32{mutexObjWord},
		inspect:    inspectMutex,
	})
}

// Lock locks m, waiting until it is available. On an owner death it runs
// the repair function (SetRepair) and marks m consistent. Without one, or
// if it fails, Lock unlocks m unrepaired, which makes it not recoverable
// for every process (ErrNotRecoverable from then on), and panics with an
// error wrapping ErrOwnerDead and ErrNotRecoverable (or, if the repair
// function panicked, with its panic). So neither its return nor its panic
// leaves the caller holding a lock whose data was not repaired. It panics
// with ErrNotRecoverable on a lock that is not recoverable.
func (m *Mutex) Lock() {
	if m.word.CompareAndSwap(0, m.token) {
		return
	}
	m.lockSlowLocker()
}

// TryLock tries to lock m without waiting and reports whether it did. It
// returns false for a held lock, whether its holder lives or not, and for a
// not-recoverable lock (LockContext says which).
func (m *Mutex) TryLock() bool {
	if m.word.CompareAndSwap(0, m.token) {
		return true
	}
	return m.tryLockSlow()
}

// LockContext locks m, waiting until it is available or ctx is done. If
// the lock is free it is taken even when ctx is already done; with a done
// context a held lock is checked once for a dead holder, which makes
// LockContext(doneCtx) a TryLock that reports owner death. It returns:
//
//   - nil: the caller holds the lock;
//   - an *OwnerDeadError (errors.Is(err, ErrOwnerDead)): the caller holds
//     the lock, whose previous holder died; repair the data, call
//     MarkConsistent, Unlock;
//   - an error wrapping ErrNotRecoverable: the caller does not hold it;
//   - ctx.Err() (errors.Is with context.Canceled or DeadlineExceeded): the
//     caller does not hold it.
func (m *Mutex) LockContext(ctx context.Context) error {
	if ctx != nil && m.word.CompareAndSwap(0, m.token) {
		return nil
	}
	return m.lockSlow(ctx)
}

// Unlock unlocks m. If m was taken from a dead owner and MarkConsistent was
// not called, it becomes not recoverable. Unlock panics if this handle
// does not hold m ("lockword: Unlock of unlocked Mutex", "... held
// by another process", or "... held through another Region handle in this
// process").
func (m *Mutex) Unlock() {
	// Fast path: held by us, no waiters, no flags.
	if m.word.CompareAndSwap(m.token, 0) {
		return
	}
	m.unlockSlow()
}

// MarkConsistent declares that the data protected by m, taken with
// ErrOwnerDead, has been repaired (POSIX pthread_mutex_consistent). It
// returns an error if this process does not hold m; on a lock that is not
// inconsistent it does nothing.
func (m *Mutex) MarkConsistent() error {
	if err := m.r.errClosed("shm.Mutex", m.name, "MarkConsistent"); err != nil {
		return err
	}
	for range retryLimit { // a CAS fails only if waiters or the stamp bit came
		w := m.word.Load()
		if w&ownerMask != m.token {
			return fmt.Errorf("lockword: MarkConsistent of shm.Mutex %q, which this process does not hold", m.name)
		}
		if w&sharedInconsistent == 0 || m.word.CompareAndSwap(w, w&^sharedInconsistent) {
			return nil
		}
	}
	return m.errCorrupt("lock word keeps changing under its holder")
}

func (m *Mutex) errCorrupt(format string, args ...any) error {
	return &lockword.CorruptError{Kind: "shm.Mutex", Object: m.name, Region: m.r.path, Reason: fmt.Sprintf(format, args...)}
}

// Reinitialize makes a not-recoverable m usable again: unlocked and
// consistent, for every process. It is the one way out of
// ErrNotRecoverable short of a new region (or a new object name): call it
// once the data the lock protects has been restored by other means (from
// a durable copy, say), since the lock itself can no longer vouch for it.
//
// It acts only on a not-recoverable lock, which no process holds or waits
// for (every acquisition fails at once), so resetting it strands nobody:
// it returns nil and does nothing if m is free, and an error wrapping
// ErrRegionBusy if m is held, by a live process or a dead one (a dead
// holder's lock is recovered through LockContext and ErrOwnerDead, not
// reinitialized). Statistics, if enabled, are kept.
func (m *Mutex) Reinitialize() error {
	if err := m.r.errClosed("shm.Mutex", m.name, "Reinitialize"); err != nil {
		return err
	}
	// The word changes under us only by a flag (stats on, inspect's timed
	// bit): a bounded number of retries, whatever the word holds.
	for range 100 {
		w := m.word.Load()
		switch owner := w & ownerMask; owner {
		case 0:
			return nil
		case ownerNotRecoverable:
		default:
			_, pid := m.r.tokenAlive(owner)
			return fmt.Errorf("%w: shm.Mutex %q is held (PID %s); Reinitialize acts only on a not-recoverable lock", ErrRegionBusy, m.name, pidText(pid))
		}
		if m.word.CompareAndSwap(w, w&sharedStats) {
			// No sleeper can be left (acquirers of a not-recoverable
			// lock return), but one that raced the transition must not
			// sleep on through the reset. A request left in the
			// hand-off word (corrupt or not) goes with it.
			m.handoff.Store(0)
			wakeShared(m.handoff, wakeAll)
			wakeShared(m.word, math.MaxInt32)
			return nil
		}
	}
	return fmt.Errorf("%w: shm.Mutex %q: its word kept changing", ErrRegionBusy, m.name)
}

// SetRepair sets the function that Lock runs, holding the lock, when it
// takes the lock from a dead owner; if it returns nil the lock is marked
// consistent. If it returns an error or panics, Lock unlocks without
// marking, so the lock becomes not recoverable, and panics (see Lock).
// TryLock never takes a lock from a dead owner, so never runs it, and
// LockContext returns ErrOwnerDead instead. A nil fn removes it. It is per
// handle: every process sets its own.
func (m *Mutex) SetRepair(fn func() error) { setRepair(&m.repair, fn) }

// Name returns the object's name in its region.
func (m *Mutex) Name() string { return m.name }

// SetStuckThreshold sets how long a waiter of this process waits before it
// logs one stuck report naming the holder's PID, then keeps waiting. Zero
// restores DefaultStuckThreshold; a negative duration disables reports.
func (m *Mutex) SetStuckThreshold(threshold time.Duration) {
	m.stuckNs.Store(int64(threshold))
}

// EnableStats starts collecting contention statistics for every process
// using m (the counters live in the region, so Stats and lockword inspect
// show all processes together). From then on every acquisition, in every
// process, takes the slow path.
func (m *Mutex) EnableStats() {
	m.r.checkOpen("shm.Mutex", m.name, "EnableStats")
	m.word.Or(sharedStats)
}

// Stats returns the statistics collected since EnableStats, summed over
// all processes. Parks counts sleeps in the kernel. GiveUpWaitTotal is
// not kept (0) and GiveUpWaitMax is to the microsecond: see Stats.
func (m *Mutex) Stats() lockword.Stats {
	m.r.checkOpen("shm.Mutex", m.name, "Stats")
	return sharedMutexStats(m.obj)
}

// detach points m's words away from the mapping as Close unmaps it: the
// fast paths fail on closedWord32 into the slow paths, which check first.
func (m *Mutex) detach() { m.word, m.handoff, m.obj = closedWord32, closedWord32, nil }

//go:noinline
func (m *Mutex) lockSlowLocker() {
	m.r.checkOpen("shm.Mutex", m.name, "Lock")
	m.afterLocker(m.lockSlow(context.Background()))
}

// afterLocker finishes Lock, which cannot return an error.
func (m *Mutex) afterLocker(err error) {
	repairAfterLocker(err, &m.repair, m.MarkConsistent, func() {
		if m.word.Load()&ownerMask == m.token {
			m.Unlock()
		}
	})
}

//go:noinline
func (m *Mutex) tryLockSlow() bool {
	m.r.checkOpen("shm.Mutex", m.name, "TryLock")
	w := m.word.Load()
	if w&ownerMask != 0 || !m.word.CompareAndSwap(w, w|m.token) {
		return false
	}
	if w&sharedStats != 0 {
		word64(m.obj, mutexObjAcquired).Add(1)
		m.stamp()
	}
	return true
}

//go:noinline
func (m *Mutex) unlockSlow() { m.release(false) }

// unlockInternal is Unlock for a Mutex that this package holds on its own
// account (a Semaphore's guard): a word that no longer names this handle
// was overwritten under the hold, by no caller of ours, so it returns a
// *lockword.CorruptError instead of panicking as misuse. Such a panic
// on a background goroutine (a cancelled waiter's withdrawal) would kill
// the process.
func (m *Mutex) unlockInternal() error {
	if m.word.CompareAndSwap(m.token, 0) {
		return nil
	}
	return m.release(true)
}

// release is Unlock's slow path; a word that does not name this handle
// panics as misuse, or, if internal, is returned as a CorruptError.
func (m *Mutex) release(internal bool) error {
	m.r.checkOpen("shm.Mutex", m.name, "Unlock")
	for i := 0; ; i++ {
		if i == retryLimit {
			// Only waiters and inspectors change a held word, once
			// each: one that keeps changing is being overwritten.
			slog.Warn("lockword: Unlock gave up on a lock word that keeps changing (corrupt)", "lock", m.name, "region", m.r.path)
			return nil
		}
		w := m.word.Load()
		if owner := w & ownerMask; owner != m.token {
			if internal {
				return m.errCorrupt("the word names %#x, not this handle, which holds it", owner)
			}
			m.unlockMisuse(owner)
		}
		if w&sharedInconsistent == 0 {
			if h := m.handoff.Load(); handoffRequest(h) {
				if h == m.token && gateIdle(&m.gate) {
					// Our own request, but no goroutine of ours
					// waits (the gate holder files requests, and
					// takes or withdraws before it lets the gate
					// go): a forged word. Granting it would leave
					// the word on us with nobody holding. Drop it.
					m.handoff.CompareAndSwap(h, 0)
				} else if m.grant(w, h) {
					return nil
				}
			}
		}
		next := w & sharedStats
		if w&sharedInconsistent != 0 {
			next |= ownerNotRecoverable
		}
		if !m.word.CompareAndSwap(w, next) {
			continue
		}
		// Released. A request filed after we looked (or, inconsistent,
		// one we must not grant) would wait for a grant that no Unlock
		// of this free word makes: withdraw it for its waiter and wake
		// it to look again.
		if h := m.handoff.Load(); handoffRequest(h) && m.handoff.CompareAndSwap(h, 0) {
			wakeShared(m.handoff, wakeAll)
		}
		switch {
		case w&sharedInconsistent != 0:
			// Everyone waiting must learn it is not recoverable.
			wakeShared(m.word, math.MaxInt32)
		case w&sharedWaiters != 0:
			wakeShared(m.word, 1)
		}
		return nil
	}
}

func (m *Mutex) unlockMisuse(owner uint32) {
	switch owner {
	case 0:
		panic(fmt.Sprintf("lockword: Unlock of unlocked shm.Mutex %q", m.name))
	case ownerNotRecoverable:
		panic(fmt.Sprintf("lockword: Unlock of not-recoverable shm.Mutex %q, which nobody holds", m.name))
	}
	alive, pid := m.r.tokenAlive(owner)
	if alive && int(pid) == m.r.pid() {
		// Our PID and start time, another slot: a second Region handle
		// of this process. Ownership is per handle.
		panic(fmt.Sprintf("lockword: Unlock of shm.Mutex %q held through another Region handle in this process (unlock through the handle that locked it)", m.name))
	}
	panic(fmt.Sprintf("lockword: Unlock of shm.Mutex %q held by another process (PID %s)", m.name, pidText(pid)))
}

// take tries to move a free word w to held by us, keeping the statistics
// flag and adding extra bits.
func (m *Mutex) take(w, extra uint32) bool {
	return w&ownerMask == 0 && m.word.CompareAndSwap(w, w&sharedStats|m.token|extra)
}

// stamp records when this hold began, for lockword inspect: store the time,
// then set the timed bit, so that a reader who sees the bit sees the time.
// The bit also sends Unlock down its slow path, which clears it.
func (m *Mutex) stamp() {
	word64(m.obj, mutexObjHeldSince).Store(uint64(monoNowNs()))
	m.word.Or(sharedTimed)
}

// errNotRecoverable wraps ErrNotRecoverable with the lock's name.
func (m *Mutex) errNotRecoverable() error {
	return fmt.Errorf("%w (lock %q in %s)", lockword.ErrNotRecoverable, m.name, m.r.path)
}

func (m *Mutex) lockSlow(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if err := m.r.errClosed("shm.Mutex", m.name, "LockContext"); err != nil {
		return err
	}
	m.r.waiting.Add(1)
	defer m.r.waiting.Add(-1)

	w := m.word.Load()
	stats := w&sharedStats != 0
	if m.take(w, 0) {
		// Free: we came here only to be counted.
		if stats {
			word64(m.obj, mutexObjAcquired).Add(1)
			m.stamp()
		}
		return nil
	}
	var start time.Time
	if stats {
		start = time.Now()
	}
	err := m.lockSlowWait(ctx, &start)
	switch {
	case !stats:
	case err == nil || errors.Is(err, lockword.ErrOwnerDead):
		countSlowAcquisition(m.obj, start)
	case isContextErr(err):
		countMutexGiveUp(m.obj, start)
	}
	return err
}

// inspectMutex describes a Mutex object (and the writers' lock of a
// region SeqLock) for Inspect: state, holder, how long the hold has
// lasted, statistics. A hold it sees for the first time whose start was not
// recorded (a fast-path acquisition) it stamps, unless the mapping is
// read-only.
func inspectMutex(insp *inspector, obj []byte, info *ObjectInfo) {
	// The hand-off word first: a grant seen and then a word naming a dead
	// holder means that holder had not returned the lock (read the other
	// way round, a take-back between the two reads would look like a
	// dead holder with no grant).
	h := word32(obj, mutexObjHandoff).Load()
	word := word32(obj, mutexObjWord)
	w := word.Load()
	info.Word = w
	info.Waiters = w&sharedWaiters != 0
	info.Inconsistent = w&sharedInconsistent != 0
	if w&sharedStats != 0 {
		s := sharedMutexStats(obj)
		info.Stats = &s
	}
	switch {
	case handoffCorrupt(h) != "":
		info.State, info.Reason = "corrupt", handoffCorrupt(h)
		return
	case h&handoffGranted != 0:
		// Plain take-back only if the grant names the holder itself.
		info.HandedOff = h&ownerMask == w&ownerMask
		info.Handoff = "handed to PID " + pidText(insp.check(h&ownerMask).pid)
	case h != 0:
		info.Handoff = "hand-off requested by PID " + pidText(insp.check(h&ownerMask).pid)
	}
	owner := w & ownerMask
	switch owner {
	case 0:
		info.State = "free"
		return
	case ownerNotRecoverable:
		info.State = "not-recoverable"
		return
	}
	if !validToken(owner) {
		info.State, info.Reason = "corrupt", fmt.Sprintf("owner token %#x names no incarnation (generation %d)", owner, tokenGen(owner))
		return
	}
	setHolder(info, insp.check(owner))
	since := word64(obj, mutexObjHeldSince)
	now := monoNowNs()
	if w&sharedTimed != 0 {
		info.HeldFor = time.Duration(max(now-int64(since.Load()), 0))
		info.HeldForKnown = true
		return
	}
	if insp.r.readOnly {
		return // cannot stamp: unknown
	}
	// Stamp "held since at most now": time first, then the bit, so that a
	// reader who sees the bit sees the time. If the word changed
	// meanwhile the CAS fails and nothing is claimed. If it succeeds, the
	// hold may still have begun after now (released and taken again with
	// the same token since we read w): stamp again, with a time after the
	// CAS, when this hold is known to have begun, so that the stamp
	// never precedes it.
	since.Store(uint64(now))
	if word.CompareAndSwap(w, w|sharedTimed) {
		since.Store(uint64(monoNowNs()))
		info.HeldForKnown = true
	}
}
