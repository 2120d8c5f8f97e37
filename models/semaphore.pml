/*
 * semaphore.pml: Semaphore, the weighted FIFO semaphore: one lock word
 * (free permits and the queued bit) taken with a CAS while nobody waits,
 * and a FIFO queue of waiters under the queue's mutex, each sleeping on a
 * word of its own until a Release (or a leaving waiter) grants it.
 *
 * Mirrors semaphore.go and semaphorequeue.go on main:
 * models: semaphore.go (*Semaphore).Acquire
 * models: semaphore.go (*Semaphore).acquireSlow
 * models: semaphore.go (*Semaphore).await
 * models: semaphore.go (*Semaphore).Release
 * models: semaphore.go (*Semaphore).releaseSlow
 * models: semaphorequeue.go (*semQueue).join
 * models: semaphorequeue.go (*semQueue).grant
 * models: semaphorequeue.go (*semQueue).release
 * models: semaphorequeue.go (*semQueue).leave
 *
 * Words: free (the permits free now) and queued (bit 63) form the lock
 * word, and every step that reads or writes them is one atomic step (a
 * load and the CAS that depends on it are one step: the CAS fails, and the
 * Go loop reloads, exactly when another step came between). The queue
 * (q, qlen) and the waiters' inq flags are touched only with mu held; mu
 * is a real lock here, so the lock-free paths interleave with every step
 * of the locked ones. granted[g] is goroutine g's futex word. The
 * statistics bit and the spin before parking are not modelled (the spin
 * only reads granted: a park that finds it set returns at once).
 *
 * Bounds: capacity C = 2; NG = 3 goroutines wanting 2, 1 and 1 permits, so
 * a large request queues behind and ahead of small ones; ROUNDS = 2
 * acquisitions each for safety; for liveness goroutine 0 (the large
 * request) acquires ROUNDS0 = 2 times and the others once: its second
 * round joins again on its futex word after a first that may have given
 * up, raced a grant or been granted, and meets the small requests still
 * queued from their first. Goroutines 0 and 1 may
 * each give up once (their context ends): before queueing, or while
 * parked, including the race with a grant. One spurious wake-up.
 *
 * Properties:
 *   - never more than C permits in use (assert in the critical section);
 *     free never below 0 nor above C (assert; a Release of more than is
 *     held is the panic);
 *   - FIFO: a permit is taken outside the queue only while nobody is
 *     queued (assert at every take by the lock-free paths), and grants go
 *     to the front in order (grant's loop);
 *   - no stranded waiter: whenever mu is released, the front waiter does
 *     not fit in what is free (assert): a leaving front waiter grants
 *     those behind it (golang/go#37852);
 *   - a goroutine that gave up holds nothing, and at the end every permit
 *     is free and the queue empty (assert in the last goroutine out);
 *   - no lost wake-up: no invalid end state (a waiter asleep for ever);
 *   - ltl all_done under weak fairness: every goroutine finishes its
 *     rounds.
 *
 * Negative controls:
 *   -DBROKEN_OFF_BY_ONE   the lock-free take accepts free + 1 >= n: over-grant.
 *   -DBROKEN_BARGE        the lock-free take ignores the queued bit: a
 *                         newcomer overtakes the queue (FIFO assert).
 *   -DBROKEN_LEAVE_NO_GRANT leave does not grant the waiters behind: the
 *                         stranded-waiter assert.
 *   -DBROKEN_KEEP_RACED   a waiter granted while it gave up returns its
 *                         error without releasing: permits leak.
 */
#define NG 3
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef ROUNDS0
#define ROUNDS0 ROUNDS /* goroutine 0's rounds (the large request) */
#endif
#define C 2
#define GRANTED_BASE 1 /* goroutine g sleeps on word GRANTED_BASE + g */
#include "wait.pml"

byte free = C;
bool queued;
byte mu;          /* 0 free, else holder + 1 */
byte q[NG];       /* the queue, front at 0 */
byte qlen;
bool inq[NG];
bool granted[NG];
byte inuse;       /* permits held, counted in the critical section */
byte finished;
byte cancels[NG]; /* give-ups left per goroutine */

#define need(g) ((g) == 0 -> 2 : 1)

#ifdef BROKEN_OFF_BY_ONE
#define fits(n) (free + 1 >= (n))
#else
#define fits(n) (free >= (n))
#endif
#ifdef BROKEN_BARGE
#define open_to_newcomers true
#else
#define open_to_newcomers (!queued)
#endif

inline lock_mu(self) { atomic { mu == 0 -> mu = self + 1 } }

