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
 * models: shm/mutex.go (*Mutex).Lock
 * models: shm/mutex.go (*Mutex).LockContext
 * models: shm/mutex.go (*Mutex).lockSlow
 * models: shm/mutexwaiter.go (*Mutex).lockSlowWait
 * models: shm/mutexwaiter.go (*Mutex).spin
 * models: shm/mutexwaiter.go (*sharedMutexWaiter).queue
 * models: shm/mutexwaiter.go (*sharedMutexWaiter).round
 * models: shm/mutexwaiter.go (*sharedMutexWaiter).takeFree
 * models: shm/mutexwaiter.go (*sharedMutexWaiter).checkHolder
 * models: shm/mutexwaiter.go (*sharedMutexWaiter).takeOver
 * models: shm/mutexwaiter.go (*sharedMutexWaiter).sleep
 * models: shm/mutexwaiter.go (*sharedMutexWaiter).giveUp
 * models: shm/mutex.go (*Mutex).take
 * models: shm/mutex.go (*Mutex).Unlock
 * models: shm/mutex.go (*Mutex).unlockSlow
 * models: shm/mutex.go (*Mutex).MarkConsistent
 * models: shm/mutex.go (*Mutex).afterLocker
 * models: shm/ownerdead.go repairAfterLocker
 * models: shm/regionowner.go (*Region).tokenAlive
 * models: shm/regionowner.go (*Region).attach
 * models: shm/regionowner.go (*Region).nextGen
 * models: shm/handoff.go (*Mutex).grant
 * models: shm/handoff.go (*Mutex).takeFromDead
 * models: shm/handoff.go (*sharedMutexWaiter).askHandoff
 * models: shm/handoff.go (*sharedMutexWaiter).takeGrant
 * models: shm/handoff.go (*sharedMutexWaiter).settle
 * models: shm/handoff.go (*sharedMutexWaiter).withdraw
 * models: shm/handoff.go handoffRequest
 *
 * The C library (c/sharedmutex.c, c/regionowner.c) runs the same protocol
 * on the same words; its steps, each beside the Go function the model
 * step mirrors (checked by TestModelsNameLiveCode). The C gate is a futex
 * word of its own where Go uses a lockword.Mutex; the C side has no
 * spin phase and no statistics beyond the stamp:
 *            step         Go                                  C
 * models-c: lock         (*Mutex).Lock                 c/sharedmutex.c lw_mutex_lock
 * models-c: lock-timed   (*Mutex).LockContext          c/sharedmutex.c lw_mutex_timedlock_pid
 * models-c: slow         (*Mutex).lockSlow             c/sharedmutex.c lock_slow
 * models-c: wait         (*Mutex).lockSlowWait         c/sharedmutex.c lock_slow_wait
 * models-c: take         (*Mutex).take                 c/sharedmutex.c take
 * models-c: unlock       (*Mutex).Unlock               c/sharedmutex.c lw_mutex_unlock
 * models-c: repair       (*Mutex).MarkConsistent       c/sharedmutex.c lw_mutex_consistent
 * models-c: gate         (*Mutex).LockContext                c/sharedmutex.c gate_lock
 * models-c: gate-open    (*Mutex).Unlock                     c/sharedmutex.c gate_unlock
 * models-c: grant        (*Mutex).grant                c/sharedmutex.c grant
 * models-c: take-dead    (*Mutex).takeFromDead         c/sharedmutex.c take_from_dead
 * models-c: withdraw     (*sharedMutexWaiter).withdraw       c/sharedmutex.c withdraw
 * models-c: request      handoffRequest                      c/sharedmutex.c handoff_request
 * models-c: alive        (*Region).tokenAlive                c/regionowner.c token_alive
 * models-c: attach       (*Region).attach                    c/regionowner.c attach
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
 * -DNOREPAIR: a taker unlocks without MarkConsistent; the lock becomes
 * not recoverable, and every other acquirer must learn it.
 *
 * A kernel sleep ends by a wake-up, the one spurious return, or its 10 ms
 * slice once some process is dead (the model grants slices only then, so
 * a lost wake-up among the living still hangs). The liveness check runs at
 * any time after a first sleep (Go: every 10 ms): a superset.
 *
 * Bounds: 2 processes at a time, 3 incarnations, 4 goroutines, 2 deaths
 * (-DONEDEATH: one; check.sh's runs and their states: README.md).
 * Enough for a death at every step of Lock, Unlock, MarkConsistent and
 * the repair, a waiter of each kind (gate-queued, kernel sleeper, other
 * process), and a token whose slot is reused; generations wrap after 3
 * (nextGen skips any that a lock word names). Not covered: more slots,
 * the PID-namespace and boot-ID checks, a stopped (not dead) holder
 * (alive: waiters wait), TryLock, LockContext's cancellation (-DCANCEL).
 *
 * Properties: never two holders (assert); ErrOwnerDead exactly once per
 * death of a holder, to one acquirer (assert at the end); with -DNOREPAIR,
 * every acquirer after the unrepaired unlock gets ErrNotRecoverable; no
 * invalid end state (no waiter asleep forever); ltl all_done under weak
 * fairness (every live goroutine finishes).
 *
 * Negative controls:
 *   -DBROKEN_NO_WAITERS  the take after a sleep drops the waiters bit
 *                        (a second sleeper is never woken).
 *   -DBROKEN_PID_TOKEN   tokenAlive trusts the slot, not its generation: a
 *                        reused slot makes a dead holder look alive; its
 *                        waiters wake every slice for ever (all_done fails).
 *   -DBROKEN_TAKEOVER    a taker from a dead holder does not mark the
 *                        lock inconsistent (the death goes unreported).
 *   -DBROKEN_NO_NOTREC   (with -DNOREPAIR) an Unlock of an inconsistent
 *                        lock frees it instead of making it not
 *                        recoverable: a later acquirer holds an unrepaired
 *                        lock (assert: no hold after such an Unlock).
 *
 * -DHANDOFF: the hand-off word instead (issue 11.1), a model of its own
 * below the first: three processes U (slot 0, UROUNDS rounds, default 2:
 * the greedy re-locker), T and V (slots 1, 2, one round each), one
 * goroutine each, no slot reuse, any one (DEATHS=1, the default) or two
 * (-DDEATHS=2) of them dying at any step (states and times: README.md). A
 * waiter that has slept may file a request at any time (the 1 ms: a
 * superset), also replacing a dead process's request; Unlock grants a
 * request (hand-off word CAS, then the lock word CAS) or releases and then
 * withdraws a request that it missed; a granted waiter waits for the word
 * to name it (Go: 100 us sleeps, here a guard: the word changes or its
 * holder is dead) and claims by clearing the hand-off word; a taker from a
 * dead holder takes plainly when the hand-off word grants the lock to that
 * dead holder itself, and clears any grant. Properties: never two holders;
 * every death of a process inside its hold (ghost cs[]: from the step that
 * makes the hold, the take CAS or the hand-off word's clear, to the step
 * that ends it, the release CAS or, for a granter, its second CAS, the one
 * on the lock word) reported by a later ErrOwnerDead, and no ErrOwnerDead
 * without such a death since the last one (so none for a dead grantee: the
 * plain take-back; a granter dead between its CASes is reported); no
 * invalid end state (nobody stranded), the word free or a dead process's
 * at the end; ltl all_done. -DCANCEL: T's context may end before any
 * round, and it ends T's sleeps: a round that finds it done takes a free
 * word or a dead holder's, settles a grant, or gives up (giveUp's
 * withdraw CAS: lost, a grant came: look again). ctx.Err() only with no
 * grant to T and the word not T's (assert). Giving up at the gate changes
 * no shared word (the gate is mutex.pml's). -DTAKEFREE_WITHDRAW: takeFree
 * (C: lock_slow_wait) before the fix: a lost take CAS with ctx done
 * withdrew and returned ctx.Err() though a grant may have come: SPIN
 * strands the lock on T (the code now gives up via giveUp, as modelled).
 * ltl all_done holds with CANCEL too: a give-up never leaves another
 * process waiting for ever. Values no later step reads are cleared (res
 * each round, a woken waiter's word: WAIT_FORGET; a sleep's result is
 * hidden), so states differ only in what the protocol reads next: that
 * made the CANCEL claim fit CI. Not covered: T = U (a request from the
 * holder's own process), the 1 s grace for forged words.
 * Negative controls:
 *   -DBROKEN_NO_PLAIN      every take from a dead holder is inconsistent:
 *                          a dead grantee's lock cries ErrOwnerDead.
 *   -DBROKEN_KEEP_GRANT    a take from a dead holder leaves a grant in the
 *                          hand-off word: a hold then begins while it is
 *                          granted (assert in HOLD), so a later holder's
 *                          death would be taken back plainly, unreported.
 *   -DBROKEN_NO_WITHDRAW   Unlock does not withdraw a request it missed: the
 *                          requester sleeps on it for ever.
 *   -DBROKEN_STALE_H       the taker decides plain or inconsistent by the
 *                          hand-off word it read before its CAS (the first
 *                          version of takeFromDead): the holder granted
 *                          and died in between, and a consistent lock is
 *                          reported ErrOwnerDead.
 *   -DBROKEN_GIVEUP_GRANTED (CANCEL) giveUp ignores its lost withdraw CAS.
 */
#ifdef HANDOFF
#define NG 3
#define WAIT_FORGET
#define TIMEOUT_OK(self) (dead[0] || dead[1] || dead[2])
#else
#define NG 4
#define TIMEOUT_OK(self) (dead[1] || dead[2])
#endif
#include "wait.pml"
#ifndef HANDOFF
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
bool leftInconsistent;      /* ghost: an Unlock found the lock inconsistent */
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
#ifdef BROKEN_NO_NOTREC
		:: word & INCONS -> leftInconsistent = true; word = 0; wake_n(W, NG, false, 0)
#else
		:: word & INCONS -> leftInconsistent = true; word = NOTREC; wake_n(W, NG, false, 0)
#endif
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
		atomic { holders++; assert(holders == 1); assert(!leftInconsistent) };
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
#else /* HANDOFF */
#define W 0
#define HW 1
#define OWNER 15
#define NOTREC 15
#define INCONS 16
#define WAITERS 32
#define GRANTED 128
#ifndef DEATHS
#define DEATHS 1
#endif
#ifndef UROUNDS
#define UROUNDS 2
#endif
byte word;                /* the lock word: token = slot << 2 | 1 */
byte hw;                  /* the hand-off word: token | GRANTED */
bool dead[3];             /* process p (slot p) died */
bool cs[3];               /* ghost: p is inside a hold (see the header) */
hidden byte herr;         /* a sleep's result: never read, not in the state */
bool finished[3];         /* p has done its rounds (then it cannot die) */
byte holders, fin, deaths;
bool unreported;          /* a process died inside a hold since the last ErrOwnerDead */
byte want = 3;
#define tok(p) (((p) << 2) | 1)
#define tslot(t) ((t) >> 2)
#define tokenAlive(t) (!dead[tslot(t)])
#define isRequest(h) ((h) != 0 && !((h) & GRANTED))
#ifndef CANCEL
#define CANCEL 0
#endif
#define CANCELS(p) (CANCEL && (p) == 1) /* T calls LockContext */
/* ctx.Err() returned: no grant to us stands, the word is not ours */
#define GAVE_UP(p) atomic { assert(hw != (tok(p) | GRANTED) && (word & OWNER) != tok(p)) }

/* hold starts: the decisive step of an acquisition. Never while the
   hand-off word is granted: that is what makes the plain take-back sound
   (granted => nobody inside a hold) */
#define HOLD(p) cs[p] = true; holders++; assert(holders == 1); assert(!(hw & GRANTED))
/* hold ends: the first step of Unlock that gives the lock up */
#define UNHOLD(p) cs[p] = false; holders--

/* giveUp: withdraw our request, res = 2 (a lost CAS is a grant: look again) */
inline hgiveup(p) {
	atomic {
		if
#ifndef BROKEN_GIVEUP_GRANTED
		:: req && hw != tok(p) -> skip
#endif
		:: else -> if :: req && hw == tok(p) -> hw = 0 :: else -> skip fi; res = 2
		fi
	};
	if :: res == 2 && slept -> wake_n(W, 1, false, 0) :: else -> skip fi /* pass on a wake-up we took */
}

/* hlock: res 0 nil, 1 ErrOwnerDead; no not-recoverable (every report is
   repaired: MarkConsistent is the inconsistent bit's CAS, below) */
inline hlock(p) {
	atomic { if :: word == 0 -> word = tok(p); res = 0; HOLD(p); goto hlocked :: else -> skip fi };
	slept = false; req = false;
	do
	:: true ->
#if CANCEL
		if :: CANCELS(p) && !ctx -> ctx = true :: true -> skip fi; /* ctx done, read once a round */
#endif
		d_step { w = word; res = 0 } /* res: nothing carried round */
		atomic { /* one load; the rest is local */
			h = hw;
			if :: (h & ~GRANTED) == tok(p) -> req = true :: else -> skip fi;
			if :: req && h != (tok(p) | GRANTED) && h != tok(p) -> req = false :: else -> skip fi
		};
		if
		:: req && h == (tok(p) | GRANTED) && (w & OWNER) == tok(p) ->
			/* claim: clear the grant (CAS) */
			atomic { if :: hw == h -> hw = 0 :: else -> assert(false) fi; res = 0; HOLD(p) };
			if :: w & WAITERS -> wake_n(W, 1, false, 0) :: else -> skip fi;
			break
		:: else -> skip
		fi;
		if
		:: (w & OWNER) == 0 ->
			atomic {
				if
				:: word == w -> word = tok(p) | WAITERS; res = 0; HOLD(p)
				:: else -> res = 9
				fi
			};
			if
			:: res == 0 ->
				if :: req -> atomic { if :: hw == tok(p) || hw == (tok(p) | GRANTED) -> hw = 0 :: else -> skip fi } :: else -> skip fi;
				break
			:: res == 9 && ctx -> /* the CAS lost, ctx done */
#ifdef TAKEFREE_WITHDRAW
				atomic { if :: req && hw == tok(p) -> hw = 0 :: else -> skip fi; res = 2 };
#else
				hgiveup(p);
#endif
				if :: res == 2 -> GAVE_UP(p); break :: else -> skip fi
			:: else -> skip
			fi
		:: (w & OWNER) != 0 && (w & OWNER) != tok(p) && (slept || ctx) && !tokenAlive(w & OWNER) ->
			/* takeFromDead: CAS the word to us, inconsistent; then read
			   the hand-off word (after the CAS: see sharedmutex.go) and,
			   granted, take plainly: clear the inconsistent bit, then the
			   grant. The ghost hold begins at the CAS if the hand-off word
			   is not granted then, else at the grant's clear. */
			atomic {
				if
				:: word == w -> word = (w & WAITERS) | INCONS | tok(p); res = 1;
					if :: !(hw & GRANTED) -> HOLD(p) :: else -> skip fi
				:: else -> res = 9
				fi
			};
			if
			:: res == 9 -> skip
			:: else ->
#ifdef BROKEN_STALE_H
				/* decide by the hand-off word read before the CAS */
#else
				h = hw;
#endif
				if
#ifndef BROKEN_NO_PLAIN
				:: (h & GRANTED) && (h & OWNER) == (w & OWNER) ->
					/* granted to the dead holder itself: it never returned */
					atomic { assert((word & OWNER) == tok(p)); word = word & ~INCONS; res = 0 };
#ifdef BROKEN_KEEP_GRANT
					atomic { if :: !cs[p] -> HOLD(p) :: else -> skip fi }
#else
					atomic { if :: hw == h -> hw = 0 :: else -> skip fi; if :: !cs[p] -> HOLD(p) :: else -> skip fi };
					wake_n(HW, NG, false, 0)
#endif
#endif
				:: else ->
					/* an owner death; a grant to another process (the dead
					   holder was handing over) is cleared */
					atomic { if :: (h & GRANTED) && hw == h -> hw = 0 :: else -> skip fi; if :: !cs[p] -> HOLD(p) :: else -> skip fi };
					if :: h & GRANTED -> wake_n(HW, NG, false, 0) :: else -> skip fi
				fi;
				if :: req -> atomic { if :: hw == tok(p) -> hw = 0 :: else -> skip fi } :: else -> skip fi;
				if :: res == 1 -> atomic { assert(unreported); unreported = false } :: else -> skip fi;
				break
			fi
		:: req && h == (tok(p) | GRANTED) && (w & OWNER) != tok(p) &&
		   !((slept || ctx) && !tokenAlive(w & OWNER)) ->
			/* granted, the word not ours yet: wait for the granter's CAS
			   (or its death, which the liveness check above takes) */
			slept = true;
			(word != w || !tokenAlive(w & OWNER));
			w = 0; h = 0
		:: (w & OWNER) != 0 && !(req && h == (tok(p) | GRANTED)) && ctx &&
		   !((w & OWNER) != tok(p) && !tokenAlive(w & OWNER)) ->
			hgiveup(p);
			if :: res == 2 -> GAVE_UP(p); break :: else -> skip fi
		:: (w & OWNER) != 0 && !(req && h == (tok(p) | GRANTED)) && !ctx &&
		   !(slept && (w & OWNER) != tok(p) && !tokenAlive(w & OWNER)) ->
			/* (a holder found dead after a sleep is taken over above: Go
			   checks every 10 ms, so a waiter cannot sleep past it) */
			if
			:: !req && slept && h == 0 ->
				/* starving: file a request, then look again */
				atomic { if :: hw == 0 -> hw = tok(p); req = true :: else -> skip fi }
			:: !req && slept && isRequest(h) && h != tok(p) && !tokenAlive(h) ->
				atomic { if :: hw == h -> hw = tok(p); req = true :: else -> skip fi }
			:: else ->
				if
				:: !(w & WAITERS) ->
					atomic {
						if
						:: word == w -> word = w | WAITERS; w = w | WAITERS
						:: else -> w = 255
						fi
					}
				:: else -> skip
				fi;
				if
				:: w == 255 -> skip
				:: w != 255 && req ->
					h = 0;
					wait_enqueue(p, HW, hw, tok(p), 0);
					w = 0;
					wait_sleep(p, CANCELS(p), herr);
					slept = true
				:: w != 255 && !req ->
					h = 0;
					wait_enqueue(p, W, word, w, 0);
					w = 0;
					wait_sleep(p, CANCELS(p), herr);
					slept = true
				fi
			fi
		:: else -> skip /* e.g. a take from a dead holder not yet due */
		fi
	od;
hlocked:
	w = 0; h = 0; slept = false; req = false
}

inline hunlock(p) {
	atomic {
		assert((word & OWNER) == tok(p));
		if :: word == tok(p) -> word = 0; UNHOLD(p); res = 7 :: else -> res = 0 fi
	};
	do
	:: res == 7 -> break
	:: else ->
		w = word;
		if
		:: !(w & INCONS) ->
			h = hw;
			if
			:: isRequest(h) ->
				atomic { if :: hw == h -> hw = h | GRANTED; res = 8 :: else -> skip fi }
			:: else -> skip
			fi
		:: else -> skip
		fi;
		if
		:: res == 8 ->
			/* move the word to the grantee (CAS retried while only flags change) */
			/* the hold ends here, not at the grant: a granter that dies
			   between its two CASes died holding, and is reported */
			atomic { assert((word & OWNER) == tok(p)); word = (word & WAITERS) | h; UNHOLD(p); assert(holders == 0) };
			wake_n(HW, NG, false, 0);
			break
		:: else ->
			atomic {
				if
				:: word == w -> if :: w & INCONS -> word = NOTREC :: else -> word = 0 fi; UNHOLD(p); res = 7
				:: else -> skip
				fi
			};
			if
			:: res == 7 ->
#ifndef BROKEN_NO_WITHDRAW
				h = hw;
				if
				:: isRequest(h) -> atomic { if :: hw == h -> hw = 0; wake_n(HW, NG, false, 0) :: else -> skip fi }
				:: else -> skip
				fi;
#endif
				if
				:: w & INCONS -> wake_n(W, NG, false, 0)
				:: w & WAITERS -> wake_n(W, 1, false, 0)
				:: else -> skip
				fi;
				break
			:: else -> skip
			fi
		fi
	od;
	w = 0; h = 0; res = 0
}

/* one acquisition; an ErrOwnerDead is repaired (MarkConsistent) in the CS */
inline hround(p) {
	hlock(p);
	if :: res == 1 -> atomic { assert((word & OWNER) == tok(p)); word = word & ~INCONS } :: else -> skip fi;
	if :: res != 2 -> hunlock(p) :: else -> res = 0 fi
}

active proctype U() {
	byte w, h, res;
	bool slept, req, ctx;
	{ hround(0);
#if UROUNDS > 1
	  hround(0);
#endif
	  atomic { fin++; finished[0] = true } } unless { dead[0] }
}

active proctype T() {
	byte w, h, res;
	bool slept, req, ctx;
	{ hround(1); atomic { fin++; finished[1] = true } } unless { dead[1] }
}

active proctype V() {
	byte w, h, res;
	bool slept, req, ctx;
	{ hround(2); atomic { fin++; finished[2] = true } } unless { dead[2] }
}

/* deaths: any process, at any step, up to DEATHS */
active proctype Killer() {
	byte k;
	do
	:: deaths < DEATHS ->
		if
		:: k = 0
		:: k = 1
		:: k = 2
		fi;
		atomic {
			if
			:: !dead[k] && !finished[k] -> dead[k] = true; deaths++; want--; parked[k] = false;
				if :: cs[k] -> unreported = true; cs[k] = false; holders-- :: else -> skip fi
			:: else -> skip
			fi;
			k = 0
		}
	:: true -> break
	od
}

/* at the end: every death inside a hold was reported (one ErrOwnerDead
   covers the deaths before it, as when a taker dies before it returns),
   unless the lock ended with a dead holder and nobody left to take it */
active proctype Check() {
end:	atomic {
		fin == want ->
		assert(!unreported || ((word & OWNER) != 0 && !tokenAlive(word & OWNER)));
		assert(!CANCEL || (word & OWNER) == 0 || !tokenAlive(word & OWNER)) /* not stranded */
	}
}

ltl all_done { <> (fin == want) }
#endif /* HANDOFF */
