/*
 * spinmutex.pml: SpinMutex, the test-and-test-and-set lock that spins,
 * yields, then parks, with its own word: a held bit, a hand-off bit, a
 * saturating count of starving waiters and a count of other sleepers.
 *
 * Mirrors spin.go on main:
 * models: spin.go (*SpinMutex).Lock
 * models: spin.go (*SpinMutex).LockContext
 * models: spin.go (*SpinMutex).lockSlowContext
 * models: spin.go (*SpinMutex).tryAcquire
 * models: spin.go (*SpinMutex).Unlock
 * models: spin.go (*SpinMutex).unlockSlow
 * models: spin.go (*SpinMutex).handoff
 * models: spin.go (*SpinMutex).leaveStarving
 *
 * Word (a byte here): bit 0 held, bit 1 handed off, then the starving
 * count, then the sleepers' count (spin.go: bits 2-7, at most 63 starving
 * waiters, and bits 8-30). The starving count is one bit wide here, so that
 * three goroutines reach its saturation: a second waiter that has waited
 * past the bound while the count is full stays an ordinary sleeper, as a
 * 64th does in Go. The statistics bit is not modelled (it only sends fast
 * paths down the slow path, which the model explores anyway).
 *
 * Each Load-then-CAS of the Go code is a load step and a separate CAS step
 * on the value loaded, so the word may change in between. The spin and
 * yield rounds are one look each (more rounds repeat the same step); the
 * starvation bound (1 ms since the yield phase began) is a nondeterministic
 * choice at each look of the park loop, so SPIN tries every timing.
 *
 * Bounds: NG = 3 goroutines (a holder, a starving waiter, a waiter that
 * finds the count saturated), ROUNDS = 1 each, goroutine 0 ROUNDS0 = 2
 * (the greedy re-locker), goroutine 2 uses LockContext and may be
 * cancelled once while asleep; one spurious wake-up.
 *
 * Properties: mutual exclusion (assert); no Unlock of an unlocked
 * SpinMutex (assert, its panic); the bound (assert): no goroutine takes a
 * free lock while a starving waiter is asleep; the word is 0 when everyone
 * is done (assert); no invalid end state (no lost wake-up, also with a
 * cancelled waiter); ltl all_done under weak fairness; ltl handoff_ends: a
 * hand-off is always claimed or released.
 *
 * A hand-off is never taken back by the Unlock that made it: when its
 * wake-up finds no starving waiter asleep, one counted is on its way and
 * claims at its next look, and a starving waiter that leaves cancelled
 * releases a hand-off that it leaves with nobody counted (leaveStarving,
 * one CAS). -DTAKEBACK restores the old take-back (after the wake-up that
 * found nobody, a Load then a CAS that releases a pending hand-off), and
 * SPIN rejects it on the bound: between that wake-up and the Load, the
 * counted starving waiter can claim, run, unlock and hand off to a second
 * starving waiter, which falls asleep; the stale take-back then sees the
 * new hand-off bit and releases it, and a re-locker's tryAcquire takes the
 * free lock while that waiter sleeps.
 *
 * Mutations (models/mutations.txt):
 *   -DBROKEN_NO_SATURATION  (not in the list: SPIN accepts it) a waiter
 *                           past the bound joins the starving count even
 *                           when it is full; the count carries into the
 *                           sleepers' count and the starving waiter is
 *                           demoted, which only the bound would see.
 *   -DBROKEN_NO_WAKE        unlockSlow releases without waking a sleeper.
 *   -DBROKEN_NO_TAKEBACK    the last starving waiter to leave cancelled
 *                           leaves a pending hand-off in place: stranded.
 *   -DBROKEN_KEEP_UNIT      a cancelled waiter stays counted.
 *   -DBROKEN_SPIN_STARVERS  (not in the list, as NO_SATURATION) the spin
 *                           phase competes while waiters starve.
 */
#define NG 3
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef ROUNDS0
#define ROUNDS0 2
#endif
#include "wait.pml"

#define HELD 1
#define HANDOFF 2
#define STARVER 4
#define STARVERS 4   /* the starving count's mask: one bit, saturates at 1 */
#define SLEEPER 8
#define COUNT 248    /* the sleepers' count (spinCount) */
#define STARVE_KEY 1
#define W 0

byte w;
byte incs, done;
hidden byte nw;

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

/* the bound, asserted at each take of a free lock */
#define BOUND assert(NO_STARVER_ASLEEP)
#define ASLEEP_STARVER(k) (k < NG && parked[k] && waddr[k] == W && wkey[k] == STARVE_KEY)
#define NO_STARVER_ASLEEP (!ASLEEP_STARVER(0) && !ASLEEP_STARVER(1) && !ASLEEP_STARVER(2))
#define handed ((w & HANDOFF) != 0)

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

/* tryAcquire(s): CAS(s, s|held) if s is free; a free lock is never taken
 * while a starving waiter sleeps (the bound) */
#define TRY_ACQUIRE(s) atomic { if :: ((s) & HELD) == 0 && w == (s) -> BOUND; w = (s) | HELD; goto locked :: else -> skip fi }

