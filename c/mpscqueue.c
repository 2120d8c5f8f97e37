//go:build ignore

/*
 * mpscqueue.c: the shared multi-producer, single-consumer byte queue
 * (kind 11): producers claim space by a CAS of the claim word (tail) that
 * names them, write the record's header (state word, then position word),
 * free the claim word past the record, copy the payload, and publish by
 * storing the state word again; the one consumer reads records at head in
 * order. Layout and protocol: docs/abi.md "MPSC queue object".
 *
 * Contract: every word read from the queue is validated against the
 * handle's own geometry (capacity from the object table) before it is
 * used, so a corrupt queue is LW_ECORRUPT, never a read outside it. Four
 * reads are ordered so that a stale word is never judged corrupt or dead:
 *  - a free tail t is judged against head h only if tail still equals t
 *    after h was read (t read before h may be stale: head passed it);
 *  - a claiming word w waited on is judged against head only if tail
 *    still equals w after head was read;
 *  - a dead claimer's claim is taken back by: head, tail still w, then the
 *    header (state word, then position word), then one CAS from w;
 *  - a claimed record whose claimer is found dead is skipped only if its
 *    state word, read again after the liveness check, is still that
 *    claim: the producer may have published and then died.
 * Bounds (mpsclayout.go): wake words hold only SLEEPING and CLOSED;
 * sent <= tail/16 and recovered <= tail/16 + mpsc_max_deaths, checked while
 * holding the claim at tail; received + lost <= head/16, counted after
 * head moves; the consumer's head and role words read back as it wrote.
 *
 * The consumer's receive is mpscconsumer.c.
 *
 * Go twin: shm/mpsc.go, shm/mpscproducer.go, shm/mpsclayout.go.
 */
#include "internal.h"

enum {
	mpsc_consumer_role = 0, mpsc_producers = 4, mpsc_tail = 128, mpsc_not_empty = 136, mpsc_prod_sleeps = 144,
	mpsc_prod_wakes = 152, mpsc_sent = 160, mpsc_recovered = 168, mpsc_head = 256, mpsc_not_full = 264,
	mpsc_cons_sleeps = 272, mpsc_cons_wakes = 280, mpsc_received = 288, mpsc_lost = 296, mpsc_data = 512,
	mpsc_hdr = 16,  /* record header: state word at 0, position word at 8 */
	mpsc_claim_spins = 64, /* looks at a held claim word (three stores) before yielding */
	mpsc_claimed = 1, mpsc_published = 2, mpsc_padding = 3, /* record states, bits 28-29 */
};
/* Test hook steps, named by LOCKWORD_MPSC_TEST_STOP (read at attach; a
 * predictable branch per step otherwise): the process stops itself
 * (SIGSTOP) there, for a test to kill or continue it. */
static const char *const mpsc_stop_steps[5] = {
	"", "claiming",     /* a producer holding the claim word, no header yet */
	"claimed",          /* a producer whose header is written, no payload */
	"claimed-exit",     /* "claimed", and once continued, exit after publishing */
	"dead-check",       /* the consumer, once: a claimed record read, its claimer not yet asked about */
};
#define MPSC_CLAIMING (1ull << 63)
#define MPSC_POS_SHIFT 28
#define MPSC_POS_MASK ((1ull << 35) - 1)
#define MPSC_ST_SHIFT 28
#define MPSC_LEN_SHIFT 32
#define MPSC_WAKE_BITS (LW_RING_SLEEPING | LW_RING_CLOSED)
/* owner tokens a region issues before one comes back: each claim taken
 * back without a record is one such process's death */
#define MPSC_MAX_DEATHS ((uint64_t)LW_PROC_SLOTS * LW_OWNER_GEN_MAX)

