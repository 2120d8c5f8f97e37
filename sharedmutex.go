package lockword

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

// Lock word of SharedMutex (and of any later robust kind: the owner token
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

// SharedMutex object layout in a region (kind 1, 64 bytes, 64-aligned: one
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
	mutexObjHandoff   = 56 // uint32: the hand-off word (below)
	// uint32: statistics: the longest give-up's wait in µs (saturating).
	// The object has no room left for a total.
	mutexObjGiveUpMaxUs = 60
)

// Hand-off word of SharedMutex (object offset 56), which bounds a waiter's
// wait (see SharedMutex's Fairness):
//
//	bits   meaning
//	0-27   owner token of the process that asked for (or was given) the lock
//	28-30  0; any other value is corrupt
//	31     granted: the lock has been handed to that process
//
//	h                   state
//	0                   no request
//	T                   T's kernel sleeper has waited sharedStarveNs and asks
//	                    for the lock; every Unlock hands it over instead of
//	                    releasing
//	T | granted         handed to T: the lock word names T (or still the
//	                    granter, between its two CASes), and T has not yet
//	                    returned it to its caller
const (
	handoffGranted  = 1 << 31
	handoffReserved = 7 << 28
)

// sharedStarveNs is how long a SharedMutex waiter waits before it asks for a
// hand-off: Mutex's starvation bound (mutexStarveNs), and sync.Mutex's.
const sharedStarveNs = mutexStarveNs

// sharedHandoffHook, nil outside tests, lets a test turn hand-off requests
// off (it returns false), to show what the bound is worth.
var sharedHandoffHook func() bool

// Waiting tuning for SharedMutex. A waiter spins as Mutex does (the holder
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

// A SharedMutex is a mutual exclusion lock in a Region, shared by every
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
// or use a new object name; or remove the region (RemoveRegion, once no
// live process is attached) and create a new one.
//
// # Memory model
//
// The n'th call to Unlock synchronizes before the m'th call to Lock (or
// successful TryLock or LockContext) for any n < m, across processes as
// within one: the word is changed only by sequentially consistent atomics
// on the shared mapping.
//
// A SharedMutex belongs to one Region handle; ownership is per process (per
// handle), not per goroutine: any goroutine of the holding process may
// Unlock through that handle. Unlock through a handle that does not hold
// it panics, a second handle of the same process included.
type SharedMutex struct {
	_       noCopy
	word    *atomic.Uint32 // in the mapping
	handoff *atomic.Uint32 // in the mapping: the hand-off word
	token   uint32         // our owner token
	obj     []byte         // the object's bytes in the mapping
	r       *Region
	name    string
	// gate queues this process's slow-path waiters, parked as goroutines,
	// so that only its holder sleeps in the kernel.
	gate    Mutex
	stuckNs atomic.Int64 // 0: DefaultStuckThreshold; <0: never
	repair  atomic.Pointer[func() error]
}

var _ interface {
	Lock()
	Unlock()
} = (*SharedMutex)(nil)

// Mutex returns the SharedMutex named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName), creating it,
// unlocked, if the region has no object of that name. Every call with the
// same name on one Region returns the same *SharedMutex. It fails with
// ErrObjectKind if name is an object of another kind, ErrRegionFull if
// there is no room, ErrRegionClosed after Close.
func (r *Region) Mutex(name string) (*SharedMutex, error) {
	return handle(r, name, kindMutex, func(obj []byte) *SharedMutex { return newSharedMutex(r, name, obj) })
}

func newSharedMutex(r *Region, name string, obj []byte) *SharedMutex {
	m := &SharedMutex{word: word32(obj, mutexObjWord), handoff: word32(obj, mutexObjHandoff), token: r.token, obj: obj, r: r, name: name}
	// The gate's own stuck reports would speak of an unnamed in-process
	// Mutex; the SharedMutex reports instead, naming the holder process.
	m.gate.SetStuckThreshold(-1)
	return m
}

// holdsLock reports whether this process holds m: Close refuses then.
func (m *SharedMutex) holdsLock() bool { return m.word.Load()&ownerMask == m.r.token }

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
func (m *SharedMutex) Lock() {
	if m.word.CompareAndSwap(0, m.token) {
		return
	}
	m.lockSlowLocker()
}

