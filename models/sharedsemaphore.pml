/*
 * sharedsemaphore.pml: shm.Semaphore, the robust weighted semaphore in a
 * region: a guard (a robust mutex) under which every word changes, the
 * permits in use, one entry per process (permits held, owner token, queue
 * ticket), a FIFO queue by ticket, and seq, the word waiters sleep on, each
 * under its ticket's futex bit (keyed here by process): a bump wakes the
 * front ticket's process only.
 *
 * Mirrors shm/semaphore.go and shm/semaphorewaiter.go:
 * models: shm/semaphore.go (*Semaphore).tryTake
 * models: shm/semaphore.go (*Semaphore).Release
 * models: shm/semaphore.go (*Semaphore).lock
 * models: shm/semaphore.go (*Semaphore).unlock
 * models: shm/semaphore.go (*Semaphore).bumpSeq
 * models: shm/semaphore.go (*Semaphore).front
 * models: shm/semaphore.go (*Semaphore).take
 * models: shm/semaphore.go (*Semaphore).reclaim
 * models: shm/semaphore.go (*Semaphore).reap
 * models: shm/semaphore.go (*Semaphore).recount
 * models: shm/semaphorewaiter.go (*sharedSemWaiter).wait
 * models: shm/semaphorewaiter.go (*sharedSemWaiter).join
 * models: shm/semaphorewaiter.go (*sharedSemWaiter).round
 * models: shm/semaphorewaiter.go (*sharedSemWaiter).behind
 * models: shm/semaphorewaiter.go (*sharedSemWaiter).leave
 * models: shm/semaphorereclaim.go (*Region).reapSemaphores
 *
 * Bounds: capacity C = 2; NP = 3 processes (one goroutine each: the
 * in-process gate is an ordinary Mutex and not modelled) wanting 2, 1 and
 * 1 permits, ROUNDS acquisitions each (ROUNDS0 for process 0); one
 * process may die at any step (the killer; -DNODEATH: none), holding the
 * guard, permits or a ticket, or in the middle of a guard section. The
 * guard is a lock whose dead holder's guard is taken over and the counts
 * recomputed from the entries (the SharedMutex under it has its own
 * model). The 10 ms liveness check is a reap at every round; a sleep on
 * seq may end by its timeout only while a dead process's entry or guard
 * is unrecovered, or, for the process whose wake the dead one owed (it
 * bumped seq and died before its FUTEX_WAKE), until its next return from
 * a sleep (TIMEOUT_OK: the 10 ms slices are what covers that wake), so a
 * lost wake-up among the living is an invalid end state, and a waiter
 * that loops on timeouts does so only while a death is unrecovered (for
 * the liveness formula: the guard is a spin in the model, and a waiter
 * looping on free timeouts could take it for ever under weak fairness,
 * which the real guard, a mutex with a hand-off, does not allow).
 * Values no later step reads are cleared (a woken waiter's word and key:
 * WAIT_FORGET; the scratch of bump and reclaim; a sleep's result is
 * hidden), which changes no behaviour and halves the states.
 * -DHOUSEKEEP adds the reap of a Region Close after each
 * process's rounds (nightly). No PID reuse
 * (sharedmutex.pml models generations), no cancellation (the in-process
 * model does).
 *
 * Properties:
 *   - permits in use never exceed C: at every entry to the critical
 *     section, the permits of the living inside plus what dead processes
 *     still hold is at most C; the count word never passes C nor wraps
 *     below 0 (assert at every guard release by a live holder, with the
 *     count equal to the entries' sum);
 *   - recovered exactly once: the permits taken back never exceed what the
 *     dead held, and at the end they are all back (recovered + what dead
 *     entries still hold = what the dead held; after the last round every
 *     dead entry has been reaped, or is counted);
 *   - FIFO: a take outside the queue happens only while no live process
 *     holds a ticket. This is FIFO among tickets, one per process: the
 *     goroutines of a process that wait behind its ticket holder at the
 *     in-process gate hold no ticket (unmodelled), and other processes'
 *     later requests that draw tickets first are granted before them;
 *   - no lost wake-up: no invalid end state;
 *   - ltl all_done under weak fairness: every live process finishes its
 *     rounds (no cancellation here: every request is granted), also
 *     when a dead process's permits, ticket or guard must be taken back
 *     first: a waiter that times out for ever without recovering them
 *     is a cycle, not an end state, which only the formula rejects.
 *
 * Negative controls:
 *   -DBROKEN_NO_RECOUNT  a guard taken from a dead holder is used as it is:
 *                        a take cut between its two stores loses permits
 *                        from the count, and the semaphore over-grants.
 *   -DBROKEN_TWICE       a reclaim frees the permits but leaves the entry's
 *                        count: the next reap returns them again.
 *   -DBROKEN_NO_WAKE     Release bumps seq without waking the sleepers.
 *   -DBROKEN_BARGE       the first try ignores the queue.
 *   -DBROKEN_LIVE        a reap takes back a live process's permits.
 *   -DBROKEN_TAKEOVER_NO_BUMP a guard taken from a dead holder is not
 *                        followed by a bump and wake: a Release cut after
 *                        freeing its permits leaves the waiters asleep.
 *   -DBROKEN_WRONG_WAKE  a bump wakes the process after the front's (in
 *                        process order) instead of the front's: the front
 *                        sleeps on, a lost wake-up.
 *   -DBROKEN_CLEAR_SLEEPERS a bump clears the sleepers flag although
 *                        tickets still queue (the wake-all rule's bump): the
 *                        waiter behind the front is never woken.
 *   -DBROKEN_ROUND_NO_REAP a waiter's rounds never reap (only a newcomer's
 *                        first try does): a process that dies holding
 *                        permits after the others queued leaves them
 *                        timing out for ever. No end state is invalid
 *                        (the safety run passes it); ltl all_done fails.
 */
