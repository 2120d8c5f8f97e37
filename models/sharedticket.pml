/*
 * sharedticket.pml: SharedTicketMutex, the robust ticket queue: a record
 * per outstanding ticket, claimed by CAS before next advances, so that
 * every ticket names its owner; waiters asleep keyed by ticket; a dead
 * owner's ticket retired by a waiter that proves it dead (skipped if it
 * only waited, the lock marked inconsistent if it held); abandoned tickets
 * skipped by whoever serves them or adopted by their process's next
 * waiter; a holder that released and then died.
 *
 * Mirrors sharedqueue.go on main (its record state table):
 * models: shm/queue.go (*ticketQueue).take
 * models: shm/queue.go (*ticketQueue).claimed
 * models: shm/queue.go (*ticketQueue).adopt
 * models: shm/queue.go (*ticketQueue).hold
 * models: shm/queue.go (*ticketQueue).finish
 * models: shm/queue.go (*ticketQueue).serveTicket
 * models: shm/queue.go (*ticketQueue).retireTicket
 * models: shm/queue.go (*ticketQueue).retireIfStalled
 * models: shm/queue.go (*ticketQueue).waitServing
 * models: shm/queue.go (*ticketQueue).markSleeping
 * models: shm/queue.go (*ticketQueue).acquire
 * models: shm/queue.go (*ticketQueue).abandon
 * models: shm/queue.go (*ticketQueue).acceptHold
 * models: shm/queue.go (*ticketQueue).release
 * models: shm/queue.go (*ticketQueue).markConsistent
 * models: shm/ticket.go (*TicketMutex).LockContext
 *
 * Words: next and serving count mod 16 from 12 (so runs wrap; Go: 2^32);
 * R = 2 records (Go: 64) at ticket mod 2, each (ticket, owner token,
 * state, sleeping bit) changed as one word by CAS; flags inconsistent and
 * not recoverable (statistics not modelled).
 *
 * Processes, one goroutine each (the gate in front, a process-local
 * TicketMutex, is ticket.pml's: giving up there changes no shared word):
 * A (token 1) calls LockContext, then Lock, which adopts A's abandoned
 * ticket if nobody skipped it yet. LockContext's context may end at every
 * step where the Go code looks at it: in take (after an undone claim, or
 * any try: no record is A's then), at every look at serving in the wait
 * (also served meanwhile: abandon's look at serving passes the turn on),
 * and in the kernel sleep, which it ends; B (token 2) calls Lock once and may die at any
 * step (of take, the wait, the hold, Unlock: so also after its Unlock
 * moved serving and before it freed its record); once B is dead, C
 * (token 3) calls Lock once. Lock runs the repair on ErrOwnerDead
 * (MarkConsistent). A kernel sleep ends by a keyed wake-up, by its
 * 10 ms slice once B is dead, or by one early slice end while all live
 * (SPURIOUS = 1), after which the waiter looks at the served ticket
 * (retireIfStalled) before it sleeps again, as waitServing does once serving stood still
 * for 10 ms (the early slice is what lets a waiter look at a holder that
 * then releases and dies: the 48360fc case).
 *
 * Bounds: 3 processes (2 at a time), 4 acquisitions, one death, one
 * cancellation, 4 records (a record per outstanding ticket: A's abandoned
 * one, B's dead one, C's and A's next; 4 divides the counter range, as 64
 * divides 2^32; runs issue up to 5 tickets, so records are reused).
 * check.sh runs the whole setting without the early slice (8 M states)
 * and, with it, without C (-DNO_C: B's death is then taken over by A's
 * second Lock; 0.2 M states), which is also where the liveness claim and
 * the negative controls run. With both C and the early slice it is 18 M
 * states (a minute here): run by hand. Not covered: the full queue (more than R processes
 * waiting: the oldest-ticket wait), tryTake, the retire hook
 * (sharedrw.pml models SharedRWMutex's), a dying retirer (an actor that
 * dies mid-skip: the takeover of its job is the same CAS).
 *
 * -DA_LEAVES: A gives up and does not lock again (its abandoned ticket is
 * then passed on by abandon's look at serving or skipped by whoever serves
 * it, never adopted); -DB_TWICE: B locks twice, so a second acquisition
 * queues behind A's abandoned ticket. -DNOREPAIR: a taker unlocks without
 * MarkConsistent; from then on every acquisition fails with
 * ErrNotRecoverable, also one queued before that Unlock (acceptHold).
 *
 * Properties: never two holders; no hold after an Unlock that left the
 * lock inconsistent (assert); FIFO (a holder's ticket is later than
 * every live waiting ticket's); ErrOwnerDead exactly once per death of a
 * holder and never otherwise (the fix of 48360fc); no invalid end state;
 * ltl all_done under weak fairness: every live process finishes.
 *
 * Negative controls:
 *   -DBROKEN_RELEASED_DIED  retireTicket marks the lock inconsistent even when
 *                           the dead holder had moved serving on (before
 *                           48360fc).
 *   -DBROKEN_DROP_TURN      a waiter that gives up just leaves its record
 *                           waiting (never abandoned): its turn is lost.
 *   -DBROKEN_NO_CLAIM_CHECK take skips claimed(): a stale read of next
 *                           claims a ticket already served.
 *   -DBROKEN_NO_NOTREC      (with -DNOREPAIR, where a taker unlocks without
 *                           MarkConsistent) the release of an inconsistent
 *                           lock does not make it not recoverable: a later
 *                           acquirer holds unrepaired data (assert).
 *   -DBROKEN_ACCEPT_NOTREC  (with -DNOREPAIR) acceptHold does not look at
 *                           the not-recoverable flag: a waiter queued
 *                           before the unrepaired Unlock holds after it.
 *   -DBROKEN_NO_SERVING_RECHECK  abandon does not look at serving after it
 *                           marks its record abandoned: a ticket served in
 *                           between is served to nobody. Hidden while A
 *                           locks again (its next Lock adopts the ticket):
 *                           rejected with -DA_LEAVES -DB_TWICE, where A
 *                           gives up and leaves while B locks twice.
 *   -DBROKEN_CLAIM_CANCEL   take looks at ctx after a valid claim too and
 *                           returns ctx.Err() with the ticket claimed, not
 *                           abandoned: nobody is served after it.
 */
