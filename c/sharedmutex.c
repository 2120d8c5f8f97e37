//go:build ignore

/*
 * sharedmutex.c: shm.Mutex: the lock word (0 free, else the holder's owner token, with
 * the waiters and inconsistent bits), the per-process gate, the hand-off
 * word, take-over from a dead holder and MarkConsistent.
 *
 * Go twin: shm/mutex.go, shm/ownerdead.go, shm/diag.go.
 */
#include "internal.h"

/* ---- shm.Mutex (sharedmutex.go) ---- */

enum { spin_iterations = 8, spin_pause_max = 64 };

int lw_region_mutex(lw_region *r, const char *name, lw_mutex **out) {
	if (!r || !name || !out)
		return LW_EINVAL;
	pthread_mutex_lock(&r->mu);
	uint32_t i;
	int err = object(r, name, LW_KIND_MUTEX, LW_MUTEX_OBJ_SIZE, &i);
	if (err == 0 && !r->mutexes[i]) {
		lw_mutex *m = calloc(1, sizeof *m);
		if (!m) {
			err = ENOMEM;
		} else {
			m->r = r;
			m->obj = r->data + r->objs[i].offset;
			m->word = w32(m->obj, LW_MUTEX_WORD);
			m->handoff = w32(m->obj, LW_MUTEX_HANDOFF);
			m->token = r->token;
			m->waits_for1 = table_index1(r, r->objs[i].offset);
			strcpy(m->name, r->objs[i].name);
			r->mutexes[i] = m;
		}
	}
	if (err == 0)
		*out = r->mutexes[i];
	pthread_mutex_unlock(&r->mu);
	return err;
}

uint32_t lw_mutex_word(const lw_mutex *m) { return m ? atomic_load(m->word) : 0; }

void lw_mutex_enable_stats(lw_mutex *m) {
	if (m)
		atomic_fetch_or(m->word, LW_WORD_STATS);
}

/* Fast paths: one CAS each (docs/abi.md, "0 -> token" and "token -> 0"). */
static int lock_slow(lw_mutex *m, int64_t timeout_ns, uint32_t *dead_pid);

/* lock_fast is the three lock calls' fast path. Static, so that each
 * exported call inlines it rather than calling another exported (and,
 * under -fPIC, interposable) function. */
static inline int lock_fast(lw_mutex *m, int64_t timeout_ns, uint32_t *dead_pid) {
	if (!m)
		return LW_EINVAL;
	uint32_t free_word = 0;
	if (atomic_compare_exchange_strong(m->word, &free_word, m->token))
		return 0;
	return lock_slow(m, timeout_ns, dead_pid);
}

int lw_mutex_lock(lw_mutex *m) { return lock_fast(m, -1, NULL); }

int lw_mutex_timedlock(lw_mutex *m, int64_t timeout_ns) { return lock_fast(m, timeout_ns, NULL); }

int lw_mutex_timedlock_pid(lw_mutex *m, int64_t timeout_ns, uint32_t *dead_pid) {
	return lock_fast(m, timeout_ns, dead_pid);
}

/* stamp records when this hold began: the time, then the timed bit. */
static void stamp(lw_mutex *m) {
	atomic_store(w64(m->obj, LW_MUTEX_HELD_SINCE), (uint64_t)mono_ns());
	atomic_fetch_or(m->word, LW_WORD_TIMED);
}

/* take moves a free word w to held by us, keeping the statistics flag. */
static bool take(lw_mutex *m, uint32_t w, uint32_t extra) {
	return (w & LW_OWNER_MASK) == 0 && atomic_compare_exchange_strong(m->word, &w, (w & LW_WORD_STATS) | m->token | extra);
}

int lw_mutex_trylock(lw_mutex *m) {
	if (!m)
		return LW_EINVAL;
	uint32_t w = 0;
	if (atomic_compare_exchange_strong(m->word, &w, m->token))
		return 0;
	/* tryLockSlow; w holds the word the CAS saw. */
	if ((w & LW_OWNER_MASK) == LW_OWNER_NOT_RECOVERABLE)
		return LW_ENOTRECOVERABLE;
	if ((w & LW_OWNER_MASK) != 0 || !atomic_compare_exchange_strong(m->word, &w, w | m->token))
		return LW_EBUSY;
	if (w & LW_WORD_STATS) {
		atomic_fetch_add(w64(m->obj, LW_MUTEX_ACQUIRED), 1);
		stamp(m);
	}
	return 0;
}