struct lw_mpsc {
	lw_region *r;
	bool producer, closed;
	unsigned char *data;
	uint64_t capacity, mask, max_msg;
	_Atomic uint32_t *role, *producers, *not_empty, *not_full;
	_Atomic uint64_t *tail, *head, *sleeps, *wakes, *sent, *received, *recovered, *lost;
	uint32_t token;
	int err;           /* sticky: corrupt, or closed */
	int stop_at;       /* test hook (LOCKWORD_MPSC_TEST_STOP), mpsc_stop_steps */
	uint64_t head_c;   /* producer: last head validated; consumer: our head */
	uint64_t end;      /* consumer: where records end, from the claim word */
	int64_t peer_next; /* producer: next consumer liveness check (mono ns) */
	int64_t blk_next;  /* consumer: next claimer liveness check */
	uint64_t blk_at;   /* the position blk_next is for (+1 for the claim word) */
};

static _Atomic uint64_t *mpsc_rec_state(lw_mpsc *q, uint64_t off) { return w64(q->data, off); }
static _Atomic uint64_t *mpsc_rec_pos(lw_mpsc *q, uint64_t off) { return w64(q->data, off + 8); }
static uint64_t mpsc_size(uint64_t n) { return mpsc_hdr + ((n + 15) & ~(uint64_t)15); }
static uint64_t mpsc_st_word(uint32_t tok, uint32_t st, uint64_t len) {
	return len << MPSC_LEN_SHIFT | (uint64_t)st << MPSC_ST_SHIFT | (tok & LW_OWNER_MASK);
}

static int mpsc_corrupt(lw_mpsc *q) { return q->err = LW_ECORRUPT; }

/* mpsc_counts_ok is mpscCountsReason: the counters, each read before the
 * position t or h it is judged against. */
static bool mpsc_counts_ok(uint64_t sent, uint64_t recovered, uint64_t received, uint64_t lost, uint64_t h, uint64_t t) {
	return sent <= t / 16 && recovered <= t / 16 + MPSC_MAX_DEATHS && received <= h / 16 && lost <= h / 16 - received;
}

/* mpsc_wake_ok, mpsc_role_ok: a wake word with only its two bits, a role word that is 0
 * or an owner token; else the queue is corrupt. */
static bool mpsc_wake_ok(lw_mpsc *q, uint32_t v) { return (v & ~MPSC_WAKE_BITS) == 0 || (mpsc_corrupt(q), false); }
static bool mpsc_role_ok(lw_mpsc *q, uint32_t v) {
	return v == 0 || ((v & ~LW_OWNER_MASK) == 0 && valid_token(v)) || (mpsc_corrupt(q), false);
}

/* due paces liveness checks (deadline.due): true at most once per 10 ms,
 * the first time an interval after the first call (*next 0: start). */
static bool mpsc_due(int64_t *next) {
	int64_t now = mono_ns();
	if (*next == 0 || now < *next) {
		if (*next == 0)
			*next = now + LW_OWNER_CHECK_INTERVAL_NS;
		return false;
	}
	*next = now + LW_OWNER_CHECK_INTERVAL_NS;
	return true;
}

/* mpsc_claim_end is claimEnd: validate claim word w against head h; *end is
 * where published records end (the free or the claimed position). */
static bool mpsc_claim_end(lw_mpsc *q, uint64_t w, uint64_t h, uint64_t *end) {
	uint64_t p = w;
	if (w & MPSC_CLAIMING) {
		if (!valid_token((uint32_t)(w & LW_OWNER_MASK))) {
			mpsc_corrupt(q);
			return false;
		}
		uint64_t low = (w >> MPSC_POS_SHIFT & MPSC_POS_MASK) << 3;
		p = h + ((low - h) & ((1ull << 38) - 1)); /* the position within 2^38 past head */
	}
	if (p % 16 != 0 || h % 16 != 0 || p - h > q->capacity) {
		mpsc_corrupt(q);
		return false;
	}
	*end = p;
	return true;
}

static bool mpsc_claimer_dead(lw_mpsc *q, uint32_t tok) {
	uint32_t pid;
	return valid_token(tok) && !token_alive(q->r, tok, &pid);
}

