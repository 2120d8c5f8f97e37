package lockword

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// Bits of RWMutex's state word.
const (
	rwPhase   = 1 << 0 // flipped by each writer as it arrives (see rwArrive)
	rwWriter  = 1 << 1 // a writer holds the lock or waits for readers to leave
	rwParked  = 1 << 2 // readers may be parked on state: the writer's Unlock must wake them
	rwStats   = 1 << 3 // statistics on: RLock's fast path fails
	rwReader  = 1 << 4 // one reader, in bits 4-31
	rwGuard   = 1 << 31
	rwUnread  = ^uint32(rwReader - 1) // adding it subtracts one reader
	rwCountOf = 4                     // shift from state to reader count

	// rwWriterBits are what a blocked reader watches: it waits while they
	// still hold the value it saw, that is, while the same writer is there.
	rwWriterBits = rwWriter | rwPhase
	// rwMaxReaders is the most readers (holding or blocked) at once:
	// one more reaches rwGuard, which RLock reports as an overflow.
	rwMaxReaders = rwGuard>>rwCountOf - 1
)

// Bits of the departing word, which a writer waits on.
const (
	// rwAbandoned marks a writer that gave up (its context ended) while
	// readers were leaving: the last of them releases on its behalf.
	rwAbandoned  = 1 << 31
	rwDepartMask = rwAbandoned - 1
)

// Bits of the writers' word, a mutex among writers (see RWMutex).
const (
	rwwLocked    = 1 << 0 // a writer holds the writers' word
	rwwContended = 1 << 1 // writers may be parked on it: its release must wake one
	// rwwHandoff is set by a parked writer that has waited rwStarveNs:
	// the release then reserves the word (rwwReserved) for the oldest
	// parked writer, and arriving writers may not take it.
	rwwHandoff  = 1 << 2
	rwwReserved = rwwHandoff | rwwContended // free, but only for a woken writer

	// rwStarveNs is how long a parked writer waits before it asks for a
	// hand-off: sync.Mutex's starvation threshold.
	rwStarveNs = int64(time.Millisecond)
)

// Waiting tuning for RWMutex (see BENCHMARKS.md): a writer waiting for
// readers to leave watches departing briefly (about 0.3 µs here: they may
// be running on other cores), then yields the processor a few times (they
// may be waiting for ours), then parks. Readers behind a writer park at
// once (see rlockSlow).
const (
	rwSpinIterations = 16
	rwSpinPause      = 1
	rwYieldRounds    = 4
)

// spinThenYield polls cond: rwSpinIterations looks with the CPU pause hint
// between them, then up to rwYieldRounds yields. It reports whether cond
// came true before it gave up. (The yields matter with one P, where the
// readers cannot leave while the writer spins.)
func spinThenYield(cond func() bool) bool {
	for range rwSpinIterations {
		procyield(rwSpinPause)
		if cond() {
			return true
		}
	}
	for range rwYieldRounds {
		runtime.Gosched()
		if cond() {
			return true
		}
	}
	return false
}