// TryLock tries to lock m without waiting and reports whether it did. It
// returns false for a held lock, whether its holder lives or not, and for a
// not-recoverable lock (LockContext says which).
func (m *SharedMutex) TryLock() bool {
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
func (m *SharedMutex) LockContext(ctx context.Context) error {
	if ctx != nil && m.word.CompareAndSwap(0, m.token) {
		return nil
	}
	return m.lockSlow(ctx)
}

// Unlock unlocks m. If m was taken from a dead owner and MarkConsistent was
// not called, it becomes not recoverable. Unlock panics if this handle
// does not hold m ("lockword: Unlock of unlocked SharedMutex", "... held
// by another process", or "... held through another Region handle in this
// process").
func (m *SharedMutex) Unlock() {
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
func (m *SharedMutex) MarkConsistent() error {
	for range retryLimit { // a CAS fails only if waiters or the stamp bit came
		w := m.word.Load()
		if w&ownerMask != m.token {
			return fmt.Errorf("lockword: MarkConsistent of SharedMutex %q, which this process does not hold", m.name)
		}
		if w&sharedInconsistent == 0 || m.word.CompareAndSwap(w, w&^sharedInconsistent) {
			return nil
		}
	}
	return m.errCorrupt("lock word keeps changing under its holder")
}

func (m *SharedMutex) errCorrupt(format string, args ...any) error {
	return &CorruptError{Kind: "SharedMutex", Object: m.name, Region: m.r.path, Reason: fmt.Sprintf(format, args...)}
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
func (m *SharedMutex) Reinitialize() error {
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
			return fmt.Errorf("%w: SharedMutex %q is held (PID %s); Reinitialize acts only on a not-recoverable lock", ErrRegionBusy, m.name, pidText(pid))
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
	return fmt.Errorf("%w: SharedMutex %q: its word kept changing", ErrRegionBusy, m.name)
}

// SetRepair sets the function that Lock runs, holding the lock, when it
// takes the lock from a dead owner; if it returns nil the lock is marked
// consistent. If it returns an error or panics, Lock unlocks without
// marking, so the lock becomes not recoverable, and panics (see Lock).
// TryLock never takes a lock from a dead owner, so never runs it, and
// LockContext returns ErrOwnerDead instead. A nil fn removes it. It is per
// handle: every process sets its own.
func (m *SharedMutex) SetRepair(fn func() error) { setRepair(&m.repair, fn) }

// Name returns the object's name in its region.
func (m *SharedMutex) Name() string { return m.name }

// SetStuckThreshold sets how long a waiter of this process waits before it
// logs one stuck report naming the holder's PID, then keeps waiting. Zero
// restores DefaultStuckThreshold; a negative duration disables reports.
func (m *SharedMutex) SetStuckThreshold(threshold time.Duration) {
	m.stuckNs.Store(int64(threshold))
}

// EnableStats starts collecting contention statistics for every process
// using m (the counters live in the region, so Stats and lockword inspect
// show all processes together). From then on every acquisition, in every
// process, takes the slow path.
func (m *SharedMutex) EnableStats() { m.word.Or(sharedStats) }

// Stats returns the statistics collected since EnableStats, summed over
// all processes. Parks counts sleeps in the kernel. GiveUpWaitTotal is
// not kept (0) and GiveUpWaitMax is to the microsecond: see Stats.
func (m *SharedMutex) Stats() Stats { return sharedMutexStats(m.obj) }

//go:noinline
func (m *SharedMutex) lockSlowLocker() {
	m.afterLocker(m.lockSlow(context.Background()))
}

// afterLocker finishes Lock, which cannot return an error.
func (m *SharedMutex) afterLocker(err error) {
	repairAfterLocker(err, &m.repair, m.MarkConsistent, func() {
		if m.word.Load()&ownerMask == m.token {
			m.Unlock()
		}
	})
}

//go:noinline
func (m *SharedMutex) tryLockSlow() bool {
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
func (m *SharedMutex) unlockSlow() {
	for i := 0; ; i++ {
		if i == retryLimit {
			// Only waiters and inspectors change a held word, once
			// each: one that keeps changing is being overwritten.
			slog.Warn("lockword: Unlock gave up on a lock word that keeps changing (corrupt)", "lock", m.name, "region", m.r.path)
			return
		}
		w := m.word.Load()
		if owner := w & ownerMask; owner != m.token {
			m.unlockMisuse(owner)
		}
		if w&sharedInconsistent == 0 {
			if h := m.handoff.Load(); handoffRequest(h) {
				if h == m.token && m.gate.state.Load()&mutexStateMask == mutexUnlocked {
					// Our own request, but no goroutine of ours
					// waits (the gate holder files requests, and
					// takes or withdraws before it lets the gate
					// go): a forged word. Granting it would leave
					// the word on us with nobody holding. Drop it.
					m.handoff.CompareAndSwap(h, 0)
				} else if m.grant(w, h) {
					return
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
		return
	}
}

// handoffRequest reports whether h is a valid pending request (no grant).
func handoffRequest(h uint32) bool {
	return h != 0 && h&(handoffGranted|handoffReserved) == 0 && validToken(h)
}

// handoffCorrupt says what is impossible about hand-off word h, or "".
func handoffCorrupt(h uint32) string {
	switch t := h & ownerMask; {
	case h == 0:
		return ""
	case h&handoffReserved != 0:
		return fmt.Sprintf("hand-off word %#x has reserved bits 28-30 set", h)
	case !validToken(t):
		return fmt.Sprintf("hand-off word %#x names no incarnation (generation %d)", h, tokenGen(t))
	}
	return ""
}

// grant hands the lock, held by us as word w, to the requester named by
// request h. It reports false, changing nothing, if the request was
// withdrawn (or replaced) first: the caller then releases as usual.
func (m *SharedMutex) grant(w, h uint32) bool {
	// Grant first: from here the requester will take the word when it
	// names it, and a taker from a dead holder knows no caller held it.
	if !m.handoff.CompareAndSwap(h, h|handoffGranted) {
		return false
	}
	for range retryLimit { // a CAS fails only if a flag changed
		// Move the word to the requester, keeping waiters (others may
		// sleep) and statistics; the timed bit described our hold.
		if m.word.CompareAndSwap(w, w&(sharedStats|sharedWaiters)|h) {
			wakeShared(m.handoff, wakeAll)
			return true
		}
		w = m.word.Load()
		if w&ownerMask != m.token {
			break
		}
	}
	slog.Warn("lockword: Unlock could not hand the lock over: its word keeps changing (corrupt)", "lock", m.name, "region", m.r.path)
	return true
}

func (m *SharedMutex) unlockMisuse(owner uint32) {
	switch owner {
	case 0:
		panic(fmt.Sprintf("lockword: Unlock of unlocked SharedMutex %q", m.name))
	case ownerNotRecoverable:
		panic(fmt.Sprintf("lockword: Unlock of not-recoverable SharedMutex %q, which nobody holds", m.name))
	}
	alive, pid := m.r.tokenAlive(owner)
	if alive && int(pid) == m.r.pid() {
		// Our PID and start time, another slot: a second Region handle
		// of this process. Ownership is per handle.
		panic(fmt.Sprintf("lockword: Unlock of SharedMutex %q held through another Region handle in this process (unlock through the handle that locked it)", m.name))
	}
	panic(fmt.Sprintf("lockword: Unlock of SharedMutex %q held by another process (PID %s)", m.name, pidText(pid)))
}

// take tries to move a free word w to held by us, keeping the statistics
// flag and adding extra bits.
func (m *SharedMutex) take(w, extra uint32) bool {
	return w&ownerMask == 0 && m.word.CompareAndSwap(w, w&sharedStats|m.token|extra)
}

// stamp records when this hold began, for lockword inspect: store the time,
// then set the timed bit, so that a reader who sees the bit sees the time.
// The bit also sends Unlock down its slow path, which clears it.
func (m *SharedMutex) stamp() {
	word64(m.obj, mutexObjHeldSince).Store(uint64(monoNowNs()))
	m.word.Or(sharedTimed)
}

// errNotRecoverable wraps ErrNotRecoverable with the lock's name.
func (m *SharedMutex) errNotRecoverable() error {
	return fmt.Errorf("%w (lock %q in %s)", ErrNotRecoverable, m.name, m.r.path)
}

func (m *SharedMutex) lockSlow(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
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
	case err == nil || errors.Is(err, ErrOwnerDead):
		countSlowAcquisition(m.obj, start)
	case isContextErr(err):
		countMutexGiveUp(m.obj, start)
	}
	return err
}

// lockSlowWait spins, then queues behind the process-local gate and sleeps
// in the kernel, checking the holder's liveness between sleeps; once it has
// waited sharedStarveNs it asks for a hand-off (see SharedMutex's
// Fairness). start is when the wait began (set here if the caller did not).
func (m *SharedMutex) lockSlowWait(ctx context.Context, start *time.Time) error {
	// Spin: the holder is likely running in another process on another
	// core and about to release; a kernel sleep and wake costs microseconds.
	backoff := uint32(1)
	for range sharedSpinIterations {
		w := m.word.Load()
		if w&ownerMask == ownerNotRecoverable {
			return m.errNotRecoverable()
		}
		if m.take(w, 0) {
			if w&sharedStats != 0 {
				m.stamp()
			}
			return nil
		}
		procyield(backoff)
		backoff = min(2*backoff, sharedSpinPause)
	}

	began := time.Now() // the starvation clock: gate time counts
	// One goroutine per process goes on; the others park here.
	if err := m.gate.LockContext(ctx); err != nil {
		return err
	}
	defer m.gate.Unlock()

	if start.IsZero() {
		*start = began
	}
	slept := false
	reported := false
	requested := false     // the hand-off word holds our request or grant
	var checked time.Time  // when the holder was last checked; zero: never
	var hChecked time.Time // when another process's request was last checked
	var settling time.Time // when a done context found us granted, not yet named
	var holderPID uint32
	mine := m.token | handoffGranted
	for i := 1; ; i++ {
		w := m.word.Load()
		h := m.handoff.Load()
		owner := w & ownerMask
		switch {
		case h == m.token:
			// Ours. Only this goroutine, the gate holder, files our
			// requests, and a gate holder leaves none behind in any
			// valid history; adopting one left anyway (a forged word)
			// lets it be served rather than strand the lock on us.
			requested = true
		case h == mine && !requested:
			return m.forgedGrant(h)
		}
		if requested {
			switch {
			case h == mine && owner == m.token:
				// Handed to us: the word names us. Clear the grant
				// (only we move it now: the granter is done, and no
				// taker robs a live holder), then let one more sleeper
				// look, so that a second starving process can file its
				// request for the Unlock after ours.
				m.handoff.CompareAndSwap(mine, 0)
				m.stamp()
				if w&sharedWaiters != 0 {
					wakeShared(m.word, 1)
				}
				return nil
			case h != mine && h != m.token:
				// Withdrawn for us (a release that missed it, a
				// take-over, Reinitialize): wait and ask again.
				requested = false
			}
		}
		if reason := handoffCorrupt(h); reason != "" {
			return m.errCorrupt("%s", reason)
		}
		switch owner {
		case 0:
			// Take it marked waiters: we may have slept, and others may
			// still sleep; one spare wake-up costs little, a lost one hangs.
			if m.take(w, sharedWaiters) {
				if requested {
					// Free with our request pending (no Unlock saw
					// it): take it back. Nobody can grant it now:
					// only a holder grants, and we hold. (A grant of a
					// free word is no valid state: clear it too.)
					m.handoff.CompareAndSwap(m.token, 0)
					m.handoff.CompareAndSwap(mine, 0)
				}
				if slept || w&sharedStats != 0 {
					m.stamp()
				}
				return nil
			}
			// Lost the race to another taker (or the word changed):
			// a word that keeps changing must not outlast ctx.
			if i%retryCheckEvery == 0 && ctx.Err() != nil {
				m.withdraw(requested)
				return ctx.Err()
			}
			continue
		case ownerNotRecoverable:
			m.withdraw(requested)
			return m.errNotRecoverable()
		}
		if !validToken(owner) {
			m.withdraw(requested)
			return m.errCorrupt("owner token %#x names no incarnation (generation %d)", owner, tokenGen(owner))
		}
		granted := requested && h == mine // the granter is between its two CASes
		done := ctx.Err() != nil
		if owner != m.token && (done || (slept && time.Since(checked) >= ownerCheckInterval)) {
			alive, pid := m.r.tokenAlive(owner)
			checked = time.Now()
			holderPID = pid
			if !alive {
				if plain, ok := m.takeFromDead(w); ok {
					m.withdraw(requested) // we hold: no request left
					m.stamp()
					if plain {
						// Plain take-back: the dead holder never returned
						// the lock to a caller (see Fairness).
						return nil
					}
					return &OwnerDeadError{Lock: m.name, Region: m.r.path, PID: int(pid)}
				}
				continue
			}
		}
		if granted {
			// The lock is ours once the granter's second CAS lands, a
			// few instructions away; a done context cannot refuse it
			// (withdrawing now would leave the lock on our token with
			// nobody to know). Sleep briefly on the word, which that CAS
			// changes. A grant that the word does not follow for
			// handoffGrace after the context ended names a live holder
			// that is not handing over: a forged word.
			if done {
				if settling.IsZero() {
					settling = time.Now()
				} else if time.Since(settling) >= handoffGrace {
					return m.errCorrupt("the hand-off word %#x grants the lock to this process, but the lock word %#x still names a live holder (PID %s) %v later", h, w, pidText(holderPID), handoffGrace)
				}
			}
			slept = true
			sleepShared(context.Background(), m.word, w, handoffSettle)
			continue
		}
		if done {
			if requested && !m.handoff.CompareAndSwap(m.token, 0) {
				continue // granted meanwhile: take it (above)
			}
			if slept {
				// We may have consumed a wake-up meant for the next
				// waiter: pass it on.
				wakeShared(m.word, 1)
			}
			return ctx.Err()
		}
		if !requested && time.Since(began) >= sharedStarveNs && (sharedHandoffHook == nil || sharedHandoffHook()) {
			// Starving: ask for a hand-off, then look at the word again
			// before sleeping (the Dekker pair with Unlock's release).
			switch {
			case h == 0:
				requested = m.handoff.CompareAndSwap(0, m.token)
			case h&handoffGranted == 0 && h != m.token && time.Since(hChecked) >= ownerCheckInterval:
				// Another process's request: replace it only if that
				// process is dead (else it is served first).
				hChecked = time.Now()
				if alive, _ := m.r.tokenAlive(h); !alive {
					requested = m.handoff.CompareAndSwap(h, m.token)
				}
			}
			if requested {
				continue
			}
		}
		if w&sharedWaiters == 0 {
			// Mark the word so that Unlock knows to wake us (or, with a
			// request filed, to take its slow path and grant it).
			if !m.word.CompareAndSwap(w, w|sharedWaiters) {
				continue
			}
			w |= sharedWaiters
		}
		if w&sharedStats != 0 {
			word64(m.obj, mutexObjParks).Add(1)
		}
		if !slept {
			// The first liveness check comes one interval from now: a
			// holder that we merely outwaited by spinning is alive.
			slept = true
			checked = time.Now()
		}
		// A cancelled context ends the sleep at once, not at the next
		// liveness check: it wakes this lock's sleepers (at most one per
		// process; the others go back to sleep).
		switch slice := ownerCheckInterval; {
		case requested:
			// Asleep on our request: a grant changes it, and whoever
			// withdraws it for us wakes us.
			sleepShared(ctx, m.handoff, m.token, slice)
		default:
			// Before the starvation bound, wake at it to file the request
			// on time; past it (another process's request stands), look
			// every sharedStarveNs for the hand-off word to come free.
			left := sharedStarveNs - time.Since(began)
			slice = min(slice, max(left, sharedStarveNs))
			sleepShared(ctx, m.word, w, slice)
		}
		if !reported {
			reported = m.reportIfStuck(*start, owner, holderPID)
		}
	}
}

// A granted waiter whose lock word does not name it yet waits for the
// granter's second CAS (normally done before the waiter wakes) in sleeps
// of handoffSettle; once its context has ended, it waits at most
// handoffGrace more before it calls the words corrupt. A granter is
// descheduled between its two CASes for that long only on a host loaded
// far beyond the 10 ms liveness checks' figures.
const (
	handoffSettle = 100 * time.Microsecond
	handoffGrace  = time.Second
)

// forgedGrant clears h, a grant to us that the waiting gate holder never
// asked for, and reports it. A grant answers our own request, so no valid
// history makes one; taking it could make two of our goroutines hold at
// once (one took the free word on the fast path, which then names us for
// it). Out of line: waiters' loop stays as it was.
//
//go:noinline
func (m *SharedMutex) forgedGrant(h uint32) error {
	if m.handoff.CompareAndSwap(h, 0) {
		wakeShared(m.handoff, wakeAll)
	}
	return m.errCorrupt("the hand-off word %#x grants the lock to this process, which did not ask for it", h)
}

// withdraw takes back our pending request, if requested says we filed one,
// on a way out that does not take the lock.
func (m *SharedMutex) withdraw(requested bool) {
	if requested {
		m.handoff.CompareAndSwap(m.token, 0)
	}
}

// takeFromDead takes the lock, word w, from its dead holder (ok false: the
// word changed first). If the hand-off word then grants the lock to that
// very holder, it had been handed the lock and had not returned it to a
// caller (a grantee clears the grant before it returns), so the take is
// plain (no inconsistent bit, no ErrOwnerDead). Any other state is an
// owner death: the data is marked inconsistent. That includes a grant to
// another process, which means either that the dead holder was handing
// the lock over (it died in Unlock, between its two CASes: reported,
// conservatively) or a stale grant left by a build without the hand-off,
// which takes over from a dead grantee without clearing it: a grant that
// does not name the dead holder proves nothing about its hold. A grant is
// cleared either way: it described the dead holder's hold, or a hand-off
// that this take supersedes.
//
// The hand-off word is read after the CAS, not before: the holder may have
// granted a request between our look and its death, and a word read then
// would call a consistent lock inconsistent and leave the grant behind
// (SPIN found that: models/sharedmutex.pml, -DHANDOFF). Once the word
// names us nobody grants (only a holder does), so the word read after the
// CAS is the one the dead holder left.
func (m *SharedMutex) takeFromDead(w uint32) (plain, ok bool) {
	// Keep waiters (others may sleep); inconsistent until the hand-off
	// word says otherwise.
	if !m.word.CompareAndSwap(w, w&(sharedStats|sharedWaiters)|sharedInconsistent|m.token) {
		return false, false
	}
	h := m.handoff.Load()
	if h&handoffGranted == 0 {
		return false, true
	}
	if h&ownerMask != w&ownerMask {
		// Granted to another process: not proof that the dead holder
		// held nothing. Report the death; clear the grant.
		if m.handoff.CompareAndSwap(h, 0) {
			wakeShared(m.handoff, wakeAll) // a live grantee asleep on it looks again
		}
		return false, true
	}
	for range retryLimit { // a CAS fails only if a flag changed
		x := m.word.Load()
		if x&ownerMask != m.token || m.word.CompareAndSwap(x, x&^sharedInconsistent) {
			break
		}
	}
	if m.handoff.CompareAndSwap(h, 0) {
		wakeShared(m.handoff, wakeAll) // a live grantee asleep on it looks again
	}
	return true, true
}

// reportIfStuck logs one stuck report once the wait passes the threshold.
// It reports whether the wait is done reporting.
func (m *SharedMutex) reportIfStuck(start time.Time, owner, pid uint32) bool {
	threshold, on := stuckThreshold(&m.stuckNs)
	if !on {
		return true
	}
	waited := time.Since(start)
	if waited < threshold {
		return false
	}
	alive := true
	if owner == m.token {
		pid = uint32(m.r.pid())
	} else {
		alive, pid = m.r.tokenAlive(owner)
	}
	logSharedStuck("SharedMutex", m.name, m.r.path, pid, alive, waited, threshold)
	return true
}

// inspectMutex describes a SharedMutex object (and the writers' lock of a
// region SeqLock) for InspectRegion: state, holder, how long the hold has
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
