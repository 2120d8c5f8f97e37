/*
 * mutex.pml: Mutex, the three-state futex mutex (Drepper, "Futexes Are
 * Tricky", mutex #3) with a spin phase, LockContext abandonment, spurious
 * wake-ups and the starvation hand-off of issue 11.1.
 *
 * Mirrors mutex.go on main:
 * models: mutex.go (*Mutex).Lock
 * models: mutex.go (*Mutex).LockContext
 * models: mutex.go (*Mutex).lockSlowContext
 * models: mutex.go (*Mutex).Unlock
 * models: mutex.go (*Mutex).unlockSlow
 * models: mutex.go (*Mutex).handoff
 * models: mutex.go (*Mutex).leaveStarving
 *
 * Word (one byte here, the same bits as mutex.go): bits 0-1 the state (0
 * unlocked, 1 locked, 2 locked and waiters may sleep), HANDOFF (4) a
 * hand-off to a starving waiter not yet claimed, STARVER (8) per starving
 * waiter. The statistics flag (bit 31) is not modelled: it only sends fast
 * paths down the slow path, which the model already explores.
 *
 * Each Load-then-CAS of the Go code is one atomic step here that compares
 * the word with the value loaded earlier in a separate step, so another
 * goroutine may change the word in between and make the CAS fail, as in
 * Go. The starvation threshold is a nondeterministic choice: each time a
 * waiter that has slept looks at a held lock, it may find that it has
 * waited past mutexStarveNs (or not yet), so SPIN tries every timing.
 * The processor yield after a wake-up (yieldIfWoke: runtime.Gosched when
 * Unlock woke someone) is not modelled: it touches neither the word nor
 * the queues, and SPIN already runs every interleaving, among them the
 * one where the woken waiter runs first.
 *
 * Bounds: NG = 3 goroutines, each locking ROUNDS = 2 times; goroutine 2
 * uses LockContext and may be cancelled once while asleep (also while
 * starving, so that a hand-off can find nobody to wake); one spurious
 * wake-up in the run; the 8-iteration spin is SPINS = 1 try (a longer
 * spin only repeats the same load-and-CAS step). Three goroutines are the
 * fewest for a lost wake-up (a holder, a waiter woken, a second sleeper
 * that the woken one must cover, which is Drepper's bug) and for a
 * starving waiter beside a plain one.
 *
 * Properties:
 *   safety: mutual exclusion (assert); no unlock of an unlocked Mutex
 *     (assert, the panic in unlockSlow); the bound (assert): no goroutine
 *     takes the lock other than by claiming a hand-off while a starving
 *     waiter is asleep, so every Unlock after a waiter starves goes to a
 *     starving waiter; no invalid end state: every goroutine finishes, so
 *     none sleeps forever with the lock free or handed to nobody (no lost
 *     wake-up, also when a cancelled waiter leaves); when the last one
 *     finishes the word is 0 again (assert): no state, no hand-off, no
 *     starving waiter still counted.
 *   ltl all_done: under weak fairness every goroutine finishes (no retry
 *     loop cycles forever).
 *   ltl handoff_ends: under weak fairness a hand-off, once made, is
 *     always claimed or released: the lock never stays handed to nobody.
 *
 * A hand-off is never taken back by the Unlock that made it: when its
 * wake-up finds no starving waiter asleep, one counted is on its way and
 * claims at its next look, and a starving waiter that leaves cancelled
 * releases a hand-off that it leaves with nobody counted (leaveStarving,
 * one CAS). A take-back after the wake-up (as before) broke the bound:
 * between the wake-up and the take-back the counted waiter could claim,
 * unlock and hand off to a second starving waiter asleep, and the take-back
 * released that hand-off to a re-locker. -DTAKEBACK restores the old
 * take-back and SPIN rejects it on the bound at CI's bounds (-DROUNDS=1
 * -DROUNDS0=2). It stayed hidden while the model's plain wake-up
 * (wait.pml's wake_n) also woke the starving waiters, which Go's
 * wait.Wake passes by: wake_plain below is the exact one.
 *
 * Negative controls:
 *   -DBROKEN_STORE1     a waiter that slept takes a free lock as 1, not 2
 *                       (Drepper's bug): a second sleeper is never woken.
 *   -DBROKEN_CANCEL     a cancelled waiter leaves even after a wake-up
 *                       chose it, swallowing it.
 *   -DBROKEN_NO_TAKEBACK  the last starving waiter to leave cancelled
 *                       leaves a pending hand-off in place: stranded.
 *   -DBROKEN_OVERTAKE   Unlock releases even while waiters starve (no
 *                       hand-off): the bound's assertion fails.
 * Mutations (models/mutations.txt; each must be rejected):
 *   -DBROKEN_KEEP_STARVER  claiming a hand-off leaves the claimer counted
 *                       as starving (the word is not 0 at the end).
 *   -DBROKEN_CANCEL_COUNTED  a starving waiter that is cancelled stays
 *                       counted.
 *   -DBROKEN_NO_WAKE    unlockSlow releases without waking (dropped wake).
 *   -DBROKEN_SPLIT_CAS  the fast path's CAS 0→1 as a load then a store
 *                       (a non-atomic check).
 *   -DBROKEN_WAKE_NEW   Unlock tests the new value, not the old, for the
 *                       contended state (an off-by-one: never wakes).
 *   -DBROKEN_WAKE_FIRST the hand-off wakes the starving waiter before it
 *                       sets the hand-off bit (two steps swapped).
 */