static inline bool valid_token(uint32_t t) { return token_gen(t) != 0 && token_gen(t) <= LW_OWNER_GEN_MAX; }

/* handoff_request is handoffRequest: h is a valid pending request. */
static inline bool handoff_request(uint32_t h) {
	return h != 0 && (h & (LW_HANDOFF_GRANTED | LW_HANDOFF_RESERVED)) == 0 && valid_token(h);
}

/* handoff_corrupt is handoffCorrupt: h is no state of a valid history. */
static inline bool handoff_corrupt(uint32_t h) {
	return h != 0 && ((h & LW_HANDOFF_RESERVED) || !valid_token(h & LW_OWNER_MASK));
}

/* grant is grant: hand the lock, held by us as word w, to the requester
 * of request h; false (nothing changed) if the request went first. */
static bool grant(lw_mutex *m, uint32_t w, uint32_t h) {
	/* Grant first: a taker from a dead holder then knows no caller held it. */
	if (!atomic_compare_exchange_strong(m->handoff, &h, h | LW_HANDOFF_GRANTED))
		return false;
	for (int i = 0; i < retry_limit; i++) { /* a CAS fails only if a flag changed */
		/* Move the word to the requester, keeping waiters and statistics. */
		if (atomic_compare_exchange_strong(m->word, &w, (w & (LW_WORD_STATS | LW_WORD_WAITERS)) | h)) {
			futex_wake(m->handoff, INT32_MAX, true);
			return true;
		}
		if ((w & LW_OWNER_MASK) != m->token)
			break; /* w holds what the CAS saw */
	}
	return true; /* corrupt: the word keeps changing under its holder */
}

int lw_mutex_unlock(lw_mutex *m) {
	if (!m)
		return LW_EINVAL;
	uint32_t w = m->token;
	if (atomic_compare_exchange_strong(m->word, &w, 0))
		return 0;
	/* unlockSlow: hand the lock to a request, or clear every bit but
	 * statistics. Only waiters and inspectors change a held word, once
	 * each: one that keeps changing is being overwritten. */
	for (int i = 0; i < retry_limit; i++) {
		w = atomic_load(m->word);
		if ((w & LW_OWNER_MASK) != m->token)
			return LW_EPERM;
		if (!(w & LW_WORD_INCONSISTENT)) {
			uint32_t h = atomic_load(m->handoff);
			if (handoff_request(h) && h == m->token && atomic_load(&m->gate) == 0) {
				/* Our own request, but no thread of ours waits (the
				 * gate holder files, and takes or withdraws before
				 * it lets the gate go): forged. Granting it would
				 * leave the word on us with nobody holding. Drop it. */
				atomic_compare_exchange_strong(m->handoff, &h, 0);
			} else if (handoff_request(h) && grant(m, w, h)) {
				return 0;
			}
		}
		uint32_t next = w & LW_WORD_STATS;
		if (w & LW_WORD_INCONSISTENT)
			next |= LW_OWNER_NOT_RECOVERABLE;
		if (!atomic_compare_exchange_strong(m->word, &w, next))
			continue;
		/* Released: a request filed after we looked (or one an
		 * inconsistent lock must not grant) is withdrawn for its
		 * waiter, which is woken to look again. */
		uint32_t h = atomic_load(m->handoff);
		if (handoff_request(h) && atomic_compare_exchange_strong(m->handoff, &h, 0))
			futex_wake(m->handoff, INT32_MAX, true);
		if (w & LW_WORD_INCONSISTENT)
			futex_wake(m->word, INT32_MAX, true); /* all must learn */
		else if (w & LW_WORD_WAITERS)
			futex_wake(m->word, 1, true);
		return 0;
	}
	return LW_ECORRUPT;
}

int lw_mutex_consistent(lw_mutex *m) {
	if (!m)
		return LW_EINVAL;
	for (int i = 0; i < retry_limit; i++) { /* a CAS fails only if waiters or the stamp bit came */
		uint32_t w = atomic_load(m->word);
		if ((w & LW_OWNER_MASK) != m->token)
			return LW_EPERM;
		if (!(w & LW_WORD_INCONSISTENT) || atomic_compare_exchange_strong(m->word, &w, w & ~LW_WORD_INCONSISTENT))
			return 0;
	}
	return LW_ECORRUPT; /* the lock word keeps changing under its holder */
}

