//go:build ignore

/*
 * sharedring.c: The shared byte ring: one producer and one consumer process, records of
 * a header and a padded message, the index protocol, the futex words each
 * side sleeps on, close and a dead peer.
 *
 * Go twin: shm/ring.go, shm/ringends.go, internal/ringindex.
 */
#include "internal.h"

/* ---- Shared byte ring (sharedring.go, ringindex.go) ---- */

enum { ring_spin_iterations = 10, ring_yield_rounds = 4, ring_spin_first = 16, ring_spin_pause = 64 };

struct lw_ring {
	lw_region *r;
	bool producer;
	unsigned char *data; /* capacity bytes of records */
	uint64_t capacity, mask, max_msg;
	_Atomic uint32_t *role, *peer_role;
	_Atomic uint64_t *tail, *head;
	_Atomic uint32_t *not_empty, *not_full;
	_Atomic uint64_t *sleeps, *wakes;
	_Atomic uint64_t *messages; /* our side's message count (inspection only) */
	uint32_t token;
	int err; /* sticky: corrupt, or closed/detached */
	int64_t last_check;
	uint32_t dead_peer;
	uint64_t index, cache; /* producer: tail, headCache; consumer: head, tailCache */
};

static void wake_side(lw_ring *q, _Atomic uint32_t *word) {
	/* Clear first; of two wakers only one wakes. */
	if (atomic_fetch_and(word, ~LW_RING_SLEEPING) & LW_RING_SLEEPING) {
		atomic_fetch_add(q->wakes, 1);
		futex_wake(word, 1, true);
	}
}

static void close_words(lw_ring *q) {
	_Atomic uint32_t *words[2] = {q->not_empty, q->not_full};
	for (int i = 0; i < 2; i++)
		if (atomic_fetch_or(words[i], LW_RING_CLOSED) & LW_RING_SLEEPING)
			wake_side(q, words[i]);
}

static int ring_corrupt(lw_ring *q) {
	q->err = LW_ERINGCORRUPT;
	return q->err;
}

/* peer_dead is peerDead: LW_EPEERDEAD if the other role's process died. */
static int peer_dead(lw_ring *q) {
	uint32_t tok = atomic_load(q->peer_role) & LW_OWNER_MASK;
	if (tok == 0)
		return 0;
	uint32_t pid;
	if (token_alive(q->r, tok, &pid))
		return 0;
	q->dead_peer = tok;
	return LW_EPEERDEAD;
}

/* ring_sleep is sharedRingSleeper.sleep: one bounded slice. */
static int ring_sleep(lw_ring *q, _Atomic uint32_t *word, int64_t deadline) {
	if (deadline >= 0 && mono_ns() >= deadline)
		return LW_ETIMEDOUT;
	uint32_t tok = atomic_load(q->peer_role) & LW_OWNER_MASK;
	if (tok != 0 && tok == q->dead_peer)
		return LW_EPEERDEAD;
	if (q->last_check == 0 || mono_ns() - q->last_check >= LW_OWNER_CHECK_INTERVAL_NS) {
		q->last_check = mono_ns();
		int err = peer_dead(q);
		if (err)
			return err;
	}
	futex_wait(word, LW_RING_SLEEPING, slice_until(deadline, LW_OWNER_CHECK_INTERVAL_NS), true);
	return 0;
}

/* ring_await is ringAwait: spin, yield, then announce the sleep, look
 * again, and sleep on word. */
static int ring_await(lw_ring *q, _Atomic uint32_t *word, bool closed_first, int64_t deadline, bool (*ready)(lw_ring *, uint64_t), uint64_t need) {
	uint32_t backoff = ring_spin_first;
	for (int i = 0; i < ring_spin_iterations + ring_yield_rounds; i++) {
		bool closed = atomic_load(word) & LW_RING_CLOSED;
		if (closed && closed_first)
			return LW_ERINGCLOSED;
		if (ready(q, need))
			return 0;
		if (closed)
			return LW_ERINGCLOSED;
		if (i < ring_spin_iterations) {
			cpu_pause(backoff);
			backoff = backoff * 2 < ring_spin_pause ? backoff * 2 : ring_spin_pause;
		} else {
			sched_yield();
		}
	}
	for (;;) {
		uint32_t old = atomic_fetch_or(word, LW_RING_SLEEPING);
		if ((old & LW_RING_CLOSED) && closed_first) {
			atomic_fetch_and(word, ~LW_RING_SLEEPING);
			return LW_ERINGCLOSED;
		}
		if (ready(q, need)) {
			atomic_fetch_and(word, ~LW_RING_SLEEPING);
			return 0;
		}
		if (old & LW_RING_CLOSED) {
			atomic_fetch_and(word, ~LW_RING_SLEEPING);
			return LW_ERINGCLOSED;
		}
		atomic_fetch_add(q->sleeps, 1);
		int err = ring_sleep(q, word, deadline);
		if (err) {
			atomic_fetch_and(word, ~LW_RING_SLEEPING);
			return err;
		}
	}
}

