/*
 * cond.pml: Cond, the notify-list condition variable, and SharedCond, the
 * sequence-word one.
 *
 * Cond (default): its waiters stand in one order, kept in two lists.
 * Wait (goroutine 1, "plain") draws a ticket of the runtime's notify list
 * (nl) with one atomic add, holding L but not mu (rtA counts the tickets
 * drawn: nl.wait), unlocks L, and sleeps until a notification took
 * its ticket (rtN counts those: the runtime's notifyListWait returns when
 * ticket < rtN, modelled as that guard, the runtime being trusted as L
 * is); then it locks L. WaitContext (goroutine 2, "ctx") queues a record
 * (FIFO, under mu) that notes the tickets drawn before it (before), unlocks
 * L, sleeps on the record's own word (state) until a notification has set
 * it chosen, locks L again. Signal, under mu, takes the oldest waiter: the
 * queue's head if before == rtN (every ticket ahead of it taken), else the
 * next ticket (rtN++, rt.Signal); it chooses a record by storing chosen,
 * then (outside mu) WakeOne. Signal and Broadcast first look without mu
 * (idle: rtA, rtN, qlen, rtA again, each its own step) and return if
 * nobody waits. Broadcast takes every ticket (rtN = rtA) and
 * the whole queue, then chooses each record. A cancelled WaitContext
 * leaves the queue if it is still there (err), else it was chosen and
 * waits for its notification and reports it (nil). The misuse path (a
 * Wait whose L.Unlock panics buries its ticket) is not modelled. When L is
 * our Mutex, Wait releases it with unlockToPark (mutex_cond.go): Unlock's
 * moves of the word, without the processor yield, which no model holds
 * (mutex.pml says why); L stays trusted here, as one lock step.
 * models: cond.go (*Cond).Wait
 * models: cond.go (*Cond).unlockL
 * models: cond.go (*Cond).idle
 * models: cond.go (*Cond).waitContext
 * models: cond.go (*Cond).enqueue
 * models: cond.go (*Cond).sleep
 * models: cond.go (*Cond).leave
 * models: cond.go (*Cond).signalSlow
 * models: cond.go (*Cond).broadcastSlow
 * models: cond.go choose
 * models: cond.go (*Cond).WaitContext
 *
 * SharedCond (-DSHARED): Wait reads seq holding L, unlocks, sleeps while
 * seq is unchanged, locks again; Signal and Broadcast bump seq, then wake
 * one or all kernel sleepers. Goroutines 1 and 2 are in one process and
 * elect one kernel sleeper on seq (the sleeper word), the other parking on
 * the process-local word local; goroutine 0 is another process.
 * models: shm/cond.go (*Cond).enter
 * models: shm/cond.go (*Cond).sleep
 * models: shm/cond.go (*Cond).notify
 *
 * The lock L is an ideal mutex (one atomic step), and so is the Cond's mu
 * (each of its critical sections is one atomic step): the models of the
 * locks check those. A waiter's record is its own across its Waits (the
 * pool may hand a goroutine back its own record, the case where a late
 * wake-up from a previous choice meets the next Wait); choose's store and
 * its wake-up are separate steps, so that wake-up can land on the next use.
 * WaitOne is the futex contract of wait.pml (slot.pml checks WaitOne).
 *
 * Scenarios. Goroutine 0 produces ITEMS = 2 items. Default: each under L,
 * each followed (L released) by a Signal (-DBROADCAST: a Broadcast), once
 * before the consumers may have started waiting, once after. -DONEBCAST:
 * both items in one critical section, then one Broadcast: more sleepers
 * than notifications, so a Broadcast that woke only one would strand the
 * other. Goroutines 1 and 2 each consume one item with the usual loop
 * (lock; while no item: Wait; take; unlock); goroutine 2 uses WaitContext
 * and may be cancelled once (it then takes an item if one is there, else
 * leaves). One spurious return from the futex in the run.
 *
 * Bounds: 3 goroutines, 2 items, 2 notifications (1 with ONEBCAST), a
 * queue of 2, seq of 8 bits for SharedCond (no wrap). Enough for every
 * order of a notification against a waiter that has queued but not slept,
 * a consumer that barges in and takes the item of a chosen waiter (which
 * then waits again, reusing its record), a cancelled waiter that a Signal
 * chose and one that left first, and SharedCond's sleeper election with
 * one process's two waiters.
 *
 * Properties (Cond):
 *   - no lost notification: a consumer whose item is there never sleeps
 *     forever (pan's invalid end states), also when a cancelled waiter was
 *     chosen, and after a Broadcast with more sleepers than notifications;
 *   - Wait returns nil only if a notification chose it, and WaitContext
 *     returns its error only if none did (assert: ghost notified[]), so a
 *     cancelled waiter never swallows a Signal;
 *   - one Signal returns at most one Wait: the Waits returned woken never
 *     outnumber the waiters the notifications took (assert: ghosts wakes
 *     and grants, Signal granting one, Broadcast as many as it took);
 *   - no steal: Signal chooses the waiter that joined earliest, of either
 *     list (assert: ghost join clock), so a waiter that came after a
 *     Signal cannot take it;
 *   - Broadcast chooses every waiter queued when it took the queue: with
 *     ONEBCAST a second sleeper would otherwise sleep forever (invalid end
 *     state; and ltl all_done fails);
 *   - consumption never exceeds production (assert);
 *   - ltl all_done: under weak fairness every goroutine finishes.
 * SharedCond: no lost Signal or Broadcast (invalid end states), and
 * consumption never exceeds production; its Wait may return without a
 * notification of its own (documented), so the Cond asserts are not made.
 *
 * Negative controls:
 *   -DBROKEN_LATE_ENQUEUE  Wait draws its ticket and WaitContext queues
 *                          after unlocking L: a notification in between
 *                          finds nobody and is lost.
 *   -DBROKEN_SIGNAL_TWO    Signal takes the oldest waiter and the next
 *                          one too: one Signal returns two Waits.
 *   -DBROKEN_BCAST_ONE     Broadcast chooses only the oldest waiter (run
 *                          with ONEBCAST: the second sleeper is stranded).
 *   -DBROKEN_CANCEL_DROP   a cancelled waiter that was chosen reports the
 *                          cancellation, dropping the Signal.
 *   -DBROKEN_NOSEQ         (SHARED) Wait reads seq after unlocking L: a
 *                          notification in between is lost.
 */
