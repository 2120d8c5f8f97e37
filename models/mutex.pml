/*
 * mutex.pml: Mutex, the three-state futex mutex (Drepper, "Futexes Are
 * Tricky", mutex #3) with a spin phase, LockContext abandonment and
 * spurious wake-ups.
 *
 * Mirrors mutex.go on main:
 * models: mutex.go (*Mutex).Lock
 * models: mutex.go (*Mutex).LockContext
 * models: mutex.go (*Mutex).lockSlowContext
 * models: mutex.go (*Mutex).swap
 * models: mutex.go (*Mutex).Unlock
 * models: mutex.go (*Mutex).unlockSlow
 *
 * Word: 0 unlocked, 1 locked, 2 locked and waiters may sleep. The
 * statistics flag (bit 31) is not modelled: it only sends fast paths down
 * the slow path, which the model already explores.
 *
 * Bounds: NG = 3 goroutines, each locking ROUNDS = 2 times; goroutine 2
 * uses LockContext and may be cancelled while asleep; one spurious
 * wake-up in the run; the 8-iteration spin is SPINS = 2 tries. Three
 * goroutines are the fewest for a lost wake-up (a holder, a waiter woken,
 * a second sleeper that the woken one must cover, which is Drepper's bug);
 * two rounds let a goroutine come back while others sleep. A longer spin
 * only repeats the same load-and-CAS step.
 *
 * Properties: mutual exclusion (assert); no unlock of an unlocked Mutex
 * (assert, the panic in unlockSlow); no invalid end state: every goroutine
 * finishes, so none sleeps forever with the lock free (no lost wake-up,
 * also when a cancelled waiter leaves). Mutex promises no fairness, so
 * there is no liveness claim beyond that.
 *
 * Negative controls:
 *   -DBROKEN_STORE1   a woken waiter swaps in 1, not 2 (Drepper's bug): a
 *                     second sleeper is never woken.
 *   -DBROKEN_CANCEL   a cancelled waiter leaves even after a wake-up chose
 *                     it, swallowing it.
 */
#define NG 3
#define ROUNDS 2
#define SPINS 2
#include "wait.pml"

#define UNLOCKED 0
#define LOCKED 1
#define CONTENDED 2
#define W 0 /* the word's address */

byte state;
byte incs;          /* goroutines in the critical section */

active [NG] proctype G() {
	byte self = _pid;
	byte r, i, c;
	bool err;
	bool ctx = (self == NG - 1); /* this one uses LockContext */
	bool cancelled = false;

	for (r : 1 .. ROUNDS) {
		/* Lock / LockContext fast path: CAS 0→1 */
		atomic { if :: state == UNLOCKED -> state = LOCKED; goto locked :: else -> skip fi };
		/* lockSlowContext: spin, Load then CAS(s, s|1) */
		for (i : 1 .. SPINS) {
			atomic { if :: state == UNLOCKED -> state = LOCKED; goto locked :: else -> skip fi }
		}
		/* sleep: for c := swap(2); c != 0; c = swap(2) { wait(2) } */
		atomic { c = state; state = CONTENDED };
		do
		:: c == UNLOCKED -> break
		:: else ->
			wait_enqueue(self, W, state, CONTENDED, 0);
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
			:: err -> cancelled = true; goto next /* LockContext returns ctx.Err() */
			:: else -> skip
			fi;
#ifdef BROKEN_STORE1
			atomic { c = state; state = LOCKED };
#else
			atomic { c = state; state = CONTENDED };
#endif
		od;
locked:
		incs++;
		assert(incs == 1);
		incs--;
		/* Unlock: new := Add(-1); if new != 0 { unlockSlow(new) } */
		atomic { assert(state != UNLOCKED); state-- ; c = state };
		if
		:: c != UNLOCKED ->
			/* unlockSlow: the state was 2: store 0 (And statsFlag), wake one */
			state = UNLOCKED;
			wake_n(W, 1, false, 0)
		:: else -> skip
		fi;
next:
		skip
	}
}