// An RWMutex is a reader/writer mutual exclusion lock: any number of
// readers, or one writer. It is phase-fair, after Brandenburg and
// Anderson's PF-T lock ("Spin-Based Reader-Writer Synchronization for
// Multiprocessor Real-Time Systems", Real-Time Systems 46, 2010), with
// waiters that park: a writer that arrives stops new readers and waits only
// for the readers already inside; when it leaves, every reader that arrived
// meanwhile is admitted before the next writer can enter, and that writer
// waits only for them. So a continuous stream of readers cannot starve a
// writer, nor a stream of writers a reader: a reader waits for at most one
// writer, a writer for the writers ahead of it and one batch of readers
// each. Writers exclude each other with a mutex word of their own (as
// sync.RWMutex's writers take a sync.Mutex): an arriving writer may take
// it from parked ones, which keeps writes off the hand-off through a
// parked goroutine, until a parked writer has waited 1 ms; then the word
// is handed to the oldest parked writer and arriving writers wait. Its
// lock words:
//
//	word       meaning
//	state      reader count (bits 4-31) and the bits below
//	departing  readers the writer still waits for; bit 31: writer gave up
//	writers    the writers' mutex; the writer holding it is the only one
//	           that may set rwWriter
//
//	state bit  meaning
//	0 phase    flipped by each arriving writer, so that a reader can tell
//	           the writer it waits for from the next one
//	1 writer   a writer holds the lock or waits for readers to leave:
//	           arriving readers wait
//	2 parked   readers may be parked on state: Unlock must wake them
//	3 stats    statistics on (EnableStats): RLock's and Lock's fast paths fail
//
//	writers    meaning
//	0          free
//	1          held, no writer parked
//	3          held, writers may be parked: the release wakes one
//	7          held, and a parked writer has waited 1 ms: the release
//	           reserves the word for the oldest parked writer
//	6          reserved: free for a woken writer only
//
// RLock adds one reader to state (one atomic add, the fast path) and is
// done unless the writer bit is set; then it waits for the writer bits to
// change. RUnlock subtracts one and is done unless the writer bit is set;
// then it counts itself off departing, and the last reader out wakes the
// writer. Lock takes the writers' word (one CAS, or spin briefly, then
// park), then sets the writer bit with one add that also reads how many
// readers are inside, and waits for departing to reach zero. Unlock clears
// the writer and parked bits, wakes parked readers, and releases the
// writers' word.
//
// RLock fails loudly rather than overflow the reader count: at more than
// 134,217,727 readers holding or waiting at once (rwMaxReaders; in practice
// a leak of RLock calls without RUnlock) it panics with "lockword: RWMutex
// reader count overflow".
//
// The zero value is an unlocked RWMutex. It must not be copied after first
// use. Recursive read locking is not supported (a writer arriving between
// the two RLocks deadlocks them), as with sync.RWMutex.
//
// In the terminology of the Go memory model, the n'th call to Unlock
// synchronizes before the m'th call to Lock for any n < m, as for a Mutex.
// For any call to RLock there is an n such that the n'th call to Unlock
// synchronizes before that RLock, and the matching RUnlock synchronizes
// before the n+1'th call to Lock.
//
// An RWMutex is 24 bytes: state, departing and writers at offsets 0, 4
// and 8, 4 bytes of alignment, then a pointer to optional diagnostics
// (SetName, SetStuckThreshold, EnableStats; statistics count read and
// write acquisitions together).
type RWMutex struct {
	_         noCopy
	state     atomic.Uint32
	departing atomic.Uint32
	writers   atomic.Uint32
	diag
}

var _ interface {
	Lock()
	Unlock()
	RLock()
	RUnlock()
} = (*RWMutex)(nil)

// RLock locks rw for reading. It waits while a writer holds rw or waits
// for the readers inside to leave.
func (rw *RWMutex) RLock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		rw.rlockTracked(nil)
		return
	}
	// Fast path: count ourselves in; no writer, no statistics, no
	// overflow: done.
	if s := rw.state.Add(rwReader); s&(rwWriter|rwStats|rwGuard) != 0 {
		rw.rlockSlow(s)
	}
}

// RUnlock undoes one RLock. It panics with "lockword: RUnlock of unlocked
// RWMutex" if rw is not locked for reading (detected when the reader count
// would go below zero).
func (rw *RWMutex) RUnlock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		trackRelease(rw) // before the release: see trackRelease
	}
	// Fast path: count ourselves out; no writer waiting: done.
	if s := rw.state.Add(rwUnread); s&(rwWriter|rwGuard) != 0 {
		rw.runlockSlow(s)
	}
}

// TryRLock locks rw for reading if no writer holds or awaits it, without
// waiting, and reports whether it did.
func (rw *RWMutex) TryRLock() bool {
	if deadlockBuilt && lockTracking.Load() != 0 {
		return trackAcquire(nil, rw.trackRef("RWMutex (read)"), rw.tryRLockOrPanic, nil) == nil
	}
	return rw.tryRLockOrPanic()
}

// tryRLockOrPanic is TryRLock's attempt: unlike tryRLock (the first try of
// a blocking RLock, whose slow path reports the overflow), it panics on a
// full reader count itself, tracked or not.
func (rw *RWMutex) tryRLockOrPanic() bool {
	for {
		s := rw.state.Load()
		if s&rwWriter != 0 {
			return false
		}
		if s>>rwCountOf >= rwMaxReaders {
			panic("lockword: RWMutex reader count overflow: more than 134217727 readers at once (RLock without RUnlock?)")
		}
		if rw.state.CompareAndSwap(s, s+rwReader) {
			if s&rwStats != 0 {
				rw.uncontended()
			}
			return true
		}
	}
}