/* gate_lock takes the process-local gate, by the deadline (-1: none). */
static bool gate_lock(lw_mutex *m, int64_t deadline) {
	uint32_t c = 0;
	if (atomic_compare_exchange_strong(&m->gate, &c, 1))
		return true;
	if (c != 2)
		c = atomic_exchange(&m->gate, 2);
	while (c != 0) {
		if (deadline >= 0 && mono_ns() >= deadline)
			return false;
		futex_wait(&m->gate, 2, slice_until(deadline, INT64_MAX), false);
		c = atomic_exchange(&m->gate, 2);
	}
	return true;
}

static void gate_unlock(lw_mutex *m) {
	if (atomic_exchange(&m->gate, 0) == 2)
		futex_wake(&m->gate, 1, false);
}

static void count_slow_acquisition(lw_mutex *m, int64_t start) {
	atomic_fetch_add(w64(m->obj, LW_MUTEX_ACQUIRED), 1);
	atomic_fetch_add(w64(m->obj, LW_MUTEX_SLOW), 1);
	uint64_t ns = (uint64_t)(mono_ns() - start);
	atomic_fetch_add(w64(m->obj, LW_MUTEX_WAIT_NS), ns);
	_Atomic uint64_t *mx = w64(m->obj, LW_MUTEX_WAIT_MAX_NS);
	uint64_t old = atomic_load(mx);
	while (ns > old && !atomic_compare_exchange_weak(mx, &old, ns))
		;
}

/* withdraw is withdraw: take back our pending request, if we filed one. */
static void withdraw(lw_mutex *m, bool requested) {
	uint32_t mine = m->token;
	if (requested)
		atomic_compare_exchange_strong(m->handoff, &mine, 0);
}

/* give_up is giveUp: end a wait past its deadline without the lock;
 * false if a grant came first (look again, and take it). */
static bool give_up(lw_mutex *m, bool requested, bool slept) {
	uint32_t mine = m->token;
	if (requested && !atomic_compare_exchange_strong(m->handoff, &mine, 0))
		return false;
	if (slept) /* we may have consumed a wake-up: pass it on */
		futex_wake(m->word, 1, true);
	return true;
}

/* take_from_dead is takeFromDead: take word w from its dead holder
 * (false: the word changed first), marked inconsistent; then, if the
 * hand-off word (read after the CAS: the holder may have granted just
 * before it died) grants the lock to that dead holder itself, plainly:
 * clear the inconsistent bit and the grant, and set *plain. A grant to
 * another process (the holder died handing over, or a stale grant an
 * older build left) is cleared and the death reported. */
static bool take_from_dead(lw_mutex *m, uint32_t w, bool *plain) {
	uint32_t dead = w & LW_OWNER_MASK;
	if (!atomic_compare_exchange_strong(m->word, &w, (w & (LW_WORD_STATS | LW_WORD_WAITERS)) | LW_WORD_INCONSISTENT | m->token))
		return false;
	uint32_t h = atomic_load(m->handoff);
	*plain = (h & LW_HANDOFF_GRANTED) && (h & LW_OWNER_MASK) == dead;
	if (!*plain) {
		if ((h & LW_HANDOFF_GRANTED) && atomic_compare_exchange_strong(m->handoff, &h, 0))
			futex_wake(m->handoff, INT32_MAX, true);
		return true;
	}
	for (int i = 0; i < retry_limit; i++) { /* a CAS fails only if a flag changed */
		uint32_t x = atomic_load(m->word);
		if ((x & LW_OWNER_MASK) != m->token || atomic_compare_exchange_strong(m->word, &x, x & ~LW_WORD_INCONSISTENT))
			break;
	}
	if (atomic_compare_exchange_strong(m->handoff, &h, 0))
		futex_wake(m->handoff, INT32_MAX, true);
	return true;
}

enum {
	starve_ns = 1000000,      /* sharedStarveNs: wait before asking for a hand-off */
	settle_ns = 100000,       /* handoffSettle */
};
static const int64_t grace_ns = 1000000000; /* handoffGrace */

