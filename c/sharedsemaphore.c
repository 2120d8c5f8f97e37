//go:build ignore

/*
 * sharedsemaphore.c: shm.Semaphore: a weighted semaphore whose permits are
 * held per process-table slot (an entry per slot: held, owner token, ticket,
 * want), so that a dead process's permits are taken back, once, by the next
 * acquirer that finds the semaphore short; every change is made under the
 * guard, a SharedMutex embedded at offset 0; waiters queue FIFO by ticket and
 * sleep on the seq word under their ticket's futex bit, one thread per
 * process (the gate); a change wakes the front ticket's bit only.
 *
 * Go twin: shm/semaphore.go, shm/semaphorewaiter.go.
 */
#include "internal.h"

/* ---- shm.Semaphore (shm/semaphore.go) ---- */

struct lw_sem {
	lw_mutex guard; /* over the object's first 64 bytes */
	lw_region *r;
	unsigned char *obj, *me; /* the object; this process's entry */
	/* gate queues this process's waiters (private futex, 0 free, 1 held,
	 * 2 held with sleepers): one at a time holds the process's ticket. */
	_Atomic uint32_t gate;
	/* local (the same futex states) is held by the one thread of this
	 * process that takes or holds the guard: the guard word names the
	 * process, not the thread, so only local's holder, before it takes
	 * the guard, can tell that a word naming us is nobody's hold of ours
	 * (corrupt) rather than another thread's (Go: Semaphore.local). */
	_Atomic uint32_t local;
	_Atomic int64_t reaped_ns;  /* last liveness check of the entries */
	_Atomic int64_t checked_ns; /* last validation of every entry */
	/* held: the permits this process holds, as its calls returned them,
	 * in process memory that no stray write to the region reaches (Go:
	 * Semaphore.held): release tells misuse (more than this) from
	 * corruption (the entry disagrees), and close asks it, not the entry. */
	_Atomic int64_t held;
};

/* lw_sem_dead collects what one call took back from dead processes. */
typedef struct {
	int entries; /* entries cleared: holders and waiters */
	lw_sem_recovery out;
} sem_rec;

static _Atomic uint32_t *sem_w(lw_sem *s, uint64_t off) { return w32(s->obj, off); }
static _Atomic uint32_t *sem_entry_w(lw_sem *s, uint32_t slot, uint64_t field) {
	return w32(s->obj, LW_SEM_SLOTS + (uint64_t)LW_SEM_SLOT_SIZE * slot + field);
}
static _Atomic uint32_t *sem_me_w(lw_sem *s, uint64_t field) { return w32(s->me, field); }

/* Under the guard every word is ours: plain atomic loads and stores. */
static uint32_t sem_ld(_Atomic uint32_t *w) { return atomic_load(w); }
static void sem_st(_Atomic uint32_t *w, uint32_t v) { atomic_store(w, v); }

int64_t lw_sem_capacity(const lw_sem *s) { return s ? atomic_load(w32(s->obj, LW_SEM_PERMITS)) : 0; }

int64_t lw_sem_held(const lw_sem *s) { return s ? atomic_load(&s->held) : 0; }

/* sem_holds: lw_region_close refuses while this process holds permits, by
 * its own count: a corrupt entry must not make close refuse forever. */
static bool sem_holds(lw_sem *s) { return lw_sem_held(s) != 0; }

/* sem_count adds n to what this process holds if err says the call holds
 * them (0 or LW_EOWNERDEAD), and returns err. */
static int sem_count(lw_sem *s, int64_t n, int err) {
	if (err == 0 || err == LW_EOWNERDEAD)
		atomic_fetch_add(&s->held, n);
	return err;
}

static bool sem_valid_token(uint32_t t) { return token_gen(t) != 0 && token_gen(t) <= LW_OWNER_GEN_MAX; }

/* recount sets the counts from the entries after the guard was taken from
 * a dead holder: the entries are the truth (Go: recount). */
