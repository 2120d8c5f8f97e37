/*
 * cond.pml: Cond and SharedCond, the sequence-word condition variable
 * (Rust std's futex condvar): Wait reads seq holding L, unlocks, sleeps
 * while seq is unchanged, locks again; Signal and Broadcast bump seq, then
 * wake one or all.
 *
 * Mirrors cond.go and sharedcond.go on main:
 * models: cond.go condWait
 * models: cond.go condNotify
 * models: cond.go (*Cond).WaitContext
 * models: sharedcond.go (*SharedCond).enter
 * models: sharedcond.go (*SharedCond).sleep
 * models: sharedcond.go (*SharedCond).notify
 *
 * Default: Cond. -DSHARED: SharedCond, where goroutines 1 and 2 are in one
 * process and elect one kernel sleeper on seq (the sleeper word), the
 * other parking on the process-local word local; goroutine 0 is another
 * process. The lock L is an ideal mutex (one atomic step): the models of
 * the locks check those.
 *
 * Scenario: goroutine 0 produces ITEMS = 2 items, each under L, and after
 * each unlocks and notifies (Signal; -DBROADCAST: Broadcast), once before
 * the consumers may have started waiting, once after. Goroutines 1 and 2
 * each consume one item with the usual loop (lock; while no item: Wait;
 * take; unlock); goroutine 2 uses WaitContext and may be cancelled once
 * (it then takes an item if one is there, else leaves). One spurious
 * wake-up in the run.
 *
 * Bounds: 3 goroutines, 2 notifications, seq of 8 bits (no wrap: the
 * documented 2^32 window is not modelled). Enough for every order of
 * notify against a waiter that has read seq but not slept (the late
 * waiter), a cancelled waiter that a Signal chose, and the sleeper
 * election of SharedCond with one process's two waiters.
 *
 * Properties: no invalid end state: a consumer whose item is there never
 * sleeps forever (no lost Signal, also when a cancelled waiter was
 * chosen; Broadcast reaches every waiter that read seq before it);
 * consumption never exceeds production (assert).
 *
 * Negative control:
 *   -DBROKEN_NOSEQ  Wait reads seq after unlocking L, not before: a
 *                   notification in between is lost.
 */
#define NG 3
#define ITEMS 2
#include "wait.pml"

#define SEQ 0
#define LOCAL 1
#ifdef BROADCAST
#define NOTIFY_N 3
#else
#define NOTIFY_N 1
#endif

byte seq;
bool L;          /* the lock: an ideal mutex */
byte items;      /* produced, not yet consumed (guarded by L) */
byte produced, consumed;
#ifdef SHARED
byte waiters, sleeper, localw; /* localw: SharedCond.local */
bool ctxdone[NG];
#endif

#define lock()   atomic { !L -> L = true }
#define unlock() L = false

/* notify: seq.Add(1), then wake (SharedCond: only if waiters != 0) */
inline notify() {
	seq++;
#ifdef SHARED
	if
	:: waiters != 0 -> wake_n(SEQ, NOTIFY_N, false, 0)
	:: else -> skip
	fi
#else
	wake_n(SEQ, NOTIFY_N, false, 0)
#endif
}

active proctype Producer() {
	byte i;
	for (i : 1 .. ITEMS) {
		lock();
		items++; produced++;
		unlock();
		notify()
	}
}

active [2] proctype Consumer() {
	byte self = _pid;  /* 1 and 2 */
	bool canCancel = (self == 2);
	bool err;
	byte v;
#ifdef SHARED
	byte lv;
#endif
	lock();
	do
	:: items > 0 -> break
	:: else ->
#ifndef SHARED
		/* condWait: v := seq.Load(); l.Unlock(); ws.wait(ctx, seq, v); l.Lock() */
#ifdef BROKEN_NOSEQ
		unlock();
		v = seq;
#else
		v = seq;
		unlock();
#endif
		wait_enqueue(self, SEQ, seq, v, 0);
		wait_sleep(self, canCancel, err);
		v = 0;
		lock();
		if
		:: err -> canCancel = false; goto giveup
		:: else -> skip
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
	skip
}