#define NP 3
#define NG NP
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef ROUNDS0
#define ROUNDS0 ROUNDS
#endif
#define C 2
#define SEQ 1
#define need(p) ((p) == 0 -> 2 : 1)
#define TIMEOUT_OK(self) (killed != 255 && (tok[killed] || guard == killed + 1 || owes[killed] == (self) + 1))
#define WAIT_FORGET
#include "wait.pml"

byte guard;          /* 0 free, else holder + 1 */
byte inuse;          /* the count word */
byte held[NP];
bool tok[NP];        /* the entry names its process's incarnation */
byte ticket[NP];     /* 0: not waiting */
byte waiters, next = 1, seq;
bool sleepers;
bool dead[NP];
hidden byte herr;    /* a sleep's result: never read (hidden: not in the state) */
byte killed = 255;   /* the dead process, 255: none */
byte deadheld;       /* ghost: what it held when it died */
byte recovered;      /* ghost: permits taken back */
byte inside[NP];     /* ghost: permits of a live process in its critical section */
byte fin;
bool isdone[NP];     /* not "done": pan.c has one when the model never reads it */
byte owes[NP];       /* ghost: the key a bump with sleepers owes a wake, 0: none */

#define sumheld (held[0] + held[1] + held[2])
#define fits(n) (inuse + (n) <= C)
/* The front: the process holding the earliest ticket (255: none queued). */
#define tk(q) (ticket[q] == 0 -> 255 : ticket[q])
#define FRONT (tk(0) <= tk(1) && tk(0) <= tk(2) -> 0 : (tk(1) <= tk(2) -> 1 : 2))
#ifdef BROKEN_WRONG_WAKE
#define WAKEKEY(f) ((f + 1) % NP + 1)
#else
#define WAKEKEY(f) (f + 1)
#endif
#define deadhold (killed == 255 -> 0 : held[killed])
#define liveticket(q) (ticket[q] != 0 && !dead[q])

inline recount() {
	d_step {
		inuse = sumheld;
		waiters = (ticket[0] != 0) + (ticket[1] != 0) + (ticket[2] != 0)
	}
}

/* bump: seq moves on (bumpSeq); fk is the key to wake, the front's
 * process + 1 if its request fits, else 0 (none queued: the sleepers flag
 * is then cleared; it stays while a ticket queues: those behind the front
 * sleep on). owes[p]: the caller has yet to wake fk. */
inline bump(p) {
	atomic {
		wk = sleepers; seq = seq + 1;
		if
		:: tk(FRONT) == 255 -> fk = 0; sleepers = false
		:: else -> fk = (fits(need(FRONT)) -> WAKEKEY(FRONT) : 0);
#ifdef BROKEN_CLEAR_SLEEPERS
			sleepers = false
#else
			skip
#endif
		fi;
		owes[p] = (wk && fk != 0 -> fk : 0);
		/* locals with no further reader: cleared, so they split no states */
		wk = false; if :: owes[p] == 0 -> fk = 0 :: else fi
	}
}

/* bumpwake: the wake a bump owes: the front's process only. */
inline bumpwake(p) {
	if :: owes[p] != 0 -> atomic { wake_n(SEQ, NG, true, fk); owes[p] = 0; fk = 0 } :: else fi
}

inline glock(p) {
	if
	:: atomic { guard == 0 -> guard = p + 1 }
	:: atomic { guard != 0 && dead[guard - 1] -> guard = p + 1 };
#ifndef BROKEN_NO_RECOUNT
		recount();
#endif
		/* The dead holder may have freed permits and died before its
		 * bump: bump and wake for it. */
#ifndef BROKEN_TAKEOVER_NO_BUMP
		bump(p);
		/* rare: wake every sleeper (lock's wakeShared of all) */
		if :: owes[p] != 0 -> atomic { wake_n(SEQ, NG, false, 0); owes[p] = 0 } :: else fi
#endif
	fi
}

/* gunlock: release the guard, bumping seq first if bump, then waking. */
inline gunlock(p, dobump) {
	assert(inuse <= C && (inuse == sumheld || dead[0] || dead[1] || dead[2]));
	if
	:: dobump -> bump(p)
	:: else
	fi;
	guard = 0;
	bumpwake(p)
}

inline take(p, n) {
	tok[p] = true;
	held[p] = held[p] + n;
	inuse = inuse + n
}