/* reopen_if_over is reopenIfOver: a closed ring whose stream is over
 * (head = tail, neither role held by a live process) is opened again,
 * before this side claims its role; dead roles of the old stream are
 * cleared, so that the new stream does not report them as dead peers. */
static void reopen_if_over(lw_ring *q) {
	if (!((atomic_load(q->not_empty) | atomic_load(q->not_full)) & LW_RING_CLOSED) || atomic_load(q->head) != atomic_load(q->tail))
		return;
	_Atomic uint32_t *roles[2] = {q->role, q->peer_role};
	uint32_t dead[2] = {0, 0};
	for (int i = 0; i < 2; i++) {
		uint32_t w = atomic_load(roles[i]), pid;
		if (w != 0) {
			if (token_alive(q->r, w & LW_OWNER_MASK, &pid))
				return;
			dead[i] = w;
		}
	}
	for (int i = 0; i < 2; i++) {
		uint32_t w = dead[i];
		if (w != 0)
			atomic_compare_exchange_strong(roles[i], &w, 0);
	}
	atomic_fetch_and(q->not_empty, ~LW_RING_CLOSED);
	atomic_fetch_and(q->not_full, ~LW_RING_CLOSED);
}

static int ring_attach(lw_region *r, const char *name, size_t capacity, bool producer, lw_ring **out) {
	if (!r || !name || !out)
		return LW_EINVAL;
	if (capacity < LW_RING_MIN_CAPACITY || capacity > LW_RING_MAX_CAPACITY || (capacity & (capacity - 1)) != 0)
		return LW_EOBJBOUNDS;
	unsigned char *obj;
	int err = sized_object(r, name, LW_KIND_RING, LW_RING_DATA + capacity, &obj);
	if (err)
		return err;
	lw_ring *q = calloc(1, sizeof *q);
	if (!q)
		return ENOMEM;
	q->r = r;
	q->producer = producer;
	q->data = obj + LW_RING_DATA;
	q->capacity = capacity;
	q->mask = capacity - 1;
	q->max_msg = capacity - LW_REC_HEADER_SIZE;
	q->role = w32(obj, producer ? LW_RING_PRODUCER_ROLE : LW_RING_CONSUMER_ROLE);
	q->peer_role = w32(obj, producer ? LW_RING_CONSUMER_ROLE : LW_RING_PRODUCER_ROLE);
	q->tail = w64(obj, LW_RING_TAIL);
	q->head = w64(obj, LW_RING_HEAD);
	q->not_empty = w32(obj, LW_RING_NOT_EMPTY);
	q->not_full = w32(obj, LW_RING_NOT_FULL);
	q->sleeps = w64(obj, producer ? LW_RING_PRODUCER_SLEEPS : LW_RING_CONSUMER_SLEEPS);
	q->wakes = w64(obj, producer ? LW_RING_PRODUCER_WAKES : LW_RING_CONSUMER_WAKES);
	q->messages = w64(obj, producer ? LW_RING_MESSAGES_SENT : LW_RING_MESSAGES_RECEIVED);
	q->token = r->token;
	reopen_if_over(q);
	/* claim: free, or held by a process that has died. */
	bool claimed = false;
	for (int i = 0; i < retry_limit && !claimed; i++) { /* a CAS fails only if another claimant moved it */
		uint32_t w = atomic_load(q->role);
		if (w == 0) {
			claimed = atomic_compare_exchange_strong(q->role, &w, q->token);
			continue;
		}
		uint32_t pid;
		if (token_alive(r, w & LW_OWNER_MASK, &pid)) {
			free(q);
			return LW_ERINGBUSY;
		}
		claimed = atomic_compare_exchange_strong(q->role, &w, q->token);
	}
	if (!claimed) {
		free(q);
		return LW_ERINGCORRUPT; /* the role word keeps changing */
	}
	/* checkIndices: both multiples of 8, tail at most capacity ahead. */
	uint64_t h = atomic_load(q->head), t = atomic_load(q->tail);
	if (h % LW_REC_HEADER_SIZE != 0 || t % LW_REC_HEADER_SIZE != 0 || t - h > q->capacity) {
		uint32_t mine = q->token;
		atomic_compare_exchange_strong(q->role, &mine, 0);
		free(q);
		return LW_ERINGCORRUPT;
	}
	if (producer)
		q->index = t, q->cache = h;
	else
		q->index = h, q->cache = h;
	*out = q;
	return 0;
}