#define NG 3
#ifndef SPURIOUS
#define SPURIOUS 1
#endif
#define TIMEOUT_OK(self) (dead)
#include "wait.pml"

#define MOD 16
#define START 12
#define R 4
#define pos(d) ((((d) + MOD) % MOD) > 0 && (((d) + MOD) % MOD) < MOD / 2) /* int32(d) > 0 */
#define FREE 0
#define WAITING 1
#define HOLDING 2
#define ABANDONED 3
#define SKIPPING 4
#define SKIPDEAD 5
#define SERVING 0

byte next = START, serving = START;
byte rt[R], rtok[R], rst[R];
bool rsl[R];
bool inconsistent, notrec;
bool leftInconsistent;   /* ghost: an Unlock found the lock inconsistent */
bool dead, bDone, cDone;
byte holders, reports, deathsHolding, fin;
byte want = 2;           /* processes that will finish: A, B; C if B dies */
bool waiting[4];         /* ghost: process (by token) waits with ticket tk */
byte tk[4];

/* a record read as one word: compare all of it */
#define REC_IS(i, t, o, st, sl) (rt[i] == (t) && rtok[i] == (o) && rst[i] == (st) && rsl[i] == (sl))
#define REC_SET(i, t, o, st, sl) rt[i] = (t); rtok[i] = (o); rst[i] = (st); rsl[i] = (sl)

inline load_rec(t) { atomic { i = (t) % R; lt = rt[i]; lo = rtok[i]; ls = rst[i]; lsl = rsl[i] } }

