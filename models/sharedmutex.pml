/*
 * sharedmutex.pml: SharedMutex, the robust shared mutex: an owner token
 * (process-table slot, generation) in the lock word, a waiters bit, the
 * inconsistent bit and the not-recoverable value; a process-local gate
 * (one goroutine per process sleeps in the kernel); a waiter that checks
 * the holder's liveness between kernel sleeps and takes over from a dead
 * holder with ErrOwnerDead; a dead process's slot reused by a new process
 * with a new generation.
 *
 * Mirrors sharedmutex.go and regionowner.go on main:
 * models: sharedmutex.go (*SharedMutex).Lock
 * models: sharedmutex.go (*SharedMutex).LockContext
 * models: sharedmutex.go (*SharedMutex).lockSlow
 * models: sharedmutex.go (*SharedMutex).lockSlowWait
 * models: sharedmutex.go (*SharedMutex).take
 * models: sharedmutex.go (*SharedMutex).Unlock
 * models: sharedmutex.go (*SharedMutex).unlockSlow
 * models: sharedmutex.go (*SharedMutex).MarkConsistent
 * models: sharedmutex.go (*SharedMutex).afterLocker
 * models: sharedownerdead.go repairAfterLocker
 * models: regionowner.go (*Region).tokenAlive
 * models: regionowner.go (*Region).attach
 * models: regionowner.go (*Region).nextGen
 *
 * Word (a byte here): bits 0-3 owner token = slot << 2 | generation
 * (generations 1..3; Go: 18 bits), 15 = not recoverable (Go: bits 0-27
 * all ones); bit 4 inconsistent; bit 5 waiters. Statistics and the timed
 * bit are not modelled. Process table: 2 slots, each a state (live bit |
 * generation) and whether the process behind its identity lives
 * (tokenAlive's /proc check, which the model takes as exact).
 *
 * Processes: A (slot 0) with two goroutines, which queue on A's gate (an
 * ideal mutex here: mutex.pml checks Mutex); B (slot 1), one goroutine,
 * which may die at any step; once B is dead, C attaches, reclaiming slot 1
 * with the next generation that no lock word names, and locks; C may die
 * too, at any step, including while it repairs after taking the lock from
 * B and in MarkConsistent. Every goroutine locks once (Lock with the
 * repair function: ErrOwnerDead → repair → MarkConsistent → Unlock).
 * With -DNOREPAIR a taker unlocks without MarkConsistent: the lock
 * becomes not recoverable, and every other acquirer must learn it (10 M
 * states: run by hand, not by check.sh).
 *
 * A kernel sleep ends by a wake-up, by the one spurious return, or by its
 * 10 ms slice once some process is dead (the slices exist to notice
 * deaths; the model grants them only then, so a lost wake-up among the
 * living still hangs). The liveness check runs at any time after a first
 * sleep (Go: every 10 ms): more often only adds interleavings.
 *
 * Bounds: 2 processes at a time, 3 incarnations, 4 goroutines, 2 deaths
 * (check.sh: safety with no spurious wake-up, 5 M states, where the 10 ms
 * slices after a death already end sleeps early; the liveness claim with
 * one death, -DONEDEATH, 3 M states).
 * Enough for a death at every step of Lock, Unlock, MarkConsistent and
 * the repair, a waiter of each kind (gate-queued, kernel sleeper, other
 * process), and a token whose slot is reused; generations wrap after 3
 * (nextGen skips any that a lock word names). Not covered: more slots,
 * the PID-namespace and boot-ID checks, a stopped (not dead) holder
 * (tokenAlive says alive, and waiters wait: nothing to check), TryLock,
 * LockContext's cancellation (mutex.pml checks that shape).
 *
 * Properties: never two holders (assert); ErrOwnerDead exactly once per
 * death of a holder, to one acquirer (assert at the end); with
 * -DNOREPAIR, every acquirer after the unrepaired unlock gets
 * ErrNotRecoverable; no invalid end state (no waiter asleep forever,
 * whether the holder unlocked or died); ltl all_done under weak fairness
 * (every live goroutine finishes).
 *
 * Negative controls:
 *   -DBROKEN_NO_WAITERS  the take after a sleep drops the waiters bit
 *                        (a second sleeper is never woken).
 *   -DBROKEN_PID_TOKEN   tokenAlive trusts the slot alone, not its
 *                        generation: a reused slot makes a dead holder
 *                        look alive, and its waiters wait forever
 *                        (all_done fails; they keep waking every slice,
 *                        so it is a livelock, not an end state).
 *   -DBROKEN_TAKEOVER    a taker from a dead holder does not mark the
 *                        lock inconsistent (the death goes unreported).
 */