/* mpsc_take_back is takeBack (point c of the contract). */
static void mpsc_take_back(lw_mpsc *q, uint64_t w) {
	uint64_t h = atomic_load(q->head), p;
	if (atomic_load(q->tail) != w || !mpsc_claim_end(q, w, h, &p))
		return; /* the claim is over: w may lie behind head now */
	uint64_t next = p, off = p & q->mask, room = q->capacity - off;
	uint64_t st = atomic_load(mpsc_rec_state(q, off));
	if (atomic_load(mpsc_rec_pos(q, off)) == p && (uint32_t)(st & LW_OWNER_MASK) == (uint32_t)(w & LW_OWNER_MASK)) {
		uint64_t len = st >> MPSC_LEN_SHIFT;
		switch (st >> MPSC_ST_SHIFT & 0xF) { /* bits 30-31 must be 0 */
		case mpsc_claimed:
			if (len <= q->max_msg && mpsc_size(len) <= room)
				next = p + mpsc_size(len);
			break;
		case mpsc_padding:
			if (off != 0 && mpsc_hdr + len == room)
				next = p + room;
			break;
		}
	}
	if (atomic_compare_exchange_strong(q->tail, &w, next))
		atomic_fetch_add(q->recovered, 1);
}

static void mpsc_wake(lw_mpsc *q, _Atomic uint32_t *word, int n) {
	if (atomic_load(word) & LW_RING_SLEEPING && atomic_fetch_and(word, ~LW_RING_SLEEPING) & LW_RING_SLEEPING) {
		atomic_fetch_add(q->wakes, 1);
		futex_wake(word, n, true);
	}
}

/* mpsc_await is ringindex.Await: spin, yield, then announce a sleep on
 * word, look again, and sleep in slices of at most 10 ms. */
static int mpsc_await(lw_mpsc *q, _Atomic uint32_t *word, int64_t deadline, bool (*ready)(lw_mpsc *, uint64_t), uint64_t need) {
	for (int i = 0;; i++) {
		bool sleeping = i >= ring_spin_iterations + ring_yield_rounds;
		uint32_t old = sleeping ? atomic_fetch_or(word, LW_RING_SLEEPING) : atomic_load(word);
		int err = !mpsc_wake_ok(q, old) ? LW_ECORRUPT : old & LW_RING_CLOSED && q->producer ? LW_ERINGCLOSED : 0;
		if (!err && ready(q, need))
			err = -1;
		if (!err && sleeping) {
			if (deadline >= 0 && mono_ns() >= deadline)
				err = LW_ETIMEDOUT;
			else if (q->producer && mpsc_due(&q->peer_next)) {
				uint32_t tok = atomic_load(q->role), pid;
				if (!mpsc_role_ok(q, tok))
					err = LW_ECORRUPT;
				else if (tok != 0 && !token_alive(q->r, tok, &pid))
					err = LW_EPEERDEAD;
			}
		}
		if (err) {
			if (sleeping)
				atomic_fetch_and(word, ~LW_RING_SLEEPING);
			return err < 0 ? 0 : err;
		}
		if (sleeping) {
			atomic_fetch_add(q->sleeps, 1);
			futex_wait(word, LW_RING_SLEEPING, slice_until(deadline, LW_OWNER_CHECK_INTERVAL_NS), true);
		} else if (i < ring_spin_iterations) {
			cpu_pause(ring_spin_pause);
		} else {
			sched_yield();
		}
	}
}