#define NG 3
#define ITEMS 2
#include "wait.pml"

#define SEQ 0
#define LOCAL 1
#define WADDR(g) (2 + (g)) /* a waiter's own word (its record's state) */
#ifdef BROADCAST
#define NOTIFY_N 3
#else
#define NOTIFY_N 1
#endif

#define QUEUED 0
#define CHOSEN 1

bool L;          /* the lock: an ideal mutex */
byte items;      /* produced, not yet consumed (guarded by L) */
byte produced, consumed;
byte ndone;      /* goroutines finished (ltl all_done) */
#ifdef SHARED
byte seq;
byte waiters, sleeper, localw; /* localw: SharedCond.local */
bool ctxdone[NG];
#else
#define PLAIN 1  /* goroutine 1 waits with Wait (a ticket of rt) */
#define CTXW 2   /* goroutine 2 with WaitContext (a record on the queue) */
byte rtA, rtN;   /* rt's tickets drawn, and taken by notifications (mu) */
bool pwait;      /* PLAIN's ticket drawn, not yet taken (mu) */
byte state[NG];  /* a record's word */
bool queued[NG]; /* on the queue (guarded by mu) */
byte before[NG]; /* rtA when the record was queued (guarded by mu) */
byte q[2];       /* the queue, oldest first (guarded by mu) */
byte qlen;
bool notified[NG]; /* ghost: chosen by a notification, not yet returned */
byte enq[NG];      /* ghost: join clock of each waiter */
byte clock;
byte grants, wakes; /* ghosts: waiters notifications took; Waits returned woken */
#endif

#define lock()   atomic { !L -> L = true }
#define unlock() L = false

#ifndef SHARED
/* enqueue: Cond.enqueue, under mu */
#define enqueue(g) atomic { q[qlen] = g; qlen++; queued[g] = true; before[g] = rtA; clock++; enq[g] = clock }
/* join: Wait's notifyListAdd (an atomic add, not under mu): draw ticket tk */
#define join(tk) atomic { tk = rtA; rtA++; pwait = true; clock++; enq[PLAIN] = clock }