/* unlock_mu: the stranded-waiter invariant holds every time mu is let go. */
inline unlock_mu(self) {
	atomic {
		assert(mu == self + 1);
		assert(qlen == 0 || free < need(q[0]));
		assert(queued == (qlen > 0));
		mu = 0
	}
}

/* grant (mu held): front waiters that fit get their permits, in order;
 * the queued bit is cleared if the queue empties. Wake-ups are sent after
 * mu is released (tw is the set to wake). */
inline grant(self, tw) {
	do
	:: qlen > 0 && free >= need(q[0]) ->
		atomic {
			w = q[0];
			free = free - need(w);
			q[0] = q[1]; q[1] = q[2]; q[2] = 0; qlen--;
			inq[w] = false;
			granted[w] = true;
			tw = tw | (1 << w)
		}
	:: else -> break
	od;
	if
	:: qlen == 0 -> queued = false
	:: else -> skip
	fi;
	unlock_mu(self);
	do
	:: tw & 1 -> tw = tw & ~1; wake_n(GRANTED_BASE + 0, 1, false, 0)
	:: tw & 2 -> tw = tw & ~2; wake_n(GRANTED_BASE + 1, 1, false, 0)
	:: tw & 4 -> tw = tw & ~4; wake_n(GRANTED_BASE + 2, 1, false, 0)
	:: tw == 0 -> break
	od
}

/* Release(n): lock-free while nobody is queued, else through the queue. */
inline release(self, n) {
	atomic {
		if
		:: !queued -> assert(free + n <= C); free = free + n; rel = true
		:: else -> rel = false
		fi
	};
	if
	:: !rel ->
		lock_mu(self);
		atomic { assert(free + n <= C); free = free + n };
		grant(self, tw)
	:: else -> rel = false
	fi
}

proctype G(byte self) {
	byte round, w, tw;
	bool got, err, rel, cancel;
	for (round : 1 .. (self == 0 -> ROUNDS0 : ROUNDS)) {
		got = false; err = false;
		/* Acquire's fast path and acquireSlow's lock-free loop */
		atomic {
			if
			:: open_to_newcomers && fits(need(self)) ->
				assert(qlen == 0); free = free - need(self); got = true
			:: else -> skip
			fi
		};
		if
		:: !got ->
			/* join, under mu */
			lock_mu(self);
			do
			:: atomic { !queued && free >= need(self) -> free = free - need(self); got = true }; unlock_mu(self); break
			:: cancels[self] > 0 && !(!queued && free >= need(self)) ->
				cancels[self]--; err = true; unlock_mu(self); break  /* ctx done before queueing */
			:: atomic { !(!queued && free >= need(self)) -> queued = true };
				atomic { q[qlen] = self; qlen++; inq[self] = true; granted[self] = false };
				unlock_mu(self); break
			od;
			if
			:: !got && !err ->
				/* await: sleep on granted[self] until granted, or give up */
				do
				:: granted[self] -> got = true; break
				:: !granted[self] ->
					wait_enqueue(self, GRANTED_BASE + self, granted[self], false, 0);
					cancel = (cancels[self] > 0);
					wait_sleep(self, cancel, err);
					if
					:: err ->
						cancels[self]--;
						/* leave */
						lock_mu(self);
						if
						:: inq[self] ->
							atomic {
								if
								:: q[0] == self -> q[0] = q[1]; q[1] = q[2]
								:: q[1] == self -> q[1] = q[2]
								:: else -> assert(q[2] == self)
								fi;
								q[2] = 0; qlen--; inq[self] = false
							};
#ifdef BROKEN_LEAVE_NO_GRANT
							if
							:: qlen == 0 -> queued = false
							:: else -> skip
							fi;
							unlock_mu(self);
#else
							tw = 0; grant(self, tw);
#endif
							skip
						:: else ->
							/* granted while giving up: give it back */
							assert(granted[self]);
							unlock_mu(self);
#ifndef BROKEN_KEEP_RACED
							release(self, need(self));
#endif
							skip
						fi;
						break
					:: else -> skip /* tw or spurious: look again */
					fi
				od
			:: else -> skip
			fi
		:: else -> skip
		fi;
		if
		:: got ->
			/* the critical section: holding need(self) permits */
			atomic { inuse = inuse + need(self); assert(inuse <= C) };
			atomic { inuse = inuse - need(self) };
			tw = 0;
			release(self, need(self))
		:: else -> skip
		fi
	};
	atomic {
		finished++;
		if
		:: finished == NG -> assert(free == C && qlen == 0 && !queued && inuse == 0)
		:: else -> skip
		fi
	}
}

init {
	cancels[0] = 1;
	cancels[1] = 1;
	atomic {
		run G(0);
		run G(1);
		run G(2)
	}
}

ltl all_done { <> (finished == NG) }
