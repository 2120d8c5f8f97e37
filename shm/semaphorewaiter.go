package shm

import (
	"context"
)

// The slow Acquire of a Semaphore: one goroutine per process (the
// gate's holder) draws a ticket for its process's entry and waits, under
// the guard or asleep on seq, until no live waiter has an earlier ticket
// and its permits fit. The type and its words are semaphore.go's.
//
// A waiter's rows (each step runs under the guard):
//
//	step     finds                             does
//	join     nobody waits, permits fit         takes them: done
//	join     otherwise                         draws ticket t (entry, waiters+1)
//	round    every 10 ms of this process       reaps dead entries (their permits, tickets)
//	round    no earlier ticket, permits fit    leaves the queue, takes them, bumps seq: done
//	round    ctx done                          leaves the queue, bumps seq: ctx.Err()
//	round    otherwise                         sets seq's sleepers bit, sleeps on seq
//	                                           under its ticket's futex bit
//	any bump ticket f is the front             wakes f's bit only (bumpSeq)
//	withdraw guard not had after ctx ended     leaves the queue from a background goroutine

// testSemWoke, nil outside tests, is called by a waiter each time its
// sleep on seq returns, so that a test counts which waiters a change woke.
var testSemWoke func(s *Semaphore)

// sharedSemWaiter is one slow Acquire of n permits.
type sharedSemWaiter struct {
	s      *Semaphore
	n      uint32
	ticket uint32
	rec    semRecovery
}

// acquireSlow waits for n permits: behind this process's other waiters
// (the gate), then in the shared queue.
func (s *Semaphore) acquireSlow(ctx context.Context, n uint32) error {
	s.r.waiting.Add(1)
	if err := s.gate.LockContext(ctx); err != nil {
		s.r.waiting.Add(-1)
		return err
	}
	w := &sharedSemWaiter{s: s, n: n}
	queued, err := w.wait(ctx)
	if queued {
		// Our ticket is still in the queue and the guard was not
		// ours when ctx ended: withdraw in the background (the gate
		// and Close wait for it), so the caller returns now.
		go func() {
			if s.lock(context.Background()) == nil {
				w.leave()
				s.unlock(true, false, nil)
			}
			s.gate.Unlock()
			s.r.waiting.Add(-1)
		}()
		return err
	}
	s.gate.Unlock()
	s.r.waiting.Add(-1)
	return err
}

// wait is the waiter's loop: join, then rounds until done. queued reports
// that it returns with its ticket still in the queue (and the guard not
// held).
func (w *sharedSemWaiter) wait(ctx context.Context) (queued bool, err error) {
	s := w.s
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	if err := s.check(); err != nil {
		_, err = s.unlock(false, false, err)
		return false, err
	}
	if word32(s.obj, semObjWaiters).Load() == 0 && s.fits(w.n) {
		s.take(w.n, &w.rec)
		_, err = s.unlock(w.rec.entries != 0, true, w.rec.err(s))
		return false, err
	}
	w.join()
	for {
		v, done, err := w.round(ctx)
		if done {
			return false, err
		}
		// Filed under our ticket's bit: a bump wakes only the front's.
		sleepSharedBits(ctx, word32(s.obj, semObjSeq), v, ticketBit(w.ticket), ownerCheckInterval)
		if testSemWoke != nil {
			testSemWoke(s)
		}
		if err := s.lock(ctx); err != nil {
			return true, err
		}
	}
}

// join draws a ticket for our entry, under the guard.
func (w *sharedSemWaiter) join() {
	s := w.s
	s.own(&w.rec)
	next := word32(s.obj, semObjNext)
	t := next.Load()
	if t == 0 {
		t = 1 // 0 means "no ticket"
	}
	next.Store(t + 1)
	w.ticket = t
	word32(s.me, semSlotWant).Store(w.n)
	word32(s.me, semSlotTicket).Store(t)
	waiters := word32(s.obj, semObjWaiters)
	waiters.Store(waiters.Load() + 1)
}

// round runs one step under the guard, which it releases. done: the wait
// is over (err nil or a *SemaphoreOwnerDeadError: permits held; another
// error: none held, the ticket withdrawn); otherwise sleep on seq while it
// holds v.
func (w *sharedSemWaiter) round(ctx context.Context) (v uint32, done bool, err error) {
	s := w.s
	err = s.check()
	if before := w.rec.entries; err == nil {
		err = s.reapIfDue(&w.rec)
		if w.rec.entries != before {
			// Freed permits or a dead waiter's place: the front may
			// go now (a rare wake under the guard).
			if bits := s.bumpSeq(); bits != 0 {
				wakeSharedBits(word32(s.obj, semObjSeq), wakeAll, bits)
			}
		}
	}
	if err == nil && word32(s.me, semSlotTicket).Load() != w.ticket {
		err = s.errCorrupt("this process's ticket %d became %d while it waited", w.ticket, word32(s.me, semSlotTicket).Load())
	}
	if err != nil {
		_, err = s.unlock(false, false, err)
		return 0, true, err
	}
	if !w.behind() && s.fits(w.n) {
		w.leave()
		s.take(w.n, &w.rec)
		_, err = s.unlock(true, true, w.rec.err(s))
		return 0, true, err
	}
	if err := ctx.Err(); err != nil {
		w.leave()
		s.unlock(true, false, nil)
		return 0, true, err
	}
	seq := word32(s.obj, semObjSeq)
	v = seq.Load() | semSleepers
	seq.Store(v)
	s.unlock(false, false, nil)
	return v, false, nil
}

// behind reports, under the guard, whether a waiter of another process
// holds an earlier ticket (tickets compare modulo 2^32: at most 1024 are
// outstanding).
func (w *sharedSemWaiter) behind() bool {
	s := w.s
	if word32(s.obj, semObjWaiters).Load() <= 1 {
		return false
	}
	for slot := range uint32(regionProcSlots) {
		t := word32(s.obj, semSlotOff(slot)+semSlotTicket).Load()
		if t != 0 && slot != s.r.slot && int32(t-w.ticket) < 0 {
			return true
		}
	}
	return false
}

// leave withdraws our ticket, under the guard; the caller bumps seq (the
// waiter behind may be first now).
func (w *sharedSemWaiter) leave() {
	s := w.s
	if word32(s.me, semSlotTicket).Load() != w.ticket {
		return // a reaper took it for a dead incarnation's: not ours to count
	}
	word32(s.me, semSlotTicket).Store(0)
	word32(s.me, semSlotWant).Store(0)
	waiters := word32(s.obj, semObjWaiters)
	waiters.Store(waiters.Load() - 1)
	s.settle()
}