/* unlink: take g off the queue (mu held) */
inline unlink(g) {
	if
	:: q[0] == g -> q[0] = q[1]
	:: else -> skip
	fi;
	q[1] = 0; qlen--; queued[g] = false
}

/* choose: store chosen, then (a separate step) wake its word */
inline choose(g) {
	state[g] = CHOSEN;
	wake_n(WADDR(g), 1, false, 0)
}

/* idle: Cond.idle, without mu: the tickets drawn (n), none waiting, no
 * record queued, and no ticket drawn since n. Sets nobody. (Its second
 * look at rtA matters only to a Signal without L that races a cancelled
 * record and a new ticket, which these scenarios do not reach.) */
inline idlecheck() {
	nobody = false;
	n = rtA;
	if
	:: n != rtN -> skip
	:: else ->
		if
		:: qlen != 0 -> skip
		:: else ->
			if
			:: rtA == n -> nobody = true
			:: else -> skip
			fi
		fi
	fi;
	n = 0
}

/* Signal: idle, else signalSlow, under mu: the queue's head if every
 * ticket drawn before it was taken, else the next ticket (PLAIN's: the
 * runtime wakes it). The no-steal assert: the one it takes joined before
 * any other waiting. */
inline signal() {
	idlecheck();
	if
	:: nobody -> skip
	:: else -> signalslow()
	fi;
	nobody = false
}

inline signalslow() {
	atomic {
		w = NG;
		if
		:: qlen > 0 && before[q[0]] == rtN ->
			w = q[0];
			assert(qlen < 2 || enq[w] <= enq[q[1]]);
			assert(!pwait || enq[w] < enq[PLAIN]);
			unlink(w);
			notified[w] = true;
			grants++
		:: else ->
			if
			:: rtN != rtA ->
				assert(pwait && (qlen == 0 || enq[PLAIN] < enq[q[0]]));
				rtN++; pwait = false; notified[PLAIN] = true;
				grants++
			:: else -> skip
			fi
		fi;
#ifdef BROKEN_SIGNAL_TWO
		/* and the next one too, for the same Signal */
		if
		:: w == NG && qlen > 0 -> w = q[0]; unlink(w); notified[w] = true
		:: w < NG && rtN != rtA -> rtN++; pwait = false; notified[PLAIN] = true
		:: else -> skip
		fi
#endif
	}
	if
	:: w < NG -> choose(w)
	:: else -> skip
	fi;
	w = NG
}

/* Broadcast: broadcastSlow takes every ticket (rt.Broadcast) and the
 * queue, then chooses each record. BROKEN_BCAST_ONE takes only the oldest
 * waiter, as a Signal would. */
inline broadcast() {
#ifdef BROKEN_BCAST_ONE
	signal()
#else
	idlecheck();
	if
	:: nobody -> goto bdone
	:: else -> skip
	fi;
	atomic {
		n = qlen; b0 = q[0]; b1 = q[1];
		if :: n > 0 -> queued[b0] = false; notified[b0] = true; grants++ :: else -> skip fi;
		if :: n > 1 -> queued[b1] = false; notified[b1] = true; grants++ :: else -> skip fi;
		if :: rtN != rtA -> rtN = rtA; pwait = false; notified[PLAIN] = true; grants++ :: else -> skip fi;
		qlen = 0; q[0] = 0; q[1] = 0
	}
	if :: n > 0 -> choose(b0) :: else -> skip fi;
	if :: n > 1 -> choose(b1) :: else -> skip fi;
	n = 0; b0 = 0; b1 = 0;
bdone:
	nobody = false
#endif
}
#endif

inline notify() {
#ifdef SHARED
	/* notify: seq.Add(1), then wake (only if waiters != 0) */
	seq++;
	if
	:: waiters != 0 -> wake_n(SEQ, NOTIFY_N, false, 0)
	:: else -> skip
	fi
#else
	if
	:: NOTIFY_N == 1 -> signal()
	:: else -> broadcast()
	fi
#endif
}

active proctype Producer() {
	byte i;
#ifndef SHARED
	byte w, n, b0, b1;
	bool nobody; /* idle found nobody waiting */
#endif
#if defined(ONEBCAST) && !defined(SHARED)
	lock();
	items = ITEMS; produced = ITEMS;
	unlock();
	broadcast();
#else
	for (i : 1 .. ITEMS) {
		lock();
		items++; produced++;
		unlock();
		notify()
	}
#endif
	ndone++
}

