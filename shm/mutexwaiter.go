package shm

import (
	"context"
	"time"

	"github.com/lockword/lockword"
)

// A sharedMutexWaiter is one slow LockContext of a Mutex, past the
// spin: lockSlowWait spins (a Mutex method: it needs no waiter
// state), makes the waiter, which queues at the process-local gate, then
// looks at the lock word and the hand-off word (sharedhandoff.go) in
// rounds until a step returns. What a round finds decides its step (T is
// our token, U any other holder's):
//
//	lock word            hand-off word   step
//	T (handed to us)     T | granted     takeGrant: clear the grant, return holding
//	free                 any             takeFree: take it marked waiters
//	not recoverable      any             ErrNotRecoverable
//	U, proved dead       any             takeOver: take it, ErrOwnerDead or plain
//	U                    T | granted     settle: the granter is between its CASes
//	U, context done      not granted     giveUp: withdraw, pass a wake-up on
//	U, starving          0, or U' dead   askHandoff: file our request, look again
//	U                    any other       sleep: mark waiters, sleep a slice
//
// A step that changes nothing it can rely on (a lost CAS) ends the round,
// and the next round reads both words again. Only the gate holder runs
// rounds, so at most one goroutine per process files requests and sleeps
// in the kernel.
type sharedMutexWaiter struct {
	m     *Mutex
	ctx   context.Context
	start time.Time // when the wait began (set at the gate if the caller did not)
	began time.Time // the starvation clock: from the end of the spin; gate time counts
	mine  uint32    // m.token | handoffGranted: the hand-off word granting us the lock

	requested bool      // the hand-off word holds our request or grant
	slept     bool      // we have slept: the liveness checks are due by the clock
	stuck     stuckWait // our part in the lock's stuck report
	checked   time.Time // when the holder was last checked; zero: never
	hChecked  time.Time // when another process's request was last checked
	settling  time.Time // when a done context found us granted, not yet named
	holderPID uint32    // the holder's PID at the last check, for reports
	waitsFor  uint16    // our waits-for record while we sleep, 0 if none (waitsfor.go)
}

// lockSlowWait spins, then queues behind the process-local gate and sleeps
// in the kernel, checking the holder's liveness between sleeps; once it has
// waited sharedStarveNs it asks for a hand-off (see Mutex's
// Fairness). start is when the wait began (set here if the caller did not).
func (m *Mutex) lockSlowWait(ctx context.Context, start *time.Time) error {
	if done, err := m.spin(); done {
		return err
	}
	// Made after the spin, which often wins and needs none of it. start
	// goes in by value, and back once set: a pointer in wt would move the
	// caller's start to the heap (ctx, beside it, escapes).
	wt := sharedMutexWaiter{m: m, ctx: ctx, start: *start, mine: m.token | handoffGranted}
	if err := wt.queue(); err != nil {
		return err
	}
	defer m.gate.Unlock()
	defer wt.clearWaitsFor() // after the wait: a waiter holding is a self-edge
	defer m.stuck.leave(&wt.stuck)
	// The wait at the gate is the gate's own (an in-process Mutex),
	// in the contention profile already: sample the rest.
	defer profileEnd(profileBegin())
	*start = wt.start
	for i := 1; ; i++ {
		if done, err := wt.round(i); done {
			return err
		}
	}
}

// clearWaitsFor withdraws our waits-for record once the wait has ended.
func (wt *sharedMutexWaiter) clearWaitsFor() { wt.m.r.clearWaitsFor(wt.waitsFor) }

// spin, the waiter's first step, tries a few times for a free word before
// the waiter is made and queues: the holder is likely running in another
// process on another core and about to release; a kernel sleep and wake
// costs microseconds.
//
//	lock word        step
//	free             take it (no waiters bit: nobody slept); return holding
//	not recoverable  ErrNotRecoverable
//	held             pause, up to sharedSpinIterations times
func (m *Mutex) spin() (done bool, err error) {
	backoff := uint32(1)
	for range sharedSpinIterations {
		w := m.word.Load()
		if w&ownerMask == ownerNotRecoverable {
			return true, m.errNotRecoverable()
		}
		if m.take(w, 0) {
			if w&sharedStats != 0 {
				m.stamp()
			}
			return true, nil
		}
		procyield(backoff)
		backoff = min(2*backoff, sharedSpinPause)
	}
	return false, nil
}