// RLockContext locks rw for reading, waiting until it can or ctx is done.
// If no writer is present the read lock is taken even when ctx is already
// done. On failure it returns ctx.Err() and the caller holds nothing.
func (rw *RWMutex) RLockContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if deadlockBuilt && lockTracking.Load() != 0 {
		return rw.rlockTracked(ctx)
	}
	if s := rw.state.Add(rwReader); s&(rwWriter|rwStats|rwGuard) != 0 {
		return rw.rlockSlowContext(ctx, s)
	}
	return nil
}

// tryRLock is TryRLock for tracked acquisitions (TryRLock keeps its own
// loop: a call to this one would cost it a call frame). At the reader
// limit it fails rather than panic: the blocking path that follows it in
// RLock panics there.
func (rw *RWMutex) tryRLock() bool {
	for {
		s := rw.state.Load()
		if s&rwWriter != 0 || s>>rwCountOf >= rwMaxReaders {
			return false
		}
		if rw.state.CompareAndSwap(s, s+rwReader) {
			if s&rwStats != 0 {
				rw.uncontended()
			}
			return true
		}
	}
}

// rlockUntracked is RLockContext (RLock if ctx is nil) without deadlock
// detection (RLockContext keeps its own copy, for the call frame).
func (rw *RWMutex) rlockUntracked(ctx context.Context) error {
	if s := rw.state.Add(rwReader); s&(rwWriter|rwStats|rwGuard) != 0 {
		return rw.rlockSlowContext(ctx, s)
	}
	return nil
}

// rlockTracked is RLockContext (RLock if ctx is nil) with deadlock
// detection (deadlock.go).
func (rw *RWMutex) rlockTracked(ctx context.Context) error {
	return trackAcquire(ctx, rw.trackRef("RWMutex (read)"), rw.tryRLock, rw.rlockUntracked)
}

// lockTracked is LockContext (Lock if ctx is nil) with deadlock detection.
func (rw *RWMutex) lockTracked(ctx context.Context) error {
	return trackAcquire(ctx, rw.trackRef("RWMutex"), rw.tryLock, func(ctx context.Context) error {
		return rw.ref().lock(ctx, &rw.diag, rw)
	})
}

// trackRef is rw for deadlock detection; kind says read or write.
func (rw *RWMutex) trackRef(kind string) lockRef { return lockRef{rw, kind, &rw.diag} }

// tryLock is TryLock without deadlock detection.
func (rw *RWMutex) tryLock() bool { return rw.ref().tryLock(&rw.diag) }

// RLocker returns a sync.Locker whose Lock and Unlock call rw.RLock and
// rw.RUnlock.
func (rw *RWMutex) RLocker() sync.Locker { return (*rlocker)(rw) }

type rlocker RWMutex

func (r *rlocker) Lock()   { (*RWMutex)(r).RLock() }
func (r *rlocker) Unlock() { (*RWMutex)(r).RUnlock() }

//go:noinline
func (rw *RWMutex) rlockSlow(s uint32) { rw.rlockSlowContext(nil, s) }

func (rw *RWMutex) rlockSlowContext(ctx context.Context, s uint32) error {
	return rw.ref().rlockSlow(ctx, s, &rw.diag, rw)
}

//go:noinline
func (rw *RWMutex) runlockSlow(s uint32) { rw.ref().runlockSlow(s) }

// Lock locks rw for writing, waiting for the writers ahead of it and then
// for the readers inside to leave.
func (rw *RWMutex) Lock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		rw.lockTracked(nil)
		return
	}
	// Fast path: take the free writers' word, then close the door on an
	// empty state (no reader, no writer, no statistics) with one CAS.
	if rw.writers.CompareAndSwap(0, rwwLocked) {
		if s := rw.state.Load(); s&^rwPhase == 0 && rw.state.CompareAndSwap(s, s+rwArrive(s)) {
			return
		}
		rw.lockHeld()
		return
	}
	rw.lockSlow()
}

//go:noinline
func (rw *RWMutex) lockSlow() { rw.ref().lock(nil, &rw.diag, rw) }

// lockHeld is Lock's slow path after its CAS took the writers' word.
//
//go:noinline
func (rw *RWMutex) lockHeld() { rw.ref().arrive(nil, &rw.diag, rw, noteTrack{}, false) }