active [2] proctype Consumer() {
	byte self = _pid;  /* 1 and 2 */
	bool canCancel = (self == 2);
	bool err;
	byte v;
#ifdef SHARED
	byte lv;
#else
	byte tk; /* PLAIN's ticket */
#endif
	lock();
	do
	:: items > 0 -> break
	:: else ->
#ifndef SHARED
		if
		:: self == PLAIN ->
			/* Cond.Wait: draw a ticket (join, notifyListAdd); release
			   L; notifyListWait; L.Lock */
#ifdef BROKEN_LATE_ENQUEUE
			unlock();
			join(tk);
#else
			join(tk);
			unlock();
#endif
			(tk < rtN); /* the runtime returns once the ticket was taken */
			lock();
			assert(notified[PLAIN]);
			notified[PLAIN] = false;
			wakes++;
			assert(wakes <= grants)
		:: else ->
			/* Cond.wait: state = queued; enqueue; L.Unlock; sleep; L.Lock */
			state[self] = QUEUED;
#ifdef BROKEN_LATE_ENQUEUE
			unlock();
			enqueue(self);
#else
			enqueue(self);
			unlock();
#endif
			/* sleep: for state != chosen { WaitOne; on err: leave } */
			do
			:: state[self] == CHOSEN -> err = false; break
			:: else ->
				wait_enqueue(self, WADDR(self), state[self], QUEUED, 0);
				wait_sleep(self, canCancel, err);
				if
				:: err ->
					/* leave: under mu, off the queue if still there */
					atomic {
						if
						:: queued[self] -> unlink(self); v = 1
						:: else -> v = 0
						fi
					}
#ifdef BROKEN_CANCEL_DROP
					v = 1;
#endif
					if
					:: v == 1 -> v = 0; break /* err stays set */
					:: else -> err = false; canCancel = false /* chosen: ctx = nil */
					fi
				:: else -> skip
				fi
			od;
			lock();
			/* Wait returns nil only if chosen; an error only if not chosen */
			assert(err == !notified[self]);
			notified[self] = false;
			if
			:: err -> canCancel = false; goto giveup
			:: else -> skip
			fi;
			wakes++; /* woken: err is false here */
			assert(wakes <= grants)
		fi
#else
		/* SharedCond.Wait: enter (waiters++, v := seq), unlock, sleep, lock */
		waiters++;
#ifdef BROKEN_NOSEQ
		unlock();
		v = seq;
#else
		v = seq;
		unlock();
#endif
		/* sleep: for seq == v */
		do
		:: seq != v -> break
		:: else ->
			if
			:: ctxdone[self] -> err = true; break
			:: else -> skip
			fi;
			if
			:: atomic { sleeper == 0 -> sleeper = 1 } ->
				/* the kernel sleeper: FutexWait(seq, v); cancellation is
				   wakeOnDone's FutexWake(seq, all) */
				wait_enqueue(self, SEQ, seq, v, 0);
				if
				:: canCancel -> wait_sleep(self, true, err);
					if
					:: err -> ctxdone[self] = true; err = false; wake_n(SEQ, 3, false, 0)
					:: else -> skip
					fi
				:: else -> wait_sleep(self, false, err)
				fi;
				sleeper = 0;
				localw++;
				wake_n(LOCAL, 3, false, 0)
			:: else ->
				lv = localw;
				if
				:: sleeper == 0 || seq != v -> skip
				:: else ->
					wait_enqueue(self, LOCAL, localw, lv, 0);
					wait_sleep(self, canCancel, err);
					if
					:: err -> ctxdone[self] = true; err = false
					:: else -> skip
					fi
				fi;
				lv = 0
			fi
		od;
		waiters--;
		v = 0;
		lock();
		if
		:: err -> err = false; canCancel = false; goto giveup
		:: else -> skip
		fi
#endif
	od;
	items--; consumed++;
	assert(consumed <= produced);
	unlock();
	goto done;
giveup:
	/* WaitContext gave up, holding L: take an item if there is one */
	if
	:: items > 0 -> items--; consumed++
	:: else -> skip
	fi;
	unlock();
done:
	ndone++
}

ltl all_done { <> (ndone == NG) }