static void sem_recount(lw_sem *s) {
	uint64_t held = 0;
	uint32_t waiters = 0;
	for (uint32_t slot = 0; slot < LW_PROC_SLOTS; slot++) {
		held += sem_ld(sem_entry_w(s, slot, LW_SEM_SLOT_HELD));
		waiters += sem_ld(sem_entry_w(s, slot, LW_SEM_SLOT_TICKET)) != 0;
	}
	sem_st(sem_w(s, LW_SEM_IN_USE), held > UINT32_MAX ? UINT32_MAX : (uint32_t)held);
	sem_st(sem_w(s, LW_SEM_WAITERS), waiters);
}

/* sem_front returns the earliest queued ticket, 0 if none, and what its
 * waiter wants (Go: front). */
static uint32_t sem_front(lw_sem *s, uint32_t *want) {
	uint32_t f = 0;
	*want = 0;
	if (sem_ld(sem_w(s, LW_SEM_WAITERS)) == 0)
		return 0;
	for (uint32_t slot = 0; slot < LW_PROC_SLOTS; slot++) {
		uint32_t t = sem_ld(sem_entry_w(s, slot, LW_SEM_SLOT_TICKET));
		if (t != 0 && (f == 0 || (int32_t)(t - f) < 0)) {
			f = t;
			*want = sem_ld(sem_entry_w(s, slot, LW_SEM_SLOT_WANT));
		}
	}
	return f;
}

/* sem_ticket_bit is ticket t's futex bit (Go: ticketBit). */
static uint32_t sem_ticket_bit(uint32_t t) { return 1u << (t % 32); }

static bool sem_fits(lw_sem *s, uint32_t n);

/* bump_seq bumps seq under the guard and returns the futex bits to wake,
 * 0 for none: the front ticket's, if a waiter may sleep and the front's
 * request fits; the sleepers bit stays while a ticket queues (Go: bumpSeq,
 * which argues why one wake-up per change is enough). */
static uint32_t sem_bump_seq(lw_sem *s) {
	uint32_t old = sem_ld(sem_w(s, LW_SEM_SEQ)), v = old + LW_SEM_SEQ_ONE, bits = 0, want;
	if (old & LW_SEM_SLEEPERS) {
		uint32_t front = sem_front(s, &want);
		if (front == 0)
			v &= ~(uint32_t)LW_SEM_SLEEPERS;
		else if (sem_fits(s, want))
			bits = sem_ticket_bit(front);
	}
	sem_st(sem_w(s, LW_SEM_SEQ), v);
	return bits;
}

/* sem_futex_lock takes a private lock word (0 free, 1 held, 2 held with
 * sleepers) before deadline (-1: none); false if it passed. */
static bool sem_futex_lock(_Atomic uint32_t *l, int64_t deadline) {
	uint32_t g = 0;
	if (atomic_compare_exchange_strong(l, &g, 1))
		return true;
	while (atomic_exchange(l, 2) != 0) {
		if (deadline >= 0 && mono_ns() >= deadline)
			return false;
		futex_wait(l, 2, slice_until(deadline, LW_OWNER_CHECK_INTERVAL_NS), false);
	}
	return true;
}

static void sem_futex_unlock(_Atomic uint32_t *l) {
	if (atomic_exchange(l, 0) == 2)
		futex_wake(l, 1, false);
}

/* guard_lock takes local, then the guard, repairing the counts after an
 * owner death; on an error it holds neither. A guard word naming this
 * process, found by local's holder before it takes the guard, is
 * LW_ECORRUPT: no thread of ours holds it, and waiting would be for ever. */
static int sem_guard_lock(lw_sem *s, int64_t deadline) {
	if (!sem_futex_lock(&s->local, deadline))
		return LW_ETIMEDOUT;
	if ((atomic_load(s->guard.word) & LW_OWNER_MASK) == s->guard.token) {
		sem_futex_unlock(&s->local);
		return LW_ECORRUPT;
	}
	int64_t left = deadline < 0 ? -1 : deadline - mono_ns();
	int err = lw_mutex_timedlock(&s->guard, left < 0 && deadline >= 0 ? 0 : left);
	if (err == LW_EOWNERDEAD) {
		sem_recount(s);
		atomic_store(&s->checked_ns, 0); /* the counts now come from every entry */
		/* The dead holder may have freed permits and died before its
		 * bump: bump and wake for it. */
		if (sem_bump_seq(s))
			futex_wake(sem_w(s, LW_SEM_SEQ), INT32_MAX, true);
		err = lw_mutex_consistent(&s->guard);
		if (err != 0)
			lw_mutex_unlock(&s->guard);
	}
	if (err != 0)
		sem_futex_unlock(&s->local);
	/* The guard is marked consistent whenever it is recovered: one found
	 * not recoverable was written by no valid history. */
	return err == LW_ENOTRECOVERABLE ? LW_ECORRUPT : err;
}