// LockContext locks rw for writing, waiting until it can or ctx is done. If
// rw is free it is taken even when ctx is already done. On failure it
// returns ctx.Err() and the caller holds nothing. A writer that gives up
// while queued behind other writers leaves at once. One that gives up
// while waiting for readers to leave has already closed the door to new
// readers, and it stays closed until those readers have left: the last of
// them then releases on the writer's behalf, as if it had taken and
// released the lock. So a cancelled LockContext can hold new readers (and
// the writers behind it) up for as long as the longest read hold that was
// in progress when it arrived, never longer. Reopening earlier would let
// the next writer flip the phase back to the value that a reader counted
// in, but not yet running, still waits on, and that reader would wait for
// a writer that waits for it. shm.RWMutex does the same.
func (rw *RWMutex) LockContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if deadlockBuilt && lockTracking.Load() != 0 {
		return rw.lockTracked(ctx)
	}
	return rw.ref().lock(ctx, &rw.diag, rw)
}

// TryLock locks rw for writing if it is free (no writer, no reader),
// without waiting, and reports whether it did.
func (rw *RWMutex) TryLock() bool {
	if deadlockBuilt && lockTracking.Load() != 0 {
		return trackAcquire(nil, rw.trackRef("RWMutex"), rw.tryLock, nil) == nil
	}
	return rw.tryLock()
}

// Unlock unlocks rw for writing: readers that arrived while it was held are
// admitted, then the next writer may arrive. It panics with "lockword:
// Unlock of unlocked RWMutex" if rw is not locked for writing.
func (rw *RWMutex) Unlock() {
	if deadlockBuilt && lockTracking.Load() != 0 {
		trackRelease(rw) // before the release: see trackRelease
	}
	// Clear the writer and parked bits (keep phase: the next writer flips
	// it); with no reader parked, free the writers' word: done.
	s := rw.state.And(^uint32(rwWriter | rwParked))
	if s&(rwWriter|rwParked) != rwWriter || !rw.writers.CompareAndSwap(rwwLocked, 0) {
		rw.unlockSlow(s)
	}
}

// unlockSlow is Unlock's slow path; s is state before Unlock cleared the
// writer and parked bits.
//
//go:noinline
func (rw *RWMutex) unlockSlow(s uint32) {
	if s&rwWriter == 0 {
		panic("lockword: Unlock of unlocked RWMutex")
	}
	if s&rwParked != 0 {
		wait.Wake(&rw.state, wakeAll)
	}
	rw.ref().unlockWriters()
}

// EnableStats starts collecting contention statistics (see Stats), for
// read and write acquisitions together. It may be called at any time. From
// then on every acquisition takes the slow path and pays a few atomic adds
// on counters shared by all its users.
func (rw *RWMutex) EnableStats() {
	rw.enableStats()
	rw.state.Or(rwStats)
}

// stuckInfo is for the stuck watcher (stuckOwner).
func (rw *RWMutex) stuckInfo() (string, *diag) { return "RWMutex", &rw.diag }

// ref returns rw's lock words for the protocol.
func (rw *RWMutex) ref() rwRef {
	return rwRef{&rw.state, &rw.departing, &rw.writers}
}

// An rwRef points at the lock words of an RWMutex (see RWMutex for the
// protocol), which holds them as fields so that RLock and RUnlock stay
// inlinable. The slow paths below see only these words and the
// diagnostics of the lock they belong to (owner names it in stuck
// reports).
type rwRef struct {
	state, departing, writers *atomic.Uint32
}

// rwArrive is the add that sets the writer bit and flips the phase bit of
// state s, whose writer bit is clear: 3 turns phase 0 into writer|1, and 1
// turns phase 1 into writer|0 (the carry out of bit 0 sets bit 1).
func rwArrive(s uint32) uint32 {
	if s&rwPhase == 0 {
		return rwWriter | rwPhase
	}
	return rwWriter - rwPhase
}

