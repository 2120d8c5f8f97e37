/*
 * wait.pml: the waiting layer every model shares, the futex contract of
 * internal/wait (doc.go): wait on this word while it still holds this value,
 * wake up to n waiters of this word; returning early ("spuriously") is
 * allowed, and a cancelled wait never swallows a wake-up.
 *
 * models: internal/wait/park.go park
 * models: internal/wait/park.go wake
 * models: internal/wait/futex_linux.go FutexWait
 * models: internal/wait/futex_linux.go FutexWake
 *
 * The C library's futex calls (c/wait.c), beside the Go ones:
 *            step         Go                                  C
 * models-c: futex-wait   FutexWait                           c/wait.c futex_wait
 * models-c: futex-wake   FutexWake                           c/wait.c futex_wake
 *
 * The diagnostic note a waiter may leave (WaitNoted, WaitKeyNoted: read by
 * the stuck watcher through Noted, never by a waker) does not take part in
 * the protocol and is not modelled.
 *
 * A model defines NG (goroutines, at most MAXG) before including this file,
 * and names each lock word by a small number (its "address").
 *
 * The check of the word and the enqueue are one atomic step, as park does
 * them under the bucket lock and the kernel under the futex hash lock. A
 * wake-up removes the chosen waiters from the queue in one step. Which
 * waiter a plain wake-up picks is left to SPIN (any parked one): a superset
 * of park's oldest-first order, so every safety and deadlock result holds
 * for FIFO too. Keyed waiting (WaitKey, FUTEX_WAIT_BITSET) wakes only a
 * waiter parked with the same key.
 *
 * Early returns are budgeted: SPURIOUS of them in a whole run (a spurious
 * return, a signal, a kernel timeout that is not needed for progress). A
 * budget, not "any time", because an always-possible early return would
 * make every lost wake-up look like progress: with the budget spent, a
 * waiter that nobody wakes sleeps forever and SPIN reports the invalid end
 * state.
 */
#ifndef MAXG
#define MAXG 4
#endif
#ifndef SPURIOUS
#define SPURIOUS 1
#endif

/*
 * TIMEOUT_OK(self): a model may let a sleep end by its timeout under a
 * condition (the shared kinds sleep in slices of 10 ms to look for a dead
 * peer or holder: a model grants the timeout only once there is a death
 * to notice, so a lost wake-up among the living still shows).
 */
#ifndef TIMEOUT_OK
#define TIMEOUT_OK(self) false
#endif

/*
 * WAIT_FORGET (a model defines it before the include): a waiter leaving
 * the queue forgets the word and key it slept on. Only a queued waiter's
 * word and key are ever read, so this merges states that differ in a dead
 * value alone and changes no behaviour; it is off by default to keep the
 * other models' state counts as measured.
 */
#ifdef WAIT_FORGET
#define FORGET(k) ; waddr[k] = 0; wkey[k] = 0
#else
#define FORGET(k)
#endif

bool parked[MAXG];   /* goroutine i is queued */
byte waddr[MAXG];    /* the word it sleeps on */
byte wkey[MAXG];     /* its key (keyed waiting), else 0 */
byte spurious = SPURIOUS;
hidden byte woken;   /* scratch for wake */

/* wait_enqueue: park's "if *addr == val, enqueue" under the bucket lock. */
#define wait_enqueue(self, a, word, val, key) \
	atomic { if :: (word) == (val) -> parked[self] = true; waddr[self] = a; wkey[self] = key :: else -> skip fi }

/*
 * wait_sleep: sleep until woken; or return early from the budget; or, if
 * cancel is true, leave with err = true while still queued (park's
 * "if w.queued { remove; err = ctx.Err() }"). A waiter that a wake-up
 * dequeued can no longer cancel: it returns nil.
 */
inline wait_sleep(self, cancel, err) {
	if
	:: !parked[self] -> err = false
	:: atomic { parked[self] && spurious > 0 -> spurious--; parked[self] = false; err = false FORGET(self) }
	:: atomic { parked[self] && cancel -> parked[self] = false; err = true FORGET(self) }
	:: atomic { parked[self] && TIMEOUT_OK(self) -> parked[self] = false; err = false FORGET(self) }
	fi
}

#define WAKE_CAND(k, a, keyed, key) \
	:: woken < (n) && k < NG && parked[k] && waddr[k] == (a) && (!(keyed) || wkey[k] == (key)) -> parked[k] = false; woken++ FORGET(k)

/* wake_count: wake up to n waiters of word a; got = how many it woke
 * (wait.Wake's result). */
inline wake_count(a, n, got) {
	atomic {
		woken = 0;
		do
		WAKE_CAND(0, a, false, 0)
		WAKE_CAND(1, a, false, 0)
		WAKE_CAND(2, a, false, 0)
		WAKE_CAND(3, a, false, 0)
		:: else -> break
		od;
		got = woken;
		woken = 0
	}
}

/* wake: wake up to n waiters of word a (keyed: only those with key). */
inline wake_n(a, n, keyed, key) {
	atomic {
		woken = 0;
		do
		WAKE_CAND(0, a, keyed, key)
		WAKE_CAND(1, a, keyed, key)
		WAKE_CAND(2, a, keyed, key)
		WAKE_CAND(3, a, keyed, key)
		:: else -> break
		od;
		woken = 0
	}
}