#define NG 3
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef ROUNDS0
#define ROUNDS0 ROUNDS /* goroutine 0's rounds: 2 makes it the greedy re-locker */
#endif
#define SPINS 1
#include "wait.pml"

#define UNLOCKED 0
#define LOCKED 1
#define CONTENDED 2
#define STATE 3
#define HANDOFF 4
#define STARVER 8
#define STARVERS 248 /* bits 3-7: the starving count */
#define STARVE_KEY 1
#define W 0 /* the word's address */

byte w;             /* the lock word */
byte incs;          /* goroutines in the critical section */
byte done;          /* goroutines finished */
hidden byte nw;     /* scratch: waiters woken by a keyed wake */

#define ASLEEP_STARVER(k) (k < NG && parked[k] && waddr[k] == W && wkey[k] == STARVE_KEY)
#define NO_STARVER_ASLEEP (!ASLEEP_STARVER(0) && !ASLEEP_STARVER(1) && !ASLEEP_STARVER(2))
#define handed ((w & HANDOFF) != 0)

/* wake_plain: wait.Wake(&state, 1), which wakes one waiter parked
 * without a key and passes the starving (keyed) ones by. wait.pml's wake_n
 * with keyed false wakes keyed waiters too, a superset that would hide a
 * release made while a starving waiter sleeps (the bound). */
#define ASLEEP_PLAIN(k) (k < NG && parked[k] && waddr[k] == W && wkey[k] == 0)
inline wake_plain() {
	atomic {
		if
		:: ASLEEP_PLAIN(0) -> parked[0] = false
		:: ASLEEP_PLAIN(1) -> parked[1] = false
		:: ASLEEP_PLAIN(2) -> parked[2] = false
		:: else -> skip
		fi
	}
}

/* wake_starver: wait.WakeKey(&state, mutexStarveKey, 1), reporting in nw
 * whether it woke anyone (any asleep starving waiter: a superset of FIFO). */
inline wake_starver() {
	atomic {
		nw = 0;
		if
		:: ASLEEP_STARVER(0) -> parked[0] = false; nw = 1
		:: ASLEEP_STARVER(1) -> parked[1] = false; nw = 1
		:: ASLEEP_STARVER(2) -> parked[2] = false; nw = 1
		:: else -> skip
		fi
	}
}