static int mpsc_attach(lw_region *r, const char *name, size_t capacity, bool producer, lw_mpsc **out) {
	if (!r || !name || !out)
		return LW_EINVAL;
	if (capacity < LW_MPSC_MIN_CAPACITY || capacity > LW_MPSC_MAX_CAPACITY || (capacity & (capacity - 1)) != 0)
		return LW_EOBJBOUNDS;
	unsigned char *obj;
	int err = sized_object(r, name, LW_KIND_MPSC, mpsc_data + capacity, &obj);
	if (err)
		return err;
	lw_mpsc *q = calloc(1, sizeof *q);
	if (!q)
		return ENOMEM;
	*q = (lw_mpsc){
		.r = r, .producer = producer, .data = obj + mpsc_data, .capacity = capacity, .mask = capacity - 1,
		.max_msg = capacity - mpsc_hdr, .role = w32(obj, mpsc_consumer_role), .producers = w32(obj, mpsc_producers),
		.not_empty = w32(obj, mpsc_not_empty), .not_full = w32(obj, mpsc_not_full), .tail = w64(obj, mpsc_tail),
		.head = w64(obj, mpsc_head), .sleeps = w64(obj, producer ? mpsc_prod_sleeps : mpsc_cons_sleeps),
		.wakes = w64(obj, producer ? mpsc_prod_wakes : mpsc_cons_wakes), .sent = w64(obj, mpsc_sent),
		.received = w64(obj, mpsc_received), .recovered = w64(obj, mpsc_recovered), .lost = w64(obj, mpsc_lost),
		.token = r->token,
	};
	const char *stop = getenv("LOCKWORD_MPSC_TEST_STOP");
	for (int k = 1; stop && k < 5; k++)
		if (!strcmp(stop, mpsc_stop_steps[k]))
			q->stop_at = k;
	bool claimed = producer;
	for (int k = 0; k < retry_limit && !claimed; k++) { /* a CAS fails only if another claimant moved it */
		uint32_t w = atomic_load(q->role), pid;
		int busy = !mpsc_role_ok(q, w) ? LW_ECORRUPT : w != 0 && token_alive(r, w, &pid) ? LW_ERINGBUSY : 0;
		if (busy) {
			free(q);
			return busy;
		}
		claimed = atomic_compare_exchange_strong(q->role, &w, q->token);
	}
	/* Tail, head, tail again (point a): a tail read before a head that
	 * other producers and the consumer moved since may lie more than
	 * capacity past it. The consumer's head is its own: one pass. */
	uint64_t end, w = 0, lost;
	for (int k = 0; k < retry_limit; k++) {
		w = atomic_load(q->tail);
		q->head_c = q->end = atomic_load(q->head);
		if (!producer || atomic_load(q->tail) == w)
			break;
	}
	if (!claimed || !mpsc_claim_end(q, w, q->head_c, &end) || lw_mpsc_lost(q, &lost) != 0) {
		uint32_t mine = q->token;
		if (claimed && !producer)
			atomic_compare_exchange_strong(q->role, &mine, 0);
		free(q);
		return LW_ECORRUPT;
	}
	if (producer) {
		if ((int32_t)(atomic_fetch_add(q->producers, 1) + 1) < 1) {
			atomic_fetch_sub(q->producers, 1);
			free(q);
			return LW_ECORRUPT;
		}
	} else { /* the role is ours: an earlier consumer's close ends here */
		atomic_fetch_and(q->not_empty, ~LW_RING_CLOSED);
		atomic_fetch_and(q->not_full, ~LW_RING_CLOSED);
	}
	*out = q;
	return 0;
}

int lw_region_mpsc_producer(lw_region *r, const char *name, size_t capacity, lw_mpsc **out) {
	return mpsc_attach(r, name, capacity, true, out);
}

int lw_region_mpsc_consumer(lw_region *r, const char *name, size_t capacity, lw_mpsc **out) {
	return mpsc_attach(r, name, capacity, false, out);
}

size_t lw_mpsc_max_message(const lw_mpsc *q) { return q ? (size_t)q->max_msg : 0; }
int lw_mpsc_lost(lw_mpsc *q, uint64_t *lost) {
	if (!q || !lost)
		return LW_EINVAL;
	uint64_t sent = atomic_load(q->sent), rec = atomic_load(q->recovered), got = atomic_load(q->received);
	*lost = atomic_load(q->lost);
	uint64_t w = 0, h = 0, t;
	for (int k = 0; k < retry_limit; k++) { /* tail, head, tail: one moment's pair */
		w = atomic_load(q->tail);
		h = atomic_load(q->head);
		if (atomic_load(q->tail) == w)
			break;
	}
	if (!mpsc_claim_end(q, w, h, &t) || !mpsc_counts_ok(sent, rec, got, *lost, h, t))
		return mpsc_corrupt(q);
	return 0;
}