int lw_region_ring_producer(lw_region *r, const char *name, size_t capacity, lw_ring **out) {
	return ring_attach(r, name, capacity, true, out);
}

int lw_region_ring_consumer(lw_region *r, const char *name, size_t capacity, lw_ring **out) {
	return ring_attach(r, name, capacity, false, out);
}

size_t lw_ring_max_message(const lw_ring *q) { return q ? (size_t)q->max_msg : 0; }

/* refresh_head_need is refreshHead: validate the consumer's index. */
static bool refresh_head_need(lw_ring *q, uint64_t need) {
	uint64_t h = atomic_load(q->head);
	if (q->index - h > q->capacity || h % LW_REC_HEADER_SIZE != 0) {
		ring_corrupt(q);
		return false;
	}
	q->cache = h;
	return q->index - h <= q->capacity - need;
}

static bool room_ready(lw_ring *q, uint64_t need) { return refresh_head_need(q, need) || q->err != 0; }

static uint64_t record_size(uint64_t n) { return LW_REC_HEADER_SIZE + ((n + 7) & ~(uint64_t)7); }

/* try_send is trySend: 1 sent; 0 with *err set, or with *need the free
 * bytes to wait for (0: a padding record was published, call again). */
static int try_send(lw_ring *q, const void *msg, uint64_t n, uint64_t *need, int *err) {
	*err = q->err;
	if (*err)
		return 0;
	if (n > q->max_msg) {
		*err = LW_EMSGSIZE;
		return 0;
	}
	uint64_t rec = record_size(n);
	uint64_t t = q->index;
	uint64_t off = t & q->mask;
	uint64_t pad = 0;
	if (q->capacity - off < rec)
		pad = q->capacity - off;
	*need = pad + rec;
	if (*need > q->capacity)
		*need = pad; /* the padding alone now; the record at 0 next */
	if (t - q->cache > q->capacity - *need && !refresh_head_need(q, *need)) {
		*err = q->err;
		return 0;
	}
	if (atomic_load(q->not_empty) & LW_RING_CLOSED) {
		*err = LW_ERINGCLOSED;
		return 0;
	}
	unsigned char *d = q->data;
	if (pad > 0) {
		put32(d, off + LW_REC_LENGTH, (uint32_t)(pad - LW_REC_HEADER_SIZE));
		put32(d, off + LW_REC_TYPE, LW_REC_PADDING);
	}
	bool sent = *need > pad;
	if (sent) {
		uint64_t o = (t + pad) & q->mask;
		if (n > 0) /* msg may be NULL then: memcpy's arguments must not be */
			memcpy(d + o + LW_REC_HEADER_SIZE, msg, n);
		put32(d, o + LW_REC_LENGTH, (uint32_t)n);
		put32(d, o + LW_REC_TYPE, LW_REC_MESSAGE);
	}
	/* Publish with a swap (ordered before the load of the wake word: the
	 * store-then-load half of the Dekker pair), as publishIndex does. */
	q->index = t + *need;
	atomic_exchange(q->tail, q->index);
	if (sent) /* only this side writes the count: a load and a store */
		atomic_store(q->messages, atomic_load(q->messages) + 1);
	if (atomic_load(q->not_empty) & LW_RING_SLEEPING)
		wake_side(q, q->not_empty);
	if (!sent)
		*need = 0;
	return sent;
}