// queue starts the starvation clock and waits at the process-local gate:
// one goroutine per process goes on, the others park here. It returns
// holding the gate (the caller unlocks it) or with the context's error.
func (wt *sharedMutexWaiter) queue() error {
	wt.began = time.Now() // the starvation clock: gate time counts
	if err := wt.m.gate.LockContext(wt.ctx); err != nil {
		return err
	}
	if wt.start.IsZero() {
		wt.start = wt.began
	}
	return nil
}

// round reads both words once and runs the step they call for (the table
// at sharedMutexWaiter); it reports done with the error to return, or not
// done to look again. i counts rounds.
func (wt *sharedMutexWaiter) round(i int) (done bool, err error) {
	m := wt.m
	w := m.word.Load()
	h := m.handoff.Load()
	owner := w & ownerMask
	if done, err := wt.takeGrant(w, h); done {
		return true, err
	}
	if reason := handoffCorrupt(h); reason != "" {
		return true, m.errCorrupt("%s", reason)
	}
	switch owner {
	case 0:
		return wt.takeFree(w, i)
	case ownerNotRecoverable:
		wt.withdraw()
		return true, m.errNotRecoverable()
	}
	if !validToken(owner) {
		wt.withdraw()
		return true, m.errCorrupt("owner token %#x names no incarnation (generation %d)", owner, tokenGen(owner))
	}
	granted := wt.requested && h == wt.mine // the granter is between its two CASes
	ctxDone := wt.ctx.Err() != nil
	if owner != m.token && (ctxDone || (wt.slept && time.Since(wt.checked) >= ownerCheckInterval)) {
		if !wt.checkHolder(owner) {
			return wt.takeOver(w)
		}
	}
	if granted {
		return wt.settle(w, h, ctxDone)
	}
	if ctxDone {
		return wt.giveUp()
	}
	if !wt.requested && wt.starving() && wt.askHandoff(h) {
		// Asked: look at the word again before sleeping (the Dekker
		// pair with Unlock's release).
		return false, nil
	}
	wt.sleep(w, owner)
	return false, nil
}

// takeFree takes free word w, marked waiters: we may have slept, and
// others may still sleep; one spare wake-up costs little, a lost one hangs.
//
//	lock word  hand-off word  step
//	free       T or T|granted CAS → T|waiters, then h → 0; return holding
//	free       other          CAS → T|waiters; return holding
//	changed                   look again (every retryCheckEvery rounds,
//	                          a done context gives up: giveUp)
func (wt *sharedMutexWaiter) takeFree(w uint32, i int) (done bool, err error) {
	m := wt.m
	if m.take(w, sharedWaiters) {
		if wt.requested {
			// Free with our request pending (no Unlock saw
			// it): take it back. Nobody can grant it now:
			// only a holder grants, and we hold. (A grant of a
			// free word is no valid state: clear it too.)
			m.handoff.CompareAndSwap(m.token, 0)
			m.handoff.CompareAndSwap(wt.mine, 0)
		}
		if wt.slept || w&sharedStats != 0 {
			m.stamp()
		}
		return true, nil
	}
	// Lost the race to another taker (or the word changed):
	// a word that keeps changing must not outlast ctx. Give up as
	// any done wait does: the taker may already have unlocked and
	// granted us the lock, and a plain withdraw would leave it
	// stranded on our token (models/sharedmutex.pml, -DCANCEL).
	if i%retryCheckEvery == 0 && wt.ctx.Err() != nil {
		return wt.giveUp()
	}
	return false, nil
}

// checkHolder asks whether the holder named by owner lives, and notes when
// it asked and the holder's PID. It runs when the context has ended, and
// after the first sleep every ownerCheckInterval.
//
//	lock word  step
//	U          tokenAlive(U): alive, go on; dead, takeOver
func (wt *sharedMutexWaiter) checkHolder(owner uint32) (alive bool) {
	alive, pid := wt.m.r.tokenAlive(owner)
	wt.checked = time.Now()
	wt.holderPID = pid
	return alive
}