active [NG] proctype G() {
	byte self = _pid;
	byte r, i, s;
	bool err;
	bool ctx = (self == NG - 1); /* this one uses LockContext */
	bool cancelled = false;
	bool slept, starving;

	for (r : 1 .. (self == 0 -> ROUNDS0 : ROUNDS)) {
		slept = false;
		starving = false;
		/* Lock / LockContext fast path: CAS 0→1 */
#ifdef BROKEN_SPLIT_CAS
		if :: w == UNLOCKED -> w = LOCKED; goto locked :: else -> skip fi;
#else
		atomic { if :: w == UNLOCKED -> assert(NO_STARVER_ASLEEP); w = LOCKED; goto locked :: else -> skip fi };
#endif
		/* lockSlowContext: spin, Load then CAS(s, s|1), not while starving */
		for (i : 1 .. SPINS) {
			atomic {
				if
				:: (w & STARVERS) == 0 && (w & STATE) == UNLOCKED -> assert(NO_STARVER_ASLEEP); w = w | LOCKED; goto locked
				:: else -> skip
				fi
			}
		}
		/* the sleep loop: each Load and CAS of one pass is one step (a CAS
		 * that fails because the word changed is a pass not yet taken);
		 * the park below is a separate step on the value loaded here */
look:
		atomic {
			s = w;
			if
			:: starving && (s & HANDOFF) != 0 ->
				/* claim the hand-off and stop counting ourselves */
#ifdef BROKEN_KEEP_STARVER
				w = s - HANDOFF; starving = false; goto locked
#else
				w = s - HANDOFF - STARVER; starving = false; goto locked
#endif
			:: !(starving && (s & HANDOFF) != 0) && (s & STATE) == UNLOCKED ->
				/* free: take it as 2 */
				assert(NO_STARVER_ASLEEP);
#ifdef BROKEN_STORE1
				w = s | LOCKED;
#else
				w = s | CONTENDED;
#endif
				if :: starving -> w = w - STARVER; starving = false :: else -> skip fi;
				goto locked
			:: !(starving && (s & HANDOFF) != 0) && (s & STATE) != UNLOCKED && !starving && slept ->
				/* waited past the threshold (or, the next branch, not yet) */
				w = ((s & ~STATE) | CONTENDED) + STARVER; starving = true; goto look
			:: !(starving && (s & HANDOFF) != 0) && (s & STATE) != UNLOCKED ->
				w = (s & ~STATE) | CONTENDED; s = w
			fi
		};
		slept = true;
		if
		:: starving -> wait_enqueue(self, W, w, s, STARVE_KEY)
		:: else -> wait_enqueue(self, W, w, s, 0)
		fi;
#ifdef BROKEN_CANCEL
		/* cancel allowed even after a wake-up dequeued us */
		if
		:: ctx && !cancelled -> cancelled = true; parked[self] = false; err = true
		:: else -> wait_sleep(self, false, err)
		fi;
#else
		wait_sleep(self, ctx && !cancelled, err);
#endif
		if
		:: err ->
			/* LockContext returns ctx.Err(); a starving waiter uncounts itself */
			cancelled = true;
#ifndef BROKEN_CANCEL_COUNTED
			if
			:: starving ->
				/* leaveStarving: uncount; the last one counted
				 * releases a pending hand-off, in the same CAS */
				starving = false;
				atomic {
					w = w - STARVER;
					s = 0;
#ifndef BROKEN_NO_TAKEBACK
					if
					:: (w & HANDOFF) != 0 && (w & STARVERS) == 0 -> w = w & ~(HANDOFF | STATE); s = 128
					:: else -> skip
					fi
#endif
				};
				if :: s == 128 -> wake_plain() :: else -> skip fi
			:: else -> skip
			fi;
#endif
			goto next
		:: else -> goto look
		fi;
locked:
		incs++;
		assert(incs == 1);
		incs--;
		/* Unlock: new := Add(-1); if new != 0 { unlockSlow(new) } */
		atomic { assert((w & STATE) != UNLOCKED); w--; s = w };
		if
#ifdef BROKEN_WAKE_NEW
		:: (s & STATE) == CONTENDED ->
#else
		:: ((s + 1) & STATE) == CONTENDED ->
#endif
			/* unlockSlow from 2, a later step: hand off if someone
			 * starves, else release and wake */
			atomic {
				if
#ifdef BROKEN_OVERTAKE
				:: true -> w = w & ~STATE; goto release
#else
#ifdef BROKEN_WAKE_FIRST
				:: (w & STARVERS) != 0 -> w = (w & ~STATE) | CONTENDED
#else
				:: (w & STARVERS) != 0 -> w = (w & ~STATE) | CONTENDED | HANDOFF
#endif
				:: else -> w = w & ~STATE; goto release
#endif
				fi
			};
			/* i: whether it woke anyone (nw is hidden, kept out of the
			 * state vector, so it is copied in the same step) */
			atomic { wake_starver(); i = nw };
#ifdef BROKEN_WAKE_FIRST
			w = w | HANDOFF;
#endif
#ifndef TAKEBACK
			/* nobody asleep: a counted starving waiter claims it, or the
			 * last to leave releases it */
			goto next;
#else
			/* the old take-back, Load then CAS: breaks the bound */
			if
			:: i != 0 -> goto next
			:: else -> skip
			fi;
			atomic {
				if
				:: (w & HANDOFF) == 0 -> goto next
				:: else -> w = w & ~(HANDOFF | STATE)
				fi
			};
#endif
release:
#ifndef BROKEN_NO_WAKE
			wake_plain()
#else
			skip
#endif
		:: else -> skip /* from 1: the decrement released it */
		fi;
next:
		skip
	}
	atomic { done++; assert(done < NG || w == 0) }
}

ltl all_done { <> (done == NG) }
ltl handoff_ends { [] (handed -> <> !handed) }