static int sem_guard_unlock(lw_sem *s, bool bump, int ret) {
	uint32_t bits = bump ? sem_bump_seq(s) : 0;
	lw_mutex_unlock(&s->guard);
	sem_futex_unlock(&s->local); /* after the guard: local's next holder finds it released */
	if (bits)
		futex_wake_bits(sem_w(s, LW_SEM_SEQ), INT32_MAX, bits);
	return ret;
}

static bool sem_fits(lw_sem *s, uint32_t n) {
	return (uint64_t)sem_ld(sem_w(s, LW_SEM_IN_USE)) + n <= sem_ld(sem_w(s, LW_SEM_PERMITS));
}

/* sem_validate returns LW_ECORRUPT if the object's words are ones no valid
 * history writes, else 0; guarded: under the guard, with the checks that a
 * change made meanwhile could fail for a reader without it (Go:
 * semValidate; docs/abi.md, the semaphore's validation). */
static int sem_validate(unsigned char *obj, bool guarded, int only) {
	uint64_t c = atomic_load(w32(obj, LW_SEM_PERMITS)), in_use = atomic_load(w32(obj, LW_SEM_IN_USE));
	uint32_t waiters = atomic_load(w32(obj, LW_SEM_WAITERS)), tickets = 0;
	if (in_use > c || waiters > LW_PROC_SLOTS)
		return LW_ECORRUPT;
	uint64_t sum = 0;
	uint32_t first = 0, end = LW_PROC_SLOTS;
	if (only >= 0)
		first = (uint32_t)only, end = (uint32_t)only + 1;
	for (uint32_t slot = first; slot < end; slot++) {
		unsigned char *e = obj + LW_SEM_SLOTS + (uint64_t)LW_SEM_SLOT_SIZE * slot;
		uint32_t t = atomic_load(w32(e, LW_SEM_SLOT_TOKEN)), ticket = atomic_load(w32(e, LW_SEM_SLOT_TICKET));
		uint64_t h = atomic_load(w32(e, LW_SEM_SLOT_HELD)), want = atomic_load(w32(e, LW_SEM_SLOT_WANT));
		if (h > c || want > c)
			return LW_ECORRUPT;
		if (t == 0 && guarded && (h != 0 || ticket != 0))
			return LW_ECORRUPT;
		if (t != 0 && (!sem_valid_token(t) || (t >> LW_OWNER_GEN_BITS) != slot))
			return LW_ECORRUPT;
		sum += h;
		tickets += ticket != 0;
	}
	if (only < 0 && guarded && (sum != in_use || tickets != waiters))
		return LW_ECORRUPT;
	return 0;
}

/* check validates the counts and this process's entry, and every entry on
 * the first call, then at least every LW_OWNER_CHECK_INTERVAL_NS (Go:
 * check). */
static int sem_check(lw_sem *s) {
	int only = (int)s->r->slot;
	int64_t now = mono_ns();
	if (now - atomic_load(&s->checked_ns) >= LW_OWNER_CHECK_INTERVAL_NS) {
		atomic_store(&s->checked_ns, now);
		only = -1;
	}
	int err = sem_validate(s->obj, true, only);
	if (err)
		atomic_store(&s->checked_ns, 0); /* stays corrupt: check it all again */
	return err;
}