// rlockSlow is RLock's slow path; s is state just after our add.
func (r rwRef) rlockSlow(ctx context.Context, s uint32, d *diag, owner stuckOwner) error {
	if s&rwGuard != 0 {
		r.state.Add(rwUnread)
		panic("lockword: RWMutex reader count overflow: more than 134217727 readers at once (RLock without RUnlock?)")
	}
	if s&rwWriter == 0 {
		d.uncontended() // no writer: we came only to be counted
		return nil
	}
	// A writer is inside or waiting for the readers before us. It did not
	// count us, and the writer after it will: wait until the writer bits
	// change, which means this writer has left.
	w := s & rwWriterBits
	tr := d.trackNoted(owner)
	// Park at once, without spinning: measured here, a reader that spins
	// behind a writer keeps the state word's cache line bouncing between
	// cores for every reader around it, and lost against letting the
	// other goroutines read alone meanwhile (which is also what
	// sync.RWMutex's readers do).
	for {
		s = r.state.Load()
		if s&rwWriterBits != w {
			tr.acquired()
			return nil
		}
		// Ask Unlock to wake us, then sleep while the word is unchanged.
		if s&rwParked == 0 && !r.state.CompareAndSwap(s, s|rwParked) {
			continue
		}
		note, since := tr.sleeping()
		if err := wait.WaitNoted(ctx, r.state, s|rwParked, note, since); err != nil {
			// Leave, unless the writer left first: then we hold a read
			// lock that the next writer counted on, and must keep it.
			for {
				s = r.state.Load()
				if s&rwWriterBits != w {
					tr.acquired()
					return nil
				}
				if r.state.CompareAndSwap(s, s-rwReader) {
					tr.abandoned()
					return err
				}
			}
		}
	}
}

// runlockSlow is RUnlock's slow path; s is state just after our subtract.
func (r rwRef) runlockSlow(s uint32) {
	if s&rwGuard != 0 {
		r.state.Add(rwReader)
		panic("lockword: RUnlock of unlocked RWMutex")
	}
	// A writer is here, and it counted us among the readers inside when
	// it arrived (a reader that arrived after it would be waiting, not
	// leaving).
	switch r.departing.Add(^uint32(0)) {
	case 0:
		// Last one out: the writer may be asleep.
		wait.Wake(r.departing, 1)
	case rwAbandoned:
		// Last one out, and the writer gave up: release for it.
		r.departing.Store(0)
		r.release()
	}
}

// lock is Lock's and LockContext's slow path: take the writers' word,
// then arrive.
func (r rwRef) lock(ctx context.Context, d *diag, owner stuckOwner) error {
	if r.writers.CompareAndSwap(0, rwwLocked) {
		return r.arrive(ctx, d, owner, noteTrack{}, false)
	}
	tr := d.trackNoted(owner)
	if err := r.lockWriters(ctx, &tr); err != nil {
		tr.abandoned()
		return err
	}
	return r.arrive(ctx, d, owner, tr, true)
}

// lockWriters takes the writers' word, held by another writer: it spins
// briefly (the holder may be leaving on another core), then parks until
// woken, marking the word contended so that the release wakes one writer.
// A writer that has been parked for rwStarveNs asks for a hand-off: the
// next release reserves the word for the oldest parked writer (the
// parking lot wakes in FIFO order), which only a writer that has parked
// may take. So a writer waits at most rwStarveNs plus the writers parked
// before it, however many writers barge.
func (r rwRef) lockWriters(ctx context.Context, tr *noteTrack) error {
	for range rwSpinIterations {
		procyield(rwSpinPause)
		if r.writers.Load() == 0 && r.writers.CompareAndSwap(0, rwwLocked) {
			return nil
		}
	}
	parkedNs := int64(0) // when this writer first parked; 0: not yet
	for {
		v := r.writers.Load()
		if v&rwwLocked == 0 && (v&rwwHandoff == 0 || parkedNs != 0) {
			// Free, or reserved and we have parked: take it, contended,
			// since other writers may be parked (the hand-off ends).
			if r.writers.CompareAndSwap(v, rwwLocked|rwwContended) {
				return nil
			}
			continue
		}
		nv := v | rwwContended
		if parkedNs != 0 && v&rwwLocked != 0 && int64(time.Since(stuckEpoch))-parkedNs >= rwStarveNs {
			nv |= rwwHandoff
		}
		if nv != v && !r.writers.CompareAndSwap(v, nv) {
			continue
		}
		if parkedNs == 0 {
			parkedNs = max(int64(time.Since(stuckEpoch)), 1)
		}
		note, since := tr.sleeping()
		if err := wait.WaitNoted(ctx, r.writers, nv, note, since); err != nil {
			// Not woken (a wake-up that chose us returns nil): leave. A
			// hand-off we asked for is served to the next oldest writer,
			// or undone if none is parked (releaseWriters).
			return err
		}
	}
}