/* retireTicket(s, state): retire ticket s, ours in state */
inline retireTicket(s, state) {
	if
	:: state == SKIPDEAD ->
#ifndef BROKEN_RELEASED_DIED
		if
		:: serving != s ->
			atomic { if :: REC_IS((s) % R, s, me, state, false) -> REC_SET((s) % R, 0, 0, FREE, false) :: else -> skip fi };
			goto completed
		:: else -> skip
		fi;
#endif
		inconsistent = true
	:: else -> skip
	fi;
	atomic { if :: serving == s -> serving = (s + 1) % MOD :: else -> skip fi };
	atomic { if :: REC_IS((s) % R, s, me, state, false) -> REC_SET((s) % R, 0, 0, FREE, false) :: else -> skip fi };
completed:
	skip
}

/* serveTicket(s): serve ticket s */
inline hand_on(s) {
	do
	:: s == next -> break
	:: else ->
		load_rec(s);
		if
		:: lt != s || ls == FREE -> break /* not claimed yet, or retired */
		:: ls == ABANDONED ->
			if
			:: atomic { REC_IS(i, lt, lo, ls, lsl) -> REC_SET(i, s, me, SKIPPING, false) } ->
				retireTicket(s, SKIPPING);
				s = (s + 1) % MOD
			:: else -> skip /* continue */
			fi
		:: ls == WAITING || ls == HOLDING ->
			if
			:: lsl -> wake_n(SERVING, 3, true, s)
			:: else -> skip
			fi;
			break
		:: else -> break
		fi
	od;
	i = 0; lt = 0; lo = 0; ls = 0; lsl = false
}

/* finish(t, record value): serving moves on, the record is freed, serve the next */
inline finish(t, st, sl) {
	atomic { serving = (serving + 1) % MOD; s2 = serving };
	atomic { if :: REC_IS((t) % R, t, me, st, sl) -> REC_SET((t) % R, 0, 0, FREE, false) :: else -> skip fi };
	if
	:: s2 != next -> hand_on(s2)
	:: else -> skip
	fi;
	s2 = 0
}

/* retireIfStalled(s): the served ticket stood still; retire it if its owner is dead or it was abandoned */
inline retireIfStalled(s) {
	load_rec(s);
	if
	:: lt != s || serving != s -> skip
	:: else ->
		nst = SKIPPING;
		if
		:: ls == ABANDONED -> ok = true
		:: ls == WAITING || ls == HOLDING || ls == SKIPPING || ls == SKIPDEAD ->
			/* tokenAlive: only B (token 2) dies */
			ok = (lo != me && lo == 2 && dead);
			if
			:: ok && ls == HOLDING -> nst = SKIPDEAD
			:: ok && (ls == SKIPPING || ls == SKIPDEAD) -> nst = ls
			:: else -> skip
			fi
		:: else -> ok = false
		fi;
		if
		:: atomic { ok && REC_IS(i, lt, lo, ls, lsl) -> REC_SET(i, s, me, nst, false) } ->
			retireTicket(s, nst);
			s3 = (s + 1) % MOD;
			hand_on(s3);
			s3 = 0
		:: else -> skip
		fi
	fi;
	ok = false; nst = 0; i = 0; lt = 0; lo = 0; ls = 0; lsl = false
}