// takeOver takes word w from its holder, proved dead (takeFromDead): the
// lock is held with ErrOwnerDead, or plainly if the dead holder had been
// handed the lock and never returned it (see Fairness).
//
//	lock word  step
//	U, dead    CAS → T|inconsistent (takeFromDead), withdraw, stamp; return
//	changed    look again
func (wt *sharedMutexWaiter) takeOver(w uint32) (done bool, err error) {
	m := wt.m
	plain, ok := m.takeFromDead(w)
	if !ok {
		return false, nil
	}
	wt.withdraw() // we hold: no request left
	m.stamp()
	if plain {
		// Plain take-back: the dead holder never returned
		// the lock to a caller (see Fairness).
		return true, nil
	}
	return true, &lockword.OwnerDeadError{Lock: m.name, Region: m.r.path, PID: int(wt.holderPID)}
}

// giveUp ends a wait whose context is done, without the lock.
//
//	hand-off word  step
//	T              CAS T → 0; lost: granted meanwhile, look again (take it)
//	other          pass on a wake-up we may have consumed; return ctx.Err()
func (wt *sharedMutexWaiter) giveUp() (done bool, err error) {
	m := wt.m
	if wt.requested && !m.handoff.CompareAndSwap(m.token, 0) {
		return false, nil // granted meanwhile: take it (takeGrant)
	}
	if wt.slept {
		// We may have consumed a wake-up meant for the next
		// waiter: pass it on.
		wakeShared(m.word, 1)
	}
	return true, wt.ctx.Err()
}

// sleep marks word w waiters and sleeps one slice, then makes the stuck
// report once it is due. owner is w's holder.
//
//	lock word        hand-off word  step
//	U, no waiters                   CAS → U|waiters; lost: look again
//	U | waiters      T              sleep on the hand-off word
//	U | waiters      other          sleep on the lock word
func (wt *sharedMutexWaiter) sleep(w, owner uint32) {
	m := wt.m
	if w&sharedWaiters == 0 {
		// Mark the word so that Unlock knows to wake us (or, with a
		// request filed, to take its slow path and grant it).
		if !m.word.CompareAndSwap(w, w|sharedWaiters) {
			return
		}
		w |= sharedWaiters
	}
	if w&sharedStats != 0 {
		word64(m.obj, mutexObjParks).Add(1)
	}
	if !wt.slept {
		// The first liveness check comes one interval from now: a
		// holder that we merely outwaited by spinning is alive.
		wt.slept = true
		wt.checked = time.Now()
		// Before the first sleep, and kept across the slices: a
		// deadlock detector reads it twice, a slice apart or more.
		wt.waitsFor = m.r.setWaitsFor(m.waitsFor1)
	}
	// A cancelled context ends the sleep at once, not at the next
	// liveness check: it wakes this lock's sleepers (at most one per
	// process; the others go back to sleep).
	switch slice := ownerCheckInterval; {
	case wt.requested:
		// Asleep on our request: a grant changes it, and whoever
		// withdraws it for us wakes us.
		sleepShared(wt.ctx, m.handoff, m.token, slice)
	default:
		// Before the starvation bound, wake at it to file the request
		// on time; past it (another process's request stands), look
		// every sharedStarveNs for the hand-off word to come free.
		left := sharedStarveNs - time.Since(wt.began)
		slice = min(slice, max(left, sharedStarveNs))
		sleepShared(wt.ctx, m.word, w, slice)
	}
	m.reportIfStuck(&wt.stuck, wt.start, owner, wt.holderPID)
}

// reportIfStuck logs the lock's stuck report if the wait, our part sw of
// it, passes the threshold and the episode calls for a line. Only the
// gate holder waits here: the process's other waiters queue at the gate.
func (m *Mutex) reportIfStuck(sw *stuckWait, start time.Time, owner, pid uint32) {
	due, waiters, waited, threshold := m.stuck.check(&m.stuckNs, sw, start, 0)
	if !due {
		return
	}
	alive := true
	if owner == m.token {
		pid = uint32(m.r.pid())
	} else {
		alive, pid = m.r.tokenAlive(owner)
	}
	logSharedStuck(sharedStuck{kind: "shm.Mutex", name: m.name, path: m.r.path, holderPID: pid, alive: alive,
		heldFor: heldFor(m.obj, m.word.Load()&sharedTimed != 0), waiters: waiters, waited: waited, threshold: threshold}, m.r.deadlockAttrs()...)
}
