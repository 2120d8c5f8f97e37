package shm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockword/lockword"
)

// The guard of a Semaphore: a Mutex that only this package's Semaphore
// code takes, for critical sections of a few stores. Its word names the
// process (the Region handle's owner token), not the goroutine, so a
// guard word naming this process cannot by itself tell a hold by another
// goroutine of ours, which is waited for, from a stray write of our own
// token, which no Unlock will ever clear: the Mutex waits on both, for
// ever if the caller's context never ends (Release has none).
//
// So the goroutines of a process take the guard one at a time, behind an
// in-process lock (Semaphore.local), and only local's holder ever takes
// or holds the guard. local's holder, before it takes the guard, knows
// that no goroutine of this process holds it: a guard word naming this
// process then is corruption, reported as a CorruptError naming the
// Semaphore (Release panics with it), never waited on. A flag set after
// the guard is taken would leave a window (taken, flag not yet set) in
// which a second goroutine judges a real hold corrupt; local has none.
// It costs one uncontended in-process lock per call, and in-process
// contention for the guard parks at local instead of at the guard's own
// gate.
//
//	local   guard word             step
//	held    free, or another       take the guard (LockContext: waits,
//	        process's token        repairs after an owner death)
//	held    this process's token   CorruptError: nobody of ours holds it
//	held    turns to this          CorruptError at the next check, every
//	        process's token while  ownerCheckInterval of the wait
//	        we wait                (waitGuard)

// lock takes the guard. One taken from a dead holder is repaired (the
// counts recomputed from the entries) and marked consistent: the guard
// protects only the words of this object, which the repair restores. The
// dead holder may have freed permits and died before bumping seq (the
// SPIN model found the waiters then asleep until their next 10 ms slice):
// the repair bumps and wakes for it. It returns holding local and the
// guard, or an error holding neither.
//
// The call is counted in r.waiting from here to unlock, so that Close
// refuses (ErrRegionBusy) while it runs, and it checks for a Close after
// it is counted: a Close that came first is seen here, and the call
// returns ErrRegionClosed instead of reading the unmapped words. (As for
// a Mutex, a Close that has read the count but not yet marked the region
// gone is the caller's race.)
func (s *Semaphore) lock(ctx context.Context) error {
	s.r.waiting.Add(1)
	err := s.r.errClosed("Semaphore", s.name, "lock")
	if err == nil {
		if err = s.local.LockContext(ctx); err == nil {
			if err = s.lockGuard(ctx); err != nil {
				s.local.Unlock()
			}
		}
	}
	if err != nil {
		s.r.waiting.Add(-1)
	}
	return err
}

// lockGuard takes the guard, local held.
func (s *Semaphore) lockGuard(ctx context.Context) error {
	if owner := s.guard.word.Load() & ownerMask; owner == s.r.token {
		return s.errCorrupt("its guard word names this process (owner token %#x), but no goroutine of this process holds the guard", owner)
	}
	err := s.waitGuard(ctx)
	if errors.Is(err, lockword.ErrOwnerDead) {
		s.recount()
		s.checkedNs.Store(0) // the counts now come from every entry
		if s.bumpSeq() != 0 {
			// Rare: wake every sleeper, whatever the dead
			// holder left half-done in the queue.
			wakeShared(word32(s.obj, semObjSeq), wakeAll)
		}
		if err = s.guard.MarkConsistent(); err != nil {
			s.guard.unlockInternal() // err already says the guard is corrupt
		}
	}
	return s.guardErr(err)
}

// errGuardOurs is the cause with which a guardWatch ends a guard wait.
var errGuardOurs = errors.New("guard word turned to this process's token while it waited")

// waitGuard is the guard's LockContext, local held, watched: a stray write
// that turns the word to our token while we wait for another process's
// hold would keep the Mutex waiting for ever (its holder is us, alive). So
// a wait that lasts ownerCheckInterval is checked every interval, by a
// timer, not a goroutine (most waits end in the spin). Ending the wait
// through its context is always safe: the Mutex's cancelled waiter
// withdraws, and one handed the guard meanwhile takes it and returns nil.
func (s *Semaphore) waitGuard(ctx context.Context) error {
	if s.guard.word.CompareAndSwap(0, s.guard.token) {
		return nil // the Mutex's own fast path, without the timer
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &guardWatch{s: s, cancel: cancel}
	w.mu.Lock()
	w.t = time.AfterFunc(ownerCheckInterval, w.fire)
	w.mu.Unlock()
	err := s.guard.LockContext(wctx)
	w.stop()
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errGuardOurs) {
		return s.errCorrupt("its guard word turned to this process's token (%#x) while it waited, and no goroutine of this process holds the guard", s.r.token)
	}
	return err
}

// A guardWatch checks, every ownerCheckInterval while a guard wait lasts,
// whether the guard word names this process, and ends the wait if so.
type guardWatch struct {
	s       *Semaphore
	cancel  context.CancelCauseFunc
	mu      sync.Mutex // orders fire's re-arm after the timer's creation and before stop
	t       *time.Timer
	stopped bool
}

func (w *guardWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if w.s.guard.word.Load()&ownerMask == w.s.r.token {
		w.cancel(errGuardOurs)
		return
	}
	w.t.Reset(ownerCheckInterval)
}

func (w *guardWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.t.Stop()
	w.mu.Unlock()
}

// guardErr names the Semaphore in an error of its guard, whose own
// errors name a shm.Mutex the caller never made. The guard is marked
// consistent whenever it is taken from a dead holder, so a guard found
// not recoverable was written by no valid history: corrupt.
func (s *Semaphore) guardErr(err error) error {
	var ce *lockword.CorruptError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && ce.Kind != "Semaphore":
		return s.errCorrupt("its guard: %s", ce.Reason)
	case errors.Is(err, lockword.ErrNotRecoverable):
		return s.errCorrupt("its guard is marked not recoverable, which no valid history leaves it")
	case errors.Is(err, ErrRegionClosed):
		return fmt.Errorf("%w: Semaphore %q used after Close of %s", ErrRegionClosed, s.name, s.r.path)
	}
	return err
}

// unlock releases the guard, first bumping seq if bump (a change a waiter
// may await), then local, then wakes the front waiter's process; it
// returns took and err, or, if the guard's word was overwritten while held
// and err is nil, a CorruptError (took stands: what was taken is recorded
// in our entry).
func (s *Semaphore) unlock(bump, took bool, err error) (bool, error) {
	var bits uint32
	if bump {
		bits = s.bumpSeq()
	}
	if gerr := s.guard.unlockInternal(); gerr != nil && err == nil {
		err = s.errCorrupt("its guard was overwritten while held (%v)", gerr)
	}
	s.local.Unlock() // after the guard: local's next holder finds it released
	s.r.waiting.Add(-1)
	if bits != 0 && !testBrokenSemNoWake {
		wakeSharedBits(word32(s.obj, semObjSeq), wakeAll, bits)
	}
	return took, err
}