/* reclaim the entry of dead process q: each field one store. */
inline reclaim(q) {
	if
	:: ticket[q] != 0 -> ticket[q] = 0; waiters = waiters - 1
	:: else
	fi;
	h = held[q];
#ifdef BROKEN_TWICE
	recovered = recovered + h;
#else
	atomic { held[q] = 0; recovered = recovered + h };
	tok[q] = false;
#endif
	atomic { inuse = inuse - h; h = 0 };
	reaped = true;
	assert(recovered <= deadheld)
}

inline reap(p) {
	reaped = false;
	for (q : 0 .. NP - 1) {
		if
#ifdef BROKEN_LIVE
		:: q != p && tok[q] && held[q] > 0 -> reclaim(q)
#endif
		:: q != p && tok[q] && dead[q] -> reclaim(q)
		:: else
		fi
	}
}

#define behind(p) ((ticket[0] != 0 && 0 != p && ticket[0] < ticket[p]) || \
                   (ticket[1] != 0 && 1 != p && ticket[1] < ticket[p]) || \
                   (ticket[2] != 0 && 2 != p && ticket[2] < ticket[p]))
#define noliveticket(p) (!liveticket((p + 1) % NP) && !liveticket((p + 2) % NP))

proctype P(byte p) {
	byte n = need(p), v, h, q, r, fk;
	bool wk, reaped;
	{
	for (r : 1 .. (p == 0 -> ROUNDS0 : ROUNDS)) {
		/* tryTake */
		glock(p);
#ifdef BROKEN_BARGE
		if :: fits(n) -> goto fast :: else fi;
#endif
		if
		:: waiters == 0 && fits(n) -> goto fast
		:: else -> reap(p)
		fi;
		if
		:: waiters == 0 && fits(n) ->
fast:			assert(noliveticket(p));
			take(p, n); gunlock(p, reaped); goto cs
		:: else -> gunlock(p, reaped)
		fi;
		/* wait: join, then rounds */
		glock(p);
		if
		:: waiters == 0 && fits(n) -> assert(noliveticket(p)); take(p, n); gunlock(p, false); goto cs
		:: else
		fi;
		tok[p] = true;
		atomic { ticket[p] = next; next = next + 1 };
		waiters = waiters + 1;
round:
#ifdef BROKEN_ROUND_NO_REAP
		reaped = false;
#else
		reap(p);
#endif
		if
		:: reaped -> bump(p); bumpwake(p)
		:: else
		fi;
		if
		:: !behind(p) && fits(n) ->
			ticket[p] = 0; waiters = waiters - 1;
			take(p, n); gunlock(p, true); goto cs
		:: else
		fi;
		atomic { sleepers = true; v = seq };
		gunlock(p, false);
		wait_enqueue(p, SEQ, seq, v, p + 1);
		wait_sleep(p, false, herr);
		/* A wake a dead bumper owed us is paid by this return (by its
		 * slice at the latest): not a reason to time out for ever. */
		atomic { if :: killed != 255 && owes[killed] == p + 1 -> owes[killed] = 0 :: else fi; v = 0 };
		glock(p);
		goto round;
cs:		atomic {
			inside[p] = n;
			assert(inside[0] + inside[1] + inside[2] + deadhold <= C)
		};
		inside[p] = 0;
		/* Release */
		glock(p);
		held[p] = held[p] - n;
		inuse = inuse - n;
		if :: held[p] == 0 && ticket[p] == 0 -> tok[p] = false :: else fi;
#ifdef BROKEN_NO_WAKE
		atomic { seq = seq + 1; sleepers = false };
		gunlock(p, false)
#else
		gunlock(p, true)
#endif
	};
#ifdef HOUSEKEEP
	/* Close's housekeeping (semaphorereclaim.go): the guard is only
	 * tried; if free, a reap under it, racing the others' reaps. */
	if
	:: atomic { guard == 0 -> guard = p + 1 }; reap(p); gunlock(p, reaped)
	:: skip
	fi;
#endif
	atomic { fin++; isdone[p] = true }
	} unless { dead[p] }
}

/* The killer: at most one death, at any step of any process (-DNODEATH:
 * none). */
active proctype killer() {
	if
#ifndef NODEATH
	:: atomic { !isdone[0] -> dead[0] = true; killed = 0; deadheld = held[0]; inside[0] = 0 }
	:: atomic { !isdone[1] -> dead[1] = true; killed = 1; deadheld = held[1]; inside[1] = 0 }
	:: atomic { !isdone[2] -> dead[2] = true; killed = 2; deadheld = held[2]; inside[2] = 0 }
#endif
	:: skip
	fi
}

init {
	atomic { run P(0); run P(1); run P(2) };
	(fin + (killed != 255) == NP);
	/* Every permit came back once: taken back, or still in the dead
	 * entry (nobody was short after the death); the living hold none. */
	assert(recovered + deadhold == deadheld);
	assert(held[0] + held[1] + held[2] == deadhold)
}

/* Every live process finishes its rounds (the dead one is not waited for). */
ltl all_done { <> (fin + (killed != 255) == NP) }