// rwTestNoHandoff, false outside tests, disables the hand-off, so that a
// test shows its check fails without it.
var rwTestNoHandoff bool

// releaseWriters frees the writers' word after rwwLocked was found with
// other bits: wake one parked writer, or reserve the word for it.
func (r rwRef) releaseWriters() {
	for {
		v := r.writers.Load()
		if v&rwwLocked == 0 {
			panic("lockword: Unlock of unlocked RWMutex") // the writers' word was free
		}
		if v&rwwHandoff == 0 || rwTestNoHandoff {
			if !r.writers.CompareAndSwap(v, 0) {
				continue
			}
			if v&rwwContended != 0 {
				wait.Wake(r.writers, 1)
			}
			return
		}
		if !r.writers.CompareAndSwap(v, rwwReserved) {
			continue
		}
		if wait.Wake(r.writers, 1) == 1 {
			return // the oldest parked writer takes the reserved word
		}
		// Nobody parked (those that asked gave up): free the word, and
		// wake a writer that parked on the reserved value meanwhile.
		if r.writers.CompareAndSwap(rwwReserved, 0) {
			wait.Wake(r.writers, 1)
		}
		return
	}
}

// arrive is Lock after the writers' word is taken: set the writer bit and
// flip the phase, then wait for the readers inside. tr is the wait so far
// (tracked: the writer already waited for the word).
func (r rwRef) arrive(ctx context.Context, d *diag, owner stuckOwner, tr noteTrack, tracked bool) error {
	statsOn := r.state.Load()&rwStats != 0
	// We are the only writer: nobody else changes the writer or phase
	// bits until we clear ours. One add sets them and reads how many
	// readers are inside; each of them will count itself off departing.
	s := r.state.Add(rwArrive(r.state.Load()))
	// Readers may have counted themselves off before we added them in,
	// taking departing below zero; the sum is what remains.
	if readers := s >> rwCountOf; readers == 0 || r.departing.Add(readers) == 0 {
		if tracked {
			tr.acquired()
		} else if statsOn {
			d.uncontended()
		}
		return nil
	}
	if !tracked {
		tr = d.trackNoted(owner)
	}
	if err := r.awaitReaders(ctx, &tr); err != nil {
		tr.abandoned()
		return err
	}
	tr.acquired()
	return nil
}

// awaitReaders waits for departing to reach zero: the readers that were
// inside when this writer arrived have left. If ctx ends first the writer
// gives up, unless they left meanwhile (then it holds the lock and returns
// nil); the last reader out releases for it.
func (r rwRef) awaitReaders(ctx context.Context, tr *noteTrack) error {
	if spinThenYield(func() bool { return r.departing.Load() == 0 }) {
		return nil
	}
	for {
		d := r.departing.Load()
		if d == 0 {
			return nil
		}
		note, since := tr.sleeping()
		if err := wait.WaitNoted(ctx, r.departing, d, note, since); err != nil {
			for {
				d = r.departing.Load()
				if d == 0 {
					return nil // they left: the lock is ours
				}
				// Readers remain: hand our release to the last of them.
				if r.departing.CompareAndSwap(d, d|rwAbandoned) {
					return err
				}
			}
		}
	}
}

// tryLock is TryLock.
func (r rwRef) tryLock(d *diag) bool {
	if !r.writers.CompareAndSwap(0, rwwLocked) {
		return false
	}
	s := r.state.Load()
	if s>>rwCountOf != 0 || !r.state.CompareAndSwap(s, s+rwArrive(s)) {
		// Readers are inside: give the writers' word back.
		r.unlockWriters()
		return false
	}
	if s&rwStats != 0 {
		d.uncontended()
	}
	return true
}

// release clears the writer bit, wakes readers parked behind it and
// releases the writers' word.
func (r rwRef) release() {
	// Clear writer and parked, keep phase: the next writer flips it.
	if s := r.state.And(^uint32(rwWriter | rwParked)); s&rwParked != 0 {
		wait.Wake(r.state, wakeAll)
	}
	r.unlockWriters()
}

// unlockWriters releases the writers' word.
func (r rwRef) unlockWriters() {
	if !r.writers.CompareAndSwap(rwwLocked, 0) {
		r.releaseWriters()
	}
}