/* mpsc_refresh_head is refreshHead (point a): true if need bytes are free past
 * the free tail t, or the tail moved on (look again). */
static bool mpsc_refresh_head(lw_mpsc *q, uint64_t t, uint64_t need) {
	uint64_t h = atomic_load(q->head), end;
	if (atomic_load(q->tail) != t)
		return true;
	if (!mpsc_claim_end(q, t, h, &end))
		return false;
	q->head_c = h;
	return t - h <= q->capacity - need;
}

static bool mpsc_room_ready(lw_mpsc *q, uint64_t need) {
	if (!mpsc_wake_ok(q, atomic_load(q->not_full)))
		return true;
	uint64_t w = atomic_load(q->tail);
	return w & MPSC_CLAIMING || mpsc_refresh_head(q, w, need) || q->err;
}

/* mpsc_claim_wait is claimWait.wait (point b): another holds the claim word w.
 * Spin, then (blocking) yield and every 10 ms ask whether the claimer
 * lives, or (try: deadline -2) ask at once and report busy. */
static int mpsc_claim_wait(lw_mpsc *q, uint64_t w, int *spins, int64_t *check, int64_t deadline) {
	if (++*spins < mpsc_claim_spins) {
		cpu_pause(16);
		return 0;
	}
	if (deadline != -2) {
		if (deadline >= 0 && mono_ns() >= deadline)
			return LW_ETIMEDOUT;
		sched_yield();
		if (!mpsc_due(check))
			return 0;
	}
	uint64_t h = atomic_load(q->head), end;
	if (atomic_load(q->tail) != w)
		return 0; /* the claim is over: w may lie behind head now */
	if (!mpsc_claim_end(q, w, h, &end))
		return q->err;
	if (mpsc_claimer_dead(q, (uint32_t)(w & LW_OWNER_MASK))) {
		mpsc_take_back(q, w);
		return 0;
	}
	return deadline == -2 ? LW_EBUSY : 0;
}

static void mpsc_stop_here(lw_mpsc *q, int step) {
	if (q->stop_at == step || (step == 2 && q->stop_at == 3))
		raise(SIGSTOP); /* a test kills or continues us here */
}

/* mpsc_try_send is trySend: 1 sent; 0 with *err, or with *need the bytes to
 * wait for (0: a padding record was published; call again). */