/* sem_init makes s, zeroed, a handle of r's object i. */
static void sem_init(lw_sem *s, lw_region *r, uint32_t i) {
	s->r = r;
	s->obj = r->data + r->objs[i].offset;
	s->me = s->obj + LW_SEM_SLOTS + (uint64_t)LW_SEM_SLOT_SIZE * r->slot;
	s->guard.r = r;
	s->guard.obj = s->obj;
	s->guard.word = w32(s->obj, LW_MUTEX_WORD);
	s->guard.handoff = w32(s->obj, LW_MUTEX_HANDOFF);
	s->guard.token = r->token;
	strcpy(s->guard.name, r->objs[i].name);
}

int lw_region_sem(lw_region *r, const char *name, int64_t permits, lw_sem **out) {
	if (!r || !name || !out || permits < 1 || permits > UINT32_MAX)
		return LW_EINVAL;
	pthread_mutex_lock(&r->mu);
	uint32_t i;
	int err = object(r, name, LW_KIND_SEMAPHORE, LW_SEM_OBJ_SIZE, &i);
	if (err == 0 && !r->sems[i]) {
		lw_sem *s = calloc(1, sizeof *s);
		if (!s) {
			err = ENOMEM;
		} else {
			sem_init(s, r, i);
			r->sems[i] = s;
		}
	}
	if (err == 0) {
		/* A corrupt object is reported as such, not as a mismatch; the
		 * first handle anywhere records the capacity. */
		uint32_t zero = 0;
		err = sem_validate(r->sems[i]->obj, false, -1);
		if (err == 0)
			atomic_compare_exchange_strong(sem_w(r->sems[i], LW_SEM_PERMITS), &zero, (uint32_t)permits);
		if (err == 0 && sem_ld(sem_w(r->sems[i], LW_SEM_PERMITS)) != (uint32_t)permits)
			err = LW_EPERMITS;
		if (err == 0)
			*out = r->sems[i];
	}
	pthread_mutex_unlock(&r->mu);
	return err;
}

/* reclaim clears the entry of a dead incarnation (Go: reclaim). */
static void sem_reclaim(lw_sem *s, uint32_t slot, uint32_t pid, sem_rec *rec) {
	uint32_t h = sem_ld(sem_entry_w(s, slot, LW_SEM_SLOT_HELD));
	if (sem_ld(sem_entry_w(s, slot, LW_SEM_SLOT_TICKET)) != 0) {
		sem_st(sem_entry_w(s, slot, LW_SEM_SLOT_TICKET), 0);
		sem_st(sem_w(s, LW_SEM_WAITERS), sem_ld(sem_w(s, LW_SEM_WAITERS)) - 1);
	}
	sem_st(sem_entry_w(s, slot, LW_SEM_SLOT_HELD), 0);
	sem_st(sem_entry_w(s, slot, LW_SEM_SLOT_TOKEN), 0);
	sem_st(sem_w(s, LW_SEM_IN_USE), sem_ld(sem_w(s, LW_SEM_IN_USE)) - h);
	atomic_fetch_add(sem_w(s, LW_SEM_DEAD_HOLDERS), 1);
	rec->entries++;
	if (h != 0) {
		atomic_fetch_add(w64(s->obj, LW_SEM_RECOVERED), h);
		sem_st(sem_w(s, LW_SEM_DEAD_PID), pid);
		rec->out.holders++;
		rec->out.permits += h;
		rec->out.pid = pid;
	}
}

/* reap takes back the entries of dead processes, once every word is valid
 * (Go: reap). */
static int sem_reap(lw_sem *s, sem_rec *rec) {
	if (sem_validate(s->obj, true, -1))
		return LW_ECORRUPT;
	for (uint32_t slot = 0; slot < LW_PROC_SLOTS; slot++) {
		uint32_t t = sem_ld(sem_entry_w(s, slot, LW_SEM_SLOT_TOKEN)), pid = 0;
		if (t != 0 && t != s->r->token && !token_alive(s->r, t, &pid))
			sem_reclaim(s, slot, pid, rec);
	}
	return 0;
}

static int sem_reap_if_due(lw_sem *s, sem_rec *rec) {
	int64_t now = mono_ns();
	if (now - atomic_load(&s->reaped_ns) < LW_OWNER_CHECK_INTERVAL_NS)
		return 0;
	atomic_store(&s->reaped_ns, now);
	return sem_reap(s, rec);
}