#define NG 4
#define TIMEOUT_OK(self) (dead[1] || dead[2])
#include "wait.pml"

#define W 0
#define OWNER 15
#define NOTREC 15
#define INCONS 16
#define WAITERS 32
#define LIVE 4
#define GENS 3

byte word;
byte pstate[2] = LIVE | 1;  /* slot -> live | generation */
bool palive[2] = true;      /* the process behind the slot's identity lives */
bool dead[3];               /* process A, B, C died */
byte holders, reports, deathsHolding, notrecs;
bool unrepaired;            /* a taker unlocked without MarkConsistent */
byte fin;                   /* goroutines that finished */
byte want = 3;              /* goroutines that will finish: A's two, B, C, less the dead */
bool cAttached, bDone, cDone;

#define token(slot, gen) (((slot) << 2) | (gen))
#define tslot(t) ((t) >> 2)
#define tgen(t) ((t) & 3)
/* tokenAlive: the slot still carries this generation, live, and its process lives */
#define tokenAlive(t) (pstate[tslot(t)] == (LIVE | tgen(t)) && palive[tslot(t)])
#ifdef BROKEN_PID_TOKEN
#undef tokenAlive
#define tokenAlive(t) ((pstate[tslot(t)] & LIVE) && palive[tslot(t)])
#endif

bool gate0; /* process A's gate */

/*
 * lock: res 0 nil, 1 ErrOwnerDead (held), 2 ErrNotRecoverable (not held).
 */
inline lock(self, tok, hasGate) {
	/* fast path: CAS 0 -> token */
	atomic { if :: word == 0 -> word = tok; res = 0; goto locked :: else -> skip fi };
	/* lockSlow: take(w, 0); then one look of the spin */
	atomic {
		if
		:: (word & OWNER) == NOTREC -> res = 2; goto locked
		:: (word & OWNER) == 0 -> word = (word & ~OWNER & ~INCONS) | tok; res = 0; goto locked
		:: else -> skip
		fi
	};
	if :: hasGate -> atomic { !gate0 -> gate0 = true } :: else -> skip fi;
	slept = false;
	do
	:: true ->
		w = word;
		if
		:: (w & OWNER) == 0 ->
			atomic {
				if
#ifdef BROKEN_NO_WAITERS
				:: word == w -> word = tok; res = 0; w = 0; break
#else
				:: word == w -> word = tok | WAITERS; res = 0; w = 0; break
#endif
				:: else -> skip
				fi
			}
		:: (w & OWNER) == NOTREC -> res = 2; w = 0; break
		:: else ->
			/* liveness check of a holder that is not us, after a first sleep */
			if
			:: slept && (w & OWNER) != tok && !tokenAlive(w & OWNER) ->
				atomic {
					if
#ifdef BROKEN_TAKEOVER
					:: word == w -> word = (w & WAITERS) | tok; res = 0; w = 0; break
#else
					:: word == w -> word = (w & WAITERS) | INCONS | tok; res = 1; w = 0;
						reports++; assert(reports <= deathsHolding); break /* one report per death, here */
#endif
					:: else -> skip
					fi
				}
			:: else ->
				if
				:: !(w & WAITERS) ->
					atomic {
						if
						:: word == w -> word = w | WAITERS; w = w | WAITERS
						:: else -> w = 255 /* CAS failed: look again */
						fi
					}
				:: else -> skip
				fi;
				if
				:: w != 255 ->
					wait_enqueue(self, W, word, w, 0);
					wait_sleep(self, false, err);
					slept = true
				:: else -> skip
				fi
			fi;
			w = 0
		fi
	od;
	if :: hasGate -> gate0 = false :: else -> skip fi;
locked:
	skip
}