/* lock_slow_wait is lockSlowWait: spin, queue behind the gate, sleep in
 * 10 ms slices on the shared word, checking the holder between them;
 * after 1 ms, ask for a hand-off and sleep on the hand-off word. */
static int lock_slow_wait(lw_mutex *m, int64_t deadline, int64_t *start, uint32_t *dead_pid) {
	uint32_t backoff = 1;
	for (int i = 0; i < spin_iterations; i++) {
		uint32_t w = atomic_load(m->word);
		if ((w & LW_OWNER_MASK) == LW_OWNER_NOT_RECOVERABLE)
			return LW_ENOTRECOVERABLE;
		if (take(m, w, 0)) {
			if (w & LW_WORD_STATS)
				stamp(m);
			return 0;
		}
		cpu_pause(backoff);
		backoff = backoff * 2 < spin_pause_max ? backoff * 2 : spin_pause_max;
	}
	int64_t began = mono_ns(); /* the starvation clock: gate time counts */
	if (!gate_lock(m, deadline))
		return LW_ETIMEDOUT;
	if (*start == 0)
		*start = began;
	bool slept = false, requested = false;
	int64_t checked = 0, h_checked = 0, settling = 0;
	const uint32_t mine = m->token | LW_HANDOFF_GRANTED;
	uint16_t waits_for = 0; /* our waits-for record, 0 if none */
	int err;
	for (uint32_t i = 1;; i++) {
		uint32_t w = atomic_load(m->word);
		uint32_t h = atomic_load(m->handoff);
		uint32_t owner = w & LW_OWNER_MASK;
		if (h == m->token)
			requested = true; /* ours (adopt one left behind: see Go) */
		else if (h == mine && !requested) {
			/* Granted to us, who never asked: forged (see Go).
			 * Taking it could make two of our threads hold. */
			uint32_t g = mine;
			if (atomic_compare_exchange_strong(m->handoff, &g, 0))
				futex_wake(m->handoff, INT32_MAX, true);
			err = LW_ECORRUPT;
			break;
		}
		if (requested) {
			if (h == mine && owner == m->token) {
				/* Handed to us: clear the grant, let one more
				 * sleeper look (a second starving process). */
				uint32_t g = mine;
				atomic_compare_exchange_strong(m->handoff, &g, 0);
				stamp(m);
				if (w & LW_WORD_WAITERS)
					futex_wake(m->word, 1, true);
				err = 0;
				break;
			}
			if (h != mine && h != m->token)
				requested = false; /* withdrawn for us: ask again later */
		}
		if (handoff_corrupt(h)) {
			err = LW_ECORRUPT;
			break;
		}
		if (owner == 0) {
			/* Take it marked waiters: others may still sleep. */
			if (take(m, w, LW_WORD_WAITERS)) {
				if (requested) { /* free with our request pending: take it back */
					uint32_t r1 = m->token, r2 = mine;
					atomic_compare_exchange_strong(m->handoff, &r1, 0);
					atomic_compare_exchange_strong(m->handoff, &r2, 0);
				}
				if (slept || (w & LW_WORD_STATS))
					stamp(m);
				err = 0;
				break;
			}
			/* Lost the race (or the word changed): a word that keeps
			 * changing must not outlast the deadline. */
			if (i % retry_check_every == 0 && deadline >= 0 && mono_ns() >= deadline) {
				if (!give_up(m, requested, slept))
					continue; /* granted meanwhile: take it */
				err = LW_ETIMEDOUT;
				break;
			}
			continue;
		}
		if (owner == LW_OWNER_NOT_RECOVERABLE) {
			withdraw(m, requested);
			err = LW_ENOTRECOVERABLE;
			break;
		}
		if (!valid_token(owner)) {
			withdraw(m, requested);
			err = LW_ECORRUPT; /* validToken: names no incarnation */
			break;
		}
		bool granted = requested && h == mine; /* the granter is between its CASes */
		bool done = deadline >= 0 && mono_ns() >= deadline;
		if (owner != m->token && (done || (slept && mono_ns() - checked >= LW_OWNER_CHECK_INTERVAL_NS))) {
			uint32_t pid;
			bool alive = token_alive(m->r, owner, &pid);
			checked = mono_ns();
			if (!alive) {
				/* Take over from the dead holder: keep waiters; mark
				 * the data inconsistent unless a grant says no caller
				 * held it (plain take-back). */
				bool plain;
				if (take_from_dead(m, w, &plain)) {
					withdraw(m, requested); /* we hold: no request left */
					stamp(m);
					if (plain) {
						err = 0;
						break;
					}
					if (dead_pid)
						*dead_pid = pid;
					err = LW_EOWNERDEAD;
					break;
				}
				continue;
			}
		}
		if (granted) {
			/* Ours once the granter's second CAS lands; a passed
			 * deadline cannot refuse it, but a grant the word does
			 * not follow for grace_ns after it is corrupt. */
			if (done) {
				if (settling == 0)
					settling = mono_ns();
				else if (mono_ns() - settling >= grace_ns) {
					err = LW_ECORRUPT;
					break;
				}
			}
			slept = true;
			futex_wait(m->word, w, settle_ns, true);
			continue;
		}
		if (done) {
			if (!give_up(m, requested, slept))
				continue; /* granted meanwhile: take it */
			err = LW_ETIMEDOUT;
			break;
		}
		if (!requested && mono_ns() - began >= starve_ns) {
			/* Starving: ask for a hand-off, then look at the word again
			 * before sleeping (the Dekker pair with unlock's release). */
			if (h == 0) {
				uint32_t z = 0;
				requested = atomic_compare_exchange_strong(m->handoff, &z, m->token);
			} else if (!(h & LW_HANDOFF_GRANTED) && h != m->token && mono_ns() - h_checked >= LW_OWNER_CHECK_INTERVAL_NS) {
				uint32_t pid;
				h_checked = mono_ns();
				if (!token_alive(m->r, h, &pid)) /* replace a dead process's request */
					requested = atomic_compare_exchange_strong(m->handoff, &h, m->token);
			}
			if (requested)
				continue;
		}
		if (!(w & LW_WORD_WAITERS)) {
			/* Mark the word so that unlock knows to wake us (or to
			 * take its slow path and grant our request). */
			if (!atomic_compare_exchange_strong(m->word, &w, w | LW_WORD_WAITERS))
				continue;
			w |= LW_WORD_WAITERS;
		}
		if (w & LW_WORD_STATS)
			atomic_fetch_add(w64(m->obj, LW_MUTEX_PARKS), 1);
		if (!slept) {
			/* The first liveness check is one interval from now. */
			slept = true;
			checked = mono_ns();
			/* Before the first sleep, kept across the slices: a
			 * detector reads it twice, a slice apart or more. */
			waits_for = set_waits_for(m->r, m->waits_for1);
		}
		if (requested) {
			/* Asleep on our request: a grant changes it, and whoever
			 * withdraws it for us wakes us. */
			futex_wait(m->handoff, m->token, slice_until(deadline, LW_OWNER_CHECK_INTERVAL_NS), true);
		} else {
			int64_t slice = LW_OWNER_CHECK_INTERVAL_NS, left = starve_ns - (mono_ns() - began);
			if (left > 0 && left < slice)
				slice = left; /* wake to file the request on time */
			futex_wait(m->word, w, slice_until(deadline, slice), true);
		}
	}
	clear_waits_for(m->r, waits_for); /* after the wait: holding is a self-edge */
	gate_unlock(m);
	return err;
}

static int lock_slow(lw_mutex *m, int64_t timeout_ns, uint32_t *dead_pid) {
	int64_t deadline = deadline_of(timeout_ns);
	atomic_fetch_add(&m->r->waiting, 1);
	int err;
	uint32_t w = atomic_load(m->word);
	bool stats = w & LW_WORD_STATS;
	if (take(m, w, 0)) {
		/* Free: we came here only to be counted. */
		if (stats) {
			atomic_fetch_add(w64(m->obj, LW_MUTEX_ACQUIRED), 1);
			stamp(m);
		}
		err = 0;
	} else {
		int64_t start = stats ? mono_ns() : 0;
		err = lock_slow_wait(m, deadline, &start, dead_pid);
		if (stats && (err == 0 || err == LW_EOWNERDEAD))
			count_slow_acquisition(m, start);
	}
	atomic_fetch_sub(&m->r->waiting, 1);
	return err;
}