/* take(true): claim the next ticket; held: it was free and is ours at once */
inline take() {
	do
	:: true ->
		n = next;
		load_rec(n);
		if
		:: ls != FREE ->
			if
			:: lt == n -> atomic { if :: next == n -> next = (n + 1) % MOD :: else -> skip fi }
			:: else ->
				if
				:: next != n -> skip
				:: pos(serving - lt) -> atomic { if :: REC_IS(i, lt, lo, ls, lsl) -> REC_SET(i, 0, 0, FREE, false) :: else -> skip fi }
				:: else -> assert(false) /* full: not reached with one ticket per process */
				fi
			fi
		:: else ->
			held = (serving == n);
			if
			:: atomic { REC_IS(i, 0, 0, FREE, false) -> REC_SET(i, n, me, (held -> HOLDING : WAITING), false) } ->
#ifndef BROKEN_NO_CLAIM_CHECK
				/* claimed: n may have been served meanwhile */
				if
				:: pos(serving - n) ->
					atomic { if :: REC_IS(i, n, me, (held -> HOLDING : WAITING), false) -> REC_SET(i, 0, 0, FREE, false) :: else -> skip fi };
					goto retake
				:: else -> skip
				fi;
#endif
				atomic { if :: next == n -> next = (n + 1) % MOD :: else -> skip fi;
					tk[me] = n; waiting[me] = !held }; /* ghost: a valid claim */
				t = n; n = 0; i = 0; lt = 0; lo = 0; ls = 0; lsl = false;
#ifdef BROKEN_CLAIM_CANCEL
				if :: mayCancel && !held -> res = 2; mayCancel = false :: else -> skip fi; /* ctx looked at after a valid claim */
#endif
				break
			:: else -> skip
			fi
		fi;
retake:		n = 0;
		/* ctx looked at (every retryCheckEvery tries, and after an undone
		   claim: any try here); no record is ours */
		if :: mayCancel -> res = 2; mayCancel = false; break :: true -> skip fi
	od
}

/* LockContext (or Lock: mayCancel false); res 0 nil, 1 ErrOwnerDead, 2 ctx error, 3 not recoverable */
inline lock(mayCancel) {
	if
	:: notrec -> res = 3 /* acquire: not recoverable, before any ticket */
	:: else -> lock_body(mayCancel)
	fi
}

inline lock_body(mayCancel) {
	held = false; err = false;
	/* adopt */
	if
	:: hasAbandoned ->
		hasAbandoned = false;
		load_rec(ab);
		if
		:: atomic { lt == ab && ls == ABANDONED && lo == me && REC_IS(i, lt, lo, ls, lsl) -> REC_SET(i, ab, me, WAITING, false); waiting[me] = true; tk[me] = ab } ->
			t = ab; adopted = true
		:: else -> skip
		fi;
		i = 0; lt = 0; lo = 0; ls = 0; lsl = false
	:: else -> skip
	fi;
	if :: !adopted -> take() :: else -> skip fi;
	adopted = false;
	if
	:: held || res == 2 -> skip
	:: else ->
		/* waitServing(done: s == t), then hold */
		slept = false;
		do
		:: true ->
			s = serving;
			if
			:: s == t -> break
			:: notrec -> res = 3; break
			:: else -> skip
			fi;
			if
			:: mayCancel ->
				/* ctx.Err(): abandon(t) */
				mayCancel = false; err = false;
				res = 2;
#ifdef BROKEN_DROP_TURN
				waiting[me] = false;
#else
				atomic { assert(rt[t % R] == t && rtok[t % R] == me && rst[t % R] == WAITING);
					rst[t % R] = ABANDONED; rsl[t % R] = false; waiting[me] = false };
				ab = t; hasAbandoned = true;
				if
#ifndef BROKEN_NO_SERVING_RECHECK
				:: serving == t ->
#else
				:: false ->
#endif
					if
					:: atomic { REC_IS(t % R, t, me, ABANDONED, false) -> rst[t % R] = HOLDING } ->
						hasAbandoned = false;
						finish(t, HOLDING, false)
					:: else -> skip
					fi
				:: else -> skip
				fi;
#endif
				break
			:: !err -> skip /* a sleep that ctx ended (err) gives up */
			fi;
			if
			:: slept -> retireIfStalled(s); slept = false /* a slice ended with serving still s */
			:: else ->
				/* markSleeping, then FutexWaitBitset(serving, s, bit t) */
				atomic { if :: REC_IS(t % R, t, me, WAITING, false) -> rsl[t % R] = true :: else -> skip fi };
				wait_enqueue(me - 1, SERVING, serving, s, t);
				wait_sleep(me - 1, mayCancel, err);
				slept = true
			fi;
			s = 0
		od;
		s = 0;
		if
		:: res == 0 ->
			/* hold */
			atomic { assert(rt[t % R] == t && rtok[t % R] == me && rst[t % R] == WAITING); rst[t % R] = HOLDING; rsl[t % R] = false }
		:: else -> skip
		fi
	fi;
	if
#ifndef BROKEN_ACCEPT_NOTREC
	:: res == 0 && notrec ->
		/* acceptHold: made not recoverable meanwhile: pass the ticket on */
		waiting[me] = false; finish(t, HOLDING, false); res = 3
#endif
	:: else -> skip
	fi;
	if
	:: res == 0 ->
		/* acceptHold */
		atomic {
			waiting[me] = false;
			holders++;
			assert(holders == 1);
			assert(!leftInconsistent); /* no hold once an Unlock left it unrepaired */
			assert(!waiting[1] || 1 == me || pos(tk[1] - t));
			assert(!waiting[2] || 2 == me || pos(tk[2] - t));
			assert(!waiting[3] || 3 == me || pos(tk[3] - t));
			if :: inconsistent -> res = 1; reports++; assert(reports <= deathsHolding) :: else -> skip fi
		}
	:: else -> skip
	fi;
	held = false
}