inline unlock(self, tok) {
	atomic {
		assert((word & OWNER) == tok); /* else unlockMisuse panics */
		if
		:: word & INCONS -> word = NOTREC; wake_n(W, NG, false, 0)
		:: word & WAITERS -> word = 0; wake_n(W, 1, false, 0)
		:: else -> word = 0
		fi
	}
}

/* one acquisition with Lock and a repair function; the CS in between */
inline round(self, me, slot, gen) {
	lock(self, token(slot, gen), slot == 0);
	if
	:: res == 2 -> atomic { assert(unrepaired); notrecs++ }
	:: else ->
		atomic { holders++; assert(holders == 1); };
		if
		:: res == 1 ->
			/* repair, then MarkConsistent (CAS the inconsistent bit off) */
#ifdef NOREPAIR
			unrepaired = true
#else
			atomic { assert((word & OWNER) == token(slot, gen)); word = word & ~INCONS }
#endif
		:: else -> skip
		fi;
		holders--;
		unlock(self, token(slot, gen))
	fi;
	res = 0
}

active [2] proctype A() {
	byte self = _pid;
	byte w, res;
	bool slept, err;
	round(self, 0, 0, 1);
	fin++
}

active proctype B() {
	byte self = 2;
	byte w, res;
	bool slept, err;
	{ round(self, 1, 1, 1); atomic { fin++; bDone = true } } unless { dead[1] }
}

active proctype C() {
	byte self = 3;
	byte w, res, gen;
	bool slept, err;
	/* attach once B is dead: reclaim slot 1 (no free slot) */
end_unused:
	dead[1]; /* (an end state: if B lives, C never comes) */
	atomic {
		gen = pstate[1] & 3;
		pstate[1] = gen /* not live while the identity changes */
	};
	/* nextGen: the next generation no lock word names */
	do
	:: gen = gen % GENS + 1;
		if
		:: (word & OWNER) != token(1, gen) -> break
		:: else -> skip
		fi
	od;
	atomic { palive[1] = true; pstate[1] = LIVE | gen; cAttached = true; want++ };
	{ round(self, 2, 1, gen); atomic { fin++; cDone = true } } unless { dead[2] }
}

/* deaths: B at any step; C at any step after it attached */
active proctype Killer() {
	if
	:: atomic { !dead[1] && !bDone -> dead[1] = true; palive[1] = false; want--;
		if :: (word & OWNER) == token(1, 1) -> deathsHolding++; holders = 0 :: else -> skip fi }
	:: skip
	fi;
#ifndef ONEDEATH
	if
	:: atomic { cAttached && !dead[2] && !cDone -> dead[2] = true; palive[1] = false; want--;
		if :: (word & OWNER) == token(1, pstate[1] & 3) && (pstate[1] & LIVE) -> deathsHolding++; holders = 0 :: else -> skip fi }
	:: skip
	fi
#endif
}

/* at the end: one ErrOwnerDead per death of a holder, unless the lock
   ended with a dead holder and nobody left to take it */
active proctype Check() {
end:	atomic {
		fin == want && (!dead[1] || cAttached) ->
#ifndef NOREPAIR
		assert(reports == deathsHolding || (word & OWNER) != 0)
#else
		skip
#endif
	}
}

ltl all_done { <> (fin == want && (!dead[1] || cAttached)) }
