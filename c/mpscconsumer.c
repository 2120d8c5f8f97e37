//go:build ignore

/*
 * mpscconsumer.c: the MPSC queue's one consumer (kind 11; mpscqueue.c
 * holds the object, the claim word and the producers): receive reads the
 * record at head, skips a dead producer's claimed record (counted lost)
 * or takes back a dead claimer's claim word, copies the payload out after
 * its header was checked, and moves head past it, waking producers that
 * wait for room. The validation contract is mpscqueue.c's: every word is
 * checked before it is used, so a corrupt queue is LW_ECORRUPT.
 *
 * Go twin: shm/mpscconsumer.go.
 */

#include "internal.h"

/* blocked reports whether a liveness check of what we wait on at
 * position at is due (a new position restarts the interval). */
static bool mpsc_blocked_due(lw_mpsc *q, uint64_t at) {
	if (q->blk_at != at) {
		q->blk_at = at;
		q->blk_next = 0;
	}
	return mpsc_due(&q->blk_next);
}

/* mpsc_refresh_end is refreshEnd: read the claim word; true if a record lies
 * at head. A claim word held by a dead claimer is taken back. */
static bool mpsc_refresh_end(lw_mpsc *q) {
	/* Head and role words are ours alone while we consume. */
	if (atomic_load(q->head) != q->head_c || atomic_load(q->role) != q->token) {
		mpsc_corrupt(q);
		return false;
	}
	uint64_t w = atomic_load(q->tail);
	if (!mpsc_claim_end(q, w, q->head_c, &q->end))
		return false;
	if (q->end != q->head_c || !(w & MPSC_CLAIMING))
		return q->end != q->head_c;
	if (mpsc_blocked_due(q, q->end + 1) && mpsc_claimer_dead(q, (uint32_t)(w & LW_OWNER_MASK))) {
		mpsc_take_back(q, w);
		return mpsc_claim_end(q, atomic_load(q->tail), q->head_c, &q->end) && q->end != q->head_c;
	}
	return false;
}

static void mpsc_release_to(lw_mpsc *q, uint64_t h) {
	q->head_c = h;
	atomic_exchange(q->head, h); /* our reads of the record happen before a producer reuses it */
	mpsc_wake(q, q->not_full, INT32_MAX);
}

/* mpsc_try_receive is tryReceive: 1 a message; 0 none (or *err). Each header
 * is read once into locals and checked before a payload byte is read. */
static int mpsc_try_receive(lw_mpsc *q, unsigned char *buf, size_t bufsize, size_t *len, int *err) {
	while ((*err = q->err) == 0) {
		uint64_t h = q->head_c;
		if (h == q->end && !mpsc_refresh_end(q)) {
			*err = q->err;
			return 0;
		}
		uint64_t off = h & q->mask, room = q->capacity - off, avail = q->end - h;
		uint64_t st = atomic_load(mpsc_rec_state(q, off));
		uint32_t tok = (uint32_t)(st & LW_OWNER_MASK);
		uint64_t length = st >> MPSC_LEN_SHIFT, size = mpsc_size(length & 0xFFFFFFFF);
		if (atomic_load(mpsc_rec_pos(q, off)) != h || !valid_token(tok))
			break;
		switch (st >> MPSC_ST_SHIFT & 0xF) {
		case mpsc_padding:
			if (off == 0 || mpsc_hdr + length != room || room > avail)
				return *err = mpsc_corrupt(q), 0;
			mpsc_release_to(q, h + room);
			continue;
		case mpsc_claimed:
		case mpsc_published:
			if (length > q->max_msg || size > room || size > avail)
				return *err = mpsc_corrupt(q), 0;
			break;
		default:
			return *err = mpsc_corrupt(q), 0;
		}
		if ((st >> MPSC_ST_SHIFT & 3) == mpsc_claimed) {
			if (!mpsc_blocked_due(q, h))
				return 0;
			if (q->stop_at == 4 && !(q->stop_at = 0))
				raise(SIGSTOP); /* between the state word's read and the liveness check */
			if (!mpsc_claimer_dead(q, tok))
				return 0;
			/* Point d: it may have published, then died, since our read. */
			if (atomic_load(mpsc_rec_state(q, off)) != st)
				continue;
			if (!mpsc_counts_ok(0, 0, atomic_load(q->received), atomic_load(q->lost) + 1, h + size, 0))
				return *err = mpsc_corrupt(q), 0;
			mpsc_release_to(q, h + size); /* counted after head passes it */
			atomic_fetch_add(q->lost, 1);
			continue;
		}
		*len = (size_t)length;
		uint64_t got = atomic_load(q->received) + 1; /* only the consumer writes it */
		if (!mpsc_counts_ok(0, 0, got, atomic_load(q->lost), h + size, 0))
			return *err = mpsc_corrupt(q), 0;
		if (length > bufsize)
			return *err = LW_EMSGSIZE, 0;
		if (length > 0)
			memcpy(buf, q->data + off + mpsc_hdr, (size_t)length);
		mpsc_release_to(q, h + size);
		atomic_store(q->received, got);
		return 1;
	}
	if (*err == 0)
		*err = mpsc_corrupt(q);
	return 0;
}

static bool mpsc_record_ready(lw_mpsc *q, uint64_t unused) {
	(void)unused;
	if (!mpsc_wake_ok(q, atomic_load(q->not_empty)) || q->err || (q->head_c == q->end && !mpsc_refresh_end(q)))
		return q->err != 0;
	uint64_t st = atomic_load(mpsc_rec_state(q, q->head_c & q->mask));
	/* A claimed record: ready once its claimer's check is due, to ask. */
	return (st >> MPSC_ST_SHIFT & 3) != mpsc_claimed || (q->blk_at == q->head_c && mono_ns() >= q->blk_next);
}

static int mpsc_receive(lw_mpsc *q, void *buf, size_t bufsize, size_t *len, int64_t deadline) {
	if (!q || (!buf && bufsize > 0) || !len || q->producer)
		return LW_EINVAL;
	for (;;) {
		int err;
		if (mpsc_try_receive(q, buf, bufsize, len, &err))
			return 0;
		if (err)
			return err;
		if (deadline == -2)
			return LW_EBUSY;
		atomic_fetch_add(&q->r->waiting, 1);
		err = mpsc_await(q, q->not_empty, deadline, mpsc_record_ready, 0);
		atomic_fetch_sub(&q->r->waiting, 1);
		if (err)
			return err;
	}
}

int lw_mpsc_receive(lw_mpsc *q, void *buf, size_t bufsize, size_t *len, int64_t timeout_ns) {
	return mpsc_receive(q, buf, bufsize, len, deadline_of(timeout_ns));
}

int lw_mpsc_try_receive(lw_mpsc *q, void *buf, size_t bufsize, size_t *len) {
	return mpsc_receive(q, buf, bufsize, len, -2);
}