/* Lock's repair, then Unlock */
inline unlock() {
	if
	:: res == 3 -> skip /* ErrNotRecoverable: not held */
	:: else ->
#ifndef NOREPAIR
		if :: res == 1 -> inconsistent = false :: else -> skip fi; /* MarkConsistent */
#endif
		holders--;
		/* release */
		atomic { assert(rt[t % R] == t && rtok[t % R] == me && rst[t % R] == HOLDING && serving == t); f = inconsistent;
#ifdef BROKEN_NO_NOTREC
			if :: f -> leftInconsistent = true :: else -> skip fi };
#else
			if :: f -> notrec = true; leftInconsistent = true :: else -> skip fi };
#endif
		finish(t, HOLDING, false);
		f = false
	fi
}

#define CLEAR_SCRATCH i = 0; lt = 0; lo = 0; ls = 0; lsl = false
#define LOCALS byte me, t, n, s, s2, s3, i, lt, lo, ls, nst, ab, res; bool lsl, ok, held, err, slept, f, hasAbandoned, adopted, mayCancel

active proctype A() {
	LOCALS;
	me = 1;
	mayCancel = true;
	lock(mayCancel);
	if
	:: res <= 1 -> unlock()
	:: else -> skip
	fi;
	res = 0;
#ifndef A_LEAVES
	mayCancel = false;
	lock(mayCancel);
	unlock();
#endif
	fin++
}

active proctype B() {
	LOCALS;
	me = 2;
	{ lock(mayCancel); unlock();
#ifdef B_TWICE
	res = 0; lock(mayCancel); unlock();
#endif
	atomic { fin++; bDone = true } } unless { dead }
}

#ifndef NO_C
active proctype C() {
	LOCALS;
	me = 3;
end_unused:
	dead; /* an end state: if B lives, C never comes */
	lock(mayCancel);
	unlock();
	fin++
}
#define C_COMES 1
#else
#define C_COMES 0
#endif

active proctype Killer() {
	if
	:: atomic { !bDone && !dead -> dead = true; want = want - 1 + C_COMES;
		/* B dies holding: its record held and served */
		if
		:: rtok[serving % R] == 2 && rt[serving % R] == serving && rst[serving % R] == HOLDING -> deathsHolding++
		:: else -> skip
		fi;
		holders = (rtok[serving % R] == 2 && rt[serving % R] == serving && holders == 1 -> 0 : holders);
		waiting[2] = false }
	:: skip
	fi
}

active proctype Check() {
end:	atomic { fin == want -> assert(reports == deathsHolding || !bDone && dead && reports < deathsHolding) }
}

ltl all_done { <> (fin == want) }