/* sem_housekeep is reapSemaphores (shm/semaphorereclaim.go): region open,
 * after attaching, and close, before detaching, take back the entries of
 * dead processes in every semaphore of r's table, so that their permits
 * come back even when nobody acquires afterwards. Each is reaped under its
 * guard, so an entry is cleared once whoever else reaps at the same moment
 * (an acquirer, another process's open or close, Go's or C's). The guard is
 * only tried (free, or taken from a dead holder): a live holder is in a
 * critical section of a few stores and its own call, or a later open or
 * close, reaps instead, so open and close never wait on another process.
 * Nobody is told: the dead-holder and recovered counts record it. A
 * corrupt semaphore is left for its users' calls to report. r->mu must be
 * held. Returns the permits freed. */
static int64_t sem_housekeep(lw_region *r) {
	int64_t permits = 0;
	for (uint32_t i = 0; i < r->nobj; i++) {
		if (r->objs[i].kind != LW_KIND_SEMAPHORE || r->objs[i].size != LW_SEM_OBJ_SIZE)
			continue;
		/* This process's handle if it has one: its threads take the
		 * guard one at a time through its local lock. Otherwise one not
		 * cached: nothing but the guard's words and local are used. */
		lw_sem tmp = {0}, *s = r->sems[i];
		if (!s) {
			sem_init(&tmp, r, i);
			s = &tmp;
		}
		if (atomic_load(sem_w(s, LW_SEM_PERMITS)) == 0)
			continue; /* no handle has recorded a capacity: nothing held */
		if (sem_guard_lock(s, mono_ns()) != 0)
			continue;
		sem_rec rec = {0};
		if (sem_reap(s, &rec) != 0) {
			sem_guard_unlock(s, false, 0);
			continue;
		}
		sem_guard_unlock(s, rec.entries != 0, 0); /* freed permits: wake the front */
		permits += rec.out.permits;
	}
	return permits;
}

/* own makes our entry name us, taking back a dead previous incarnation of
 * our slot first (Go: own). */
static void sem_own(lw_sem *s, sem_rec *rec) {
	uint32_t t = sem_ld(sem_me_w(s, LW_SEM_SLOT_TOKEN));
	if (t != s->r->token) {
		if (t != 0)
			sem_reclaim(s, s->r->slot, 0, rec);
		sem_st(sem_me_w(s, LW_SEM_SLOT_TOKEN), s->r->token);
	}
}

static void sem_take(lw_sem *s, uint32_t n, sem_rec *rec) {
	sem_own(s, rec);
	sem_st(sem_me_w(s, LW_SEM_SLOT_HELD), sem_ld(sem_me_w(s, LW_SEM_SLOT_HELD)) + n);
	sem_st(sem_w(s, LW_SEM_IN_USE), sem_ld(sem_w(s, LW_SEM_IN_USE)) + n);
}

static void sem_settle(lw_sem *s) {
	if (sem_ld(sem_me_w(s, LW_SEM_SLOT_HELD)) == 0 && sem_ld(sem_me_w(s, LW_SEM_SLOT_TICKET)) == 0)
		sem_st(sem_me_w(s, LW_SEM_SLOT_TOKEN), 0);
}

static int sem_result(const sem_rec *rec, lw_sem_recovery *out) {
	if (rec->out.holders == 0)
		return 0;
	if (out)
		*out = rec->out;
	return LW_EOWNERDEAD;
}

/* try_take takes n under the guard if they fit and nobody waits (Go:
 * tryTake): 0 or LW_EOWNERDEAD taken, LW_EBUSY not. */
static int sem_try_take(lw_sem *s, uint32_t n, int64_t deadline, lw_sem_recovery *out) {
	int err = sem_guard_lock(s, deadline);
	if (err != 0)
		return err;
	sem_rec rec = {0};
	if ((err = sem_check(s)) != 0)
		return sem_guard_unlock(s, false, err);
	if (sem_ld(sem_w(s, LW_SEM_WAITERS)) != 0 || !sem_fits(s, n)) {
		err = sem_reap_if_due(s, &rec);
		if (err != 0 || sem_ld(sem_w(s, LW_SEM_WAITERS)) != 0 || !sem_fits(s, n))
			return sem_guard_unlock(s, rec.entries != 0, err ? err : LW_EBUSY);
	}
	sem_take(s, n, &rec);
	return sem_guard_unlock(s, rec.entries != 0, sem_result(&rec, out));
}