active [NG] proctype G() {
	byte self = _pid;
	byte r, s, unit;
	bool err;
	bool ctx = (self == NG - 1);
	bool cancelled = false;

	for (r : 1 .. (self == 0 -> ROUNDS0 : ROUNDS)) {
		/* Lock fast path: CAS 0→held */
		atomic { if :: w == 0 -> BOUND; w = HELD; goto locked :: else -> skip fi };
		/* lockSlowContext: tryAcquire(Load()) */
		s = w;
		TRY_ACQUIRE(s);
		/* the spin and yield rounds: not while waiters starve */
		s = w;
		if
#ifdef BROKEN_SPIN_STARVERS
		:: true -> TRY_ACQUIRE(s)
#else
		:: (s & STARVERS) == 0 -> TRY_ACQUIRE(s)
#endif
		:: else -> skip
		fi;
		/* park: count ourselves a sleeper */
		unit = SLEEPER;
		w = w + SLEEPER;
		do
		:: s = w;
			if
			:: unit == STARVER && (s & HANDOFF) != 0 ->
				/* claim the hand-off, stop counting ourselves */
				atomic { if :: w == s -> w = s - HANDOFF - STARVER; goto locked :: else -> skip fi }
			:: !(unit == STARVER && (s & HANDOFF) != 0) && (s & HELD) == 0 ->
				/* free: take it and stop counting ourselves, one CAS */
				atomic { if :: w == s -> BOUND; w = (s | HELD) - unit; goto locked :: else -> skip fi }
#ifdef BROKEN_NO_SATURATION
			:: !(unit == STARVER && (s & HANDOFF) != 0) && (s & HELD) != 0 && unit == SLEEPER ->
#else
			:: !(unit == STARVER && (s & HANDOFF) != 0) && (s & HELD) != 0 && unit == SLEEPER && (s & STARVERS) != STARVERS ->
#endif
				/* waited past the bound (or, the next branch, not yet) */
				atomic { if :: w == s -> w = s - SLEEPER + STARVER; unit = STARVER :: else -> skip fi }
			:: !(unit == STARVER && (s & HANDOFF) != 0) && (s & HELD) != 0 ->
				/* sleep while the word is unchanged */
				if
				:: unit == STARVER -> wait_enqueue(self, W, w, s, STARVE_KEY)
				:: else -> wait_enqueue(self, W, w, s, 0)
				fi;
				wait_sleep(self, ctx && !cancelled, err);
				if
				:: err ->
					cancelled = true;
#ifndef BROKEN_KEEP_UNIT
					/* leaveStarving for a starving waiter: the last
					 * one counted releases a pending hand-off, in the
					 * same CAS */
					atomic {
						w = w - unit;
						s = 0;
#ifndef BROKEN_NO_TAKEBACK
						if
						:: unit == STARVER && (w & HANDOFF) != 0 && (w & STARVERS) == 0 -> w = w & ~(HANDOFF | HELD); s = w & COUNT
						:: else -> skip
						fi
#endif
					};
					if :: (s & COUNT) != 0 -> wake_plain() :: else -> skip fi;
#endif
					goto next
				:: else -> skip
				fi
			fi
		od;
locked:
		incs++;
		assert(incs == 1);
		incs--;
		/* Unlock: CAS held→0, else unlockSlow */
		atomic { if :: w == HELD -> w = 0; goto next :: else -> skip fi };
		do
		:: s = w;
			assert((s & HELD) != 0);
			if
			:: (s & STARVERS) != 0 ->
				atomic { if :: w == s -> w = s | HANDOFF; break :: else -> skip fi }
			:: else ->
				atomic { if :: w == s -> w = s & ~HELD; s = s | 128 :: else -> skip fi };
				if
				:: s & 128 ->
					/* released: wake a sleeper if any is counted */
					s = s & ~128;
#ifndef BROKEN_NO_WAKE
					if :: (s & COUNT) != 0 -> wake_plain() :: else -> skip fi;
#endif
					goto next
				:: else -> skip
				fi
			fi
		od;
		/* handoff: wake the oldest starving waiter; if none is asleep, a
		 * counted one claims, or the last to leave releases */
		wake_starver();
#ifndef TAKEBACK
		goto next;
#endif
		/* the old take-back (-DTAKEBACK): breaks the bound */
		if
		:: nw != 0 -> goto next
		:: else -> skip
		fi;
		do
		:: s = w;
			if
			:: (s & HANDOFF) == 0 -> goto next /* claimed meanwhile */
			:: else ->
				atomic { if :: w == s -> w = s & ~(HANDOFF | HELD); s = s | 128 :: else -> skip fi };
				if
				:: s & 128 ->
					s = s & ~128;
					if :: (s & COUNT) != 0 -> wake_plain() :: else -> skip fi;
					goto next
				:: else -> skip
				fi
			fi
		od;
next:
		s = 0
	}
	atomic { done++; assert(done < NG || w == 0) }
}

ltl all_done { <> (done == NG) }
ltl handoff_ends { [] (handed -> <> !handed) }