static int mpsc_try_send(lw_mpsc *q, const void *msg, uint64_t n, int64_t deadline, uint64_t *need, int *err) {
	if ((*err = q->err) != 0)
		return 0;
	if (n > q->max_msg) {
		*err = LW_EMSGSIZE;
		return 0;
	}
	int spins = 0;
	int64_t check = 0;
	for (;;) {
		uint64_t t = atomic_load(q->tail);
		if (t & MPSC_CLAIMING) {
			int e = mpsc_claim_wait(q, t, &spins, &check, deadline);
			if (e == LW_EBUSY) /* try: held by a live claimer past the spin */
				*need = 1;
			else
				*err = e;
			if (e)
				return 0;
			continue;
		}
		if ((t % 16 != 0 || t - q->head_c > q->capacity) && !mpsc_refresh_head(q, t, 0)) {
			*err = q->err;
			return 0;
		}
		uint64_t off = t & q->mask;
		bool pad = q->capacity - off < mpsc_size(n);
		*need = pad ? q->capacity - off : mpsc_size(n);
		if (t - q->head_c > q->capacity - *need && !mpsc_refresh_head(q, t, *need)) {
			*err = q->err;
			return 0;
		}
		uint32_t ne = atomic_load(q->not_empty);
		if (!mpsc_wake_ok(q, ne) || ne & LW_RING_CLOSED) {
			*err = q->err ? q->err : LW_ERINGCLOSED;
			return 0;
		}
		uint64_t claim = MPSC_CLAIMING | ((t >> 3) & MPSC_POS_MASK) << MPSC_POS_SHIFT | q->token;
		if (!atomic_compare_exchange_strong(q->tail, &t, claim))
			continue; /* another producer claimed t first */
		/* Holding the claim at t, every record counted sent or taken back
		 * lies below t (the counters share the claim word's line). */
		if (!mpsc_counts_ok(atomic_load(q->sent), atomic_load(q->recovered), 0, 0, 0, t)) {
			uint64_t c = claim;
			atomic_compare_exchange_strong(q->tail, &c, t); /* give the claim back, unused */
			*err = mpsc_corrupt(q);
			return 0;
		}
		mpsc_stop_here(q, 1);
		/* State word, then position word, before the claim word is freed:
		 * a taker trusts the state word only if the position is this one. */
		atomic_store(mpsc_rec_state(q, off), pad ? mpsc_st_word(q->token, mpsc_padding, *need - mpsc_hdr) : mpsc_st_word(q->token, mpsc_claimed, n));
		atomic_store(mpsc_rec_pos(q, off), t);
		uint64_t c = claim;
		if (!atomic_compare_exchange_strong(q->tail, &c, t + *need)) {
			*err = mpsc_corrupt(q); /* only a taker who found us dead moves it */
			return 0;
		}
		if (pad) { /* published by freeing the claim word: a sleeping consumer moves on */
			mpsc_wake(q, q->not_empty, 1);
			*need = 0;
			return 0;
		}
		mpsc_stop_here(q, 2); /* and 3 */
		if (n > 0)
			memcpy(q->data + off + mpsc_hdr, msg, n);
		/* Publish: the payload is written before this store; a seq_cst
		 * store orders it before the load of the wake word (Dekker). */
		atomic_store(mpsc_rec_state(q, off), mpsc_st_word(q->token, mpsc_published, n));
		atomic_fetch_add(q->sent, 1);
		mpsc_wake(q, q->not_empty, 1);
		if (q->stop_at == 3)
			_exit(0); /* the test's producer that publishes, then dies */
		return 1;
	}
}

static int mpsc_send(lw_mpsc *q, const void *msg, size_t len, int64_t deadline) {
	if (!q || (!msg && len > 0) || !q->producer)
		return LW_EINVAL;
	for (;;) {
		uint64_t need = 0;
		int err;
		if (mpsc_try_send(q, msg, len, deadline, &need, &err))
			return 0;
		if (err)
			return err;
		if (need == 0)
			continue; /* published a padding record: now at offset 0 */
		if (deadline == -2)
			return LW_EBUSY;
		atomic_fetch_add(&q->r->waiting, 1);
		q->peer_next = 0;
		err = mpsc_await(q, q->not_full, deadline, mpsc_room_ready, need);
		atomic_fetch_sub(&q->r->waiting, 1);
		if (err || (err = q->err) != 0)
			return err;
	}
}

int lw_mpsc_send(lw_mpsc *q, const void *msg, size_t len, int64_t timeout_ns) {
	return mpsc_send(q, msg, len, deadline_of(timeout_ns));
}

int lw_mpsc_try_send(lw_mpsc *q, const void *msg, size_t len) { return mpsc_send(q, msg, len, -2); }

void lw_mpsc_detach(lw_mpsc *q) {
	if (!q || q->closed)
		return;
	q->closed = true;
	if (q->err == 0)
		q->err = LW_ERINGCLOSED;
	if (q->producer) {
		atomic_fetch_sub(q->producers, 1);
		return;
	}
	uint32_t mine = q->token;
	atomic_compare_exchange_strong(q->role, &mine, 0);
}

void lw_mpsc_close(lw_mpsc *q) {
	if (!q)
		return;
	if (!q->producer && !q->closed) {
		_Atomic uint32_t *words[2] = {q->not_empty, q->not_full};
		for (int i = 0; i < 2; i++)
			if (atomic_fetch_or(words[i], LW_RING_CLOSED) & LW_RING_SLEEPING)
				mpsc_wake(q, words[i], INT32_MAX);
	}
	lw_mpsc_detach(q);
}

void lw_mpsc_free(lw_mpsc *q) {
	lw_mpsc_detach(q);
	free(q);
}