int lw_sem_tryacquire(lw_sem *s, int64_t n, lw_sem_recovery *dead) {
	if (!s || n < 0 || n > lw_sem_capacity(s))
		return LW_EINVAL;
	return n == 0 ? 0 : sem_count(s, n, sem_try_take(s, (uint32_t)n, -1, dead));
}

/* ---- The slow acquire (sharedsemaphorewaiter.go) ---- */

/* behind reports whether another process's waiter holds an earlier ticket. */
static bool sem_behind(lw_sem *s, uint32_t ticket) {
	if (sem_ld(sem_w(s, LW_SEM_WAITERS)) <= 1)
		return false;
	for (uint32_t slot = 0; slot < LW_PROC_SLOTS; slot++) {
		uint32_t t = sem_ld(sem_entry_w(s, slot, LW_SEM_SLOT_TICKET));
		if (t != 0 && slot != s->r->slot && (int32_t)(t - ticket) < 0)
			return true;
	}
	return false;
}

static void sem_join(lw_sem *s, uint32_t n, uint32_t *ticket, sem_rec *rec) {
	sem_own(s, rec);
	uint32_t t = sem_ld(sem_w(s, LW_SEM_NEXT));
	if (t == 0)
		t = 1;
	sem_st(sem_w(s, LW_SEM_NEXT), t + 1);
	*ticket = t;
	sem_st(sem_me_w(s, LW_SEM_SLOT_WANT), n);
	sem_st(sem_me_w(s, LW_SEM_SLOT_TICKET), t);
	sem_st(sem_w(s, LW_SEM_WAITERS), sem_ld(sem_w(s, LW_SEM_WAITERS)) + 1);
}

static void sem_leave(lw_sem *s, uint32_t ticket) {
	if (sem_ld(sem_me_w(s, LW_SEM_SLOT_TICKET)) != ticket)
		return;
	sem_st(sem_me_w(s, LW_SEM_SLOT_TICKET), 0);
	sem_st(sem_me_w(s, LW_SEM_SLOT_WANT), 0);
	sem_st(sem_w(s, LW_SEM_WAITERS), sem_ld(sem_w(s, LW_SEM_WAITERS)) - 1);
	sem_settle(s);
}

/* wait_queued is the waiter's loop, the guard held on entry (Go: wait and
 * round). It returns with the guard released and the ticket withdrawn,
 * except on a guard it could not take (*queued set). */
static int sem_wait_queued(lw_sem *s, uint32_t n, int64_t deadline, sem_rec *rec, lw_sem_recovery *out, uint32_t *ticket, bool *queued) {
	sem_join(s, n, ticket, rec);
	for (;;) {
		int before = rec->entries, err = sem_check(s);
		if (err == 0) {
			err = sem_reap_if_due(s, rec);
			uint32_t bits = rec->entries != before ? sem_bump_seq(s) : 0;
			if (bits)
				futex_wake_bits(sem_w(s, LW_SEM_SEQ), INT32_MAX, bits);
		}
		if (err == 0 && sem_ld(sem_me_w(s, LW_SEM_SLOT_TICKET)) != *ticket)
			err = LW_ECORRUPT;
		if (err != 0)
			return sem_guard_unlock(s, false, err);
		if (!sem_behind(s, *ticket) && sem_fits(s, n)) {
			sem_leave(s, *ticket);
			sem_take(s, n, rec);
			return sem_guard_unlock(s, true, sem_result(rec, out));
		}
		if (deadline >= 0 && mono_ns() >= deadline) {
			sem_leave(s, *ticket);
			return sem_guard_unlock(s, true, LW_ETIMEDOUT);
		}
		uint32_t v = sem_ld(sem_w(s, LW_SEM_SEQ)) | LW_SEM_SLEEPERS;
		sem_st(sem_w(s, LW_SEM_SEQ), v);
		sem_guard_unlock(s, false, 0);
		/* Under our ticket's bit: a bump wakes only the front's. */
		futex_wait_bits(sem_w(s, LW_SEM_SEQ), v, sem_ticket_bit(*ticket), slice_until(deadline, LW_OWNER_CHECK_INTERVAL_NS));
		if ((err = sem_guard_lock(s, deadline)) != 0) {
			*queued = true;
			return err;
		}
	}
}