int lw_ring_send(lw_ring *q, const void *msg, size_t len, int64_t timeout_ns) {
	if (!q || (!msg && len > 0) || !q->producer)
		return LW_EINVAL;
	int64_t deadline = deadline_of(timeout_ns);
	for (;;) {
		uint64_t need = 0;
		int err;
		if (try_send(q, msg, len, &need, &err))
			return 0;
		if (err)
			return err;
		if (need == 0)
			continue;
		atomic_fetch_add(&q->r->waiting, 1);
		err = ring_await(q, q->not_full, true, deadline, room_ready, need);
		atomic_fetch_sub(&q->r->waiting, 1);
		if (err)
			return err;
		if (q->err)
			return q->err;
	}
}

/* refresh_tail is refreshTail: validate the producer's index. */
static bool refresh_tail(lw_ring *q) {
	uint64_t t = atomic_load(q->tail);
	if (t - q->index > q->capacity || t % LW_REC_HEADER_SIZE != 0) {
		ring_corrupt(q);
		return false;
	}
	q->cache = t;
	return t != q->index;
}

static bool items_ready(lw_ring *q, uint64_t unused) {
	(void)unused;
	return refresh_tail(q) || q->err != 0;
}

static void release_to(lw_ring *q, uint64_t h) {
	q->index = h;
	atomic_exchange(q->head, h);
	if (atomic_load(q->not_full) & LW_RING_SLEEPING)
		wake_side(q, q->not_full);
}

/* try_receive is tryReceive: every header is read once into locals and
 * checked against the handle's own geometry before a payload byte is
 * touched. 1: a message; 0: none (or *err). */
static int try_receive(lw_ring *q, unsigned char *buf, size_t bufsize, size_t *len, int *err) {
	*err = q->err;
	if (*err)
		return 0;
	for (;;) {
		uint64_t h = q->index;
		if (h == q->cache && !refresh_tail(q)) {
			*err = q->err;
			return 0;
		}
		uint64_t avail = q->cache - h;
		uint64_t off = h & q->mask;
		uint64_t room = q->capacity - off;
		unsigned char *d = q->data;
		uint64_t length = atomic_load_explicit(w32(d, off + LW_REC_LENGTH), memory_order_relaxed);
		uint32_t typ = atomic_load_explicit(w32(d, off + LW_REC_TYPE), memory_order_relaxed);
		if (typ == LW_REC_PADDING) {
			if (off == 0 || LW_REC_HEADER_SIZE + length != room || room > avail) {
				*err = ring_corrupt(q);
				return 0;
			}
			release_to(q, h + room);
			continue;
		}
		if (typ != LW_REC_MESSAGE) {
			*err = ring_corrupt(q);
			return 0;
		}
		uint64_t size = record_size(length);
		if (length > q->max_msg || size > room || size > avail) {
			*err = ring_corrupt(q);
			return 0;
		}
		*len = (size_t)length;
		if (length > bufsize) {
			*err = LW_EMSGSIZE;
			return 0;
		}
		if (length > 0) /* buf may be NULL then, as in try_send */
			memcpy(buf, d + off + LW_REC_HEADER_SIZE, (size_t)length);
		release_to(q, h + size);
		atomic_store(q->messages, atomic_load(q->messages) + 1); /* as in try_send */
		return 1;
	}
}

int lw_ring_receive(lw_ring *q, void *buf, size_t bufsize, size_t *len, int64_t timeout_ns) {
	if (!q || (!buf && bufsize > 0) || !len || q->producer)
		return LW_EINVAL;
	int64_t deadline = deadline_of(timeout_ns);
	for (;;) {
		int err;
		if (try_receive(q, buf, bufsize, len, &err))
			return 0;
		if (err)
			return err;
		atomic_fetch_add(&q->r->waiting, 1);
		err = ring_await(q, q->not_empty, false, deadline, items_ready, 0);
		atomic_fetch_sub(&q->r->waiting, 1);
		if (err == LW_EPEERDEAD && (refresh_tail(q) || q->err))
			continue; /* published before it died: drain first */
		if (err)
			return err;
	}
}

static void ring_release(lw_ring *q) {
	if (q->err == 0)
		q->err = LW_ERINGCLOSED;
	uint32_t mine = q->token;
	atomic_compare_exchange_strong(q->role, &mine, 0);
}

void lw_ring_close(lw_ring *q) {
	if (!q)
		return;
	close_words(q);
	ring_release(q);
}

void lw_ring_detach(lw_ring *q) {
	if (q)
		ring_release(q);
}

void lw_ring_free(lw_ring *q) {
	if (!q)
		return;
	ring_release(q);
	free(q);
}