int lw_sem_timedacquire(lw_sem *s, int64_t n, int64_t timeout_ns, lw_sem_recovery *dead) {
	if (!s || n < 0 || n > lw_sem_capacity(s))
		return LW_EINVAL;
	if (n == 0)
		return 0;
	int64_t deadline = deadline_of(timeout_ns);
	int err = sem_try_take(s, (uint32_t)n, deadline, dead);
	if (err != LW_EBUSY)
		return sem_count(s, n, err);
	atomic_fetch_add(&s->r->waiting, 1);
	if (!sem_futex_lock(&s->gate, deadline)) {
		atomic_fetch_sub(&s->r->waiting, 1);
		return LW_ETIMEDOUT;
	}
	sem_rec rec = {0};
	uint32_t ticket = 0;
	bool queued = false;
	err = sem_guard_lock(s, deadline);
	if (err == 0 && (err = sem_check(s)) != 0) {
		sem_guard_unlock(s, false, 0);
	} else if (err == 0 && sem_ld(sem_w(s, LW_SEM_WAITERS)) == 0 && sem_fits(s, (uint32_t)n)) {
		sem_take(s, (uint32_t)n, &rec);
		err = sem_guard_unlock(s, rec.entries != 0, sem_result(&rec, dead));
	} else if (err == 0) {
		err = sem_wait_queued(s, (uint32_t)n, deadline, &rec, dead, &ticket, &queued);
	}
	if (queued && sem_guard_lock(s, -1) == 0) {
		/* The deadline passed waiting for the guard (microseconds of
		 * work, or a dead holder's detection): withdraw now, bounded
		 * by that same critical section. */
		sem_leave(s, ticket);
		sem_guard_unlock(s, true, 0);
	}
	sem_futex_unlock(&s->gate);
	atomic_fetch_sub(&s->r->waiting, 1);
	return sem_count(s, n, err);
}

int lw_sem_acquire(lw_sem *s, int64_t n, lw_sem_recovery *dead) { return lw_sem_timedacquire(s, n, -1, dead); }

int lw_sem_release(lw_sem *s, int64_t n) {
	if (!s || n < 0)
		return LW_EINVAL;
	if (n == 0)
		return 0;
	/* Misuse is judged on this process's own count; from here on the n
	 * permits count as given back, whatever the words say. */
	int64_t h = atomic_load(&s->held);
	do {
		if (n > h)
			return LW_EPERM;
	} while (!atomic_compare_exchange_weak(&s->held, &h, h - n));
	int err = sem_guard_lock(s, -1);
	if (err != 0)
		return err;
	if (sem_ld(sem_me_w(s, LW_SEM_SLOT_TOKEN)) != s->r->token || sem_ld(sem_me_w(s, LW_SEM_SLOT_HELD)) < n)
		return sem_guard_unlock(s, false, LW_ECORRUPT); /* we hold them: the entry is wrong */
	/* Release trusts only its own entry and the counts: it checks those. */
	if ((err = sem_validate(s->obj, true, (int)s->r->slot)) != 0)
		return sem_guard_unlock(s, false, err);
	sem_st(sem_me_w(s, LW_SEM_SLOT_HELD), sem_ld(sem_me_w(s, LW_SEM_SLOT_HELD)) - (uint32_t)n);
	sem_st(sem_w(s, LW_SEM_IN_USE), sem_ld(sem_w(s, LW_SEM_IN_USE)) - (uint32_t)n);
	sem_settle(s);
	return sem_guard_unlock(s, true, 0);
}
