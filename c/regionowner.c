//go:build ignore

/*
 * regionowner.c: Owner tokens (slot << generation bits | generation) and the process
 * table: attach, liveness of a token, generations that a lock word still
 * names are never reissued, the PID namespace record.
 *
 * Go twin: shm/regionowner.go.
 */
#include "internal.h"

static unsigned char *slot_at(lw_region *r, uint32_t slot) {
	return r->data + LW_PROC_OFFSET + (size_t)slot * LW_PROC_SLOT_SIZE;
}

static inline uint32_t make_token(uint32_t slot, uint32_t gen) { return slot << LW_OWNER_GEN_BITS | gen; }
static inline uint32_t token_slot(uint32_t t) { return t >> LW_OWNER_GEN_BITS & ((1u << LW_OWNER_SLOT_BITS) - 1); }
static inline uint32_t token_gen(uint32_t t) { return t & LW_PROC_GEN_MASK; }

/* token_alive is tokenAlive: whether the process owning token lives, and
 * its PID (0 when the slot no longer carries the token's incarnation). */
static bool token_alive(lw_region *r, uint32_t token, uint32_t *pid) {
	if (token == r->token) {
		*pid = r->me.pid;
		return true;
	}
	unsigned char *sw = slot_at(r, token_slot(token));
	_Atomic uint32_t *state = w32(sw, LW_PROC_STATE);
	uint32_t st = atomic_load(state);
	lw_ident id = {.pid = atomic_load(w32(sw, LW_PROC_PID)), .start = atomic_load(w64(sw, LW_PROC_START)), .pidns = r->pidns};
	uint64_t b0 = atomic_load(w64(sw, LW_PROC_BOOT)), b1 = atomic_load(w64(sw, LW_PROC_BOOT + 8));
	memcpy(id.boot, &b0, 8);
	memcpy(id.boot + 8, &b1, 8);
	if (st != (LW_PROC_LIVE | token_gen(token)) || atomic_load(state) != st) {
		*pid = 0;
		return false;
	}
	*pid = id.pid;
	return process_alive(&r->me, &id);
}

/* token_named reports whether an owner word of objs names token now
 * (namedTokens, asked one token at a time). */
static bool token_named(lw_region *r, const lw_obj *objs, uint32_t n, uint32_t token) {
	for (uint32_t i = 0; i < n; i++) {
		const kind_info *k = kind_of(objs[i].kind);
		for (int j = 0; j < k->nowner; j++) {
			uint64_t off = objs[i].offset + k->owner0 + (uint64_t)j * k->stride;
			if ((atomic_load(w32(r->data, off)) & LW_OWNER_MASK) == token)
				return true;
		}
		for (int j = 0; j < k->nowner2; j++) {
			uint64_t off = objs[i].offset + k->owner2 + (uint64_t)j * k->stride2;
			if ((atomic_load(w32(r->data, off)) & LW_OWNER_MASK) == token)
				return true;
		}
	}
	return false;
}

static bool attached_this_boot(lw_region *r, const unsigned char boot[16]) {
	uint64_t b0, b1;
	memcpy(&b0, boot, 8);
	memcpy(&b1, boot + 8, 8);
	for (uint32_t s = 0; s < LW_PROC_SLOTS; s++) {
		unsigned char *sw = slot_at(r, s);
		if ((atomic_load(w32(sw, LW_PROC_STATE)) & LW_PROC_LIVE) && atomic_load(w64(sw, LW_PROC_BOOT)) == b0 &&
		    atomic_load(w64(sw, LW_PROC_BOOT + 8)) == b1)
			return true;
	}
	return false;
}

/* check_pid_namespace is checkPIDNamespace (bind: attach). */
static int check_pid_namespace(lw_region *r, bool bind) {
	_Atomic uint64_t *rec = w64(r->data, LW_HDR_PID_NAMESPACE);
	uint64_t ns = atomic_load(rec);
	if (ns != r->me.pidns && !attached_this_boot(r, r->me.boot)) {
		if (bind)
			atomic_store(rec, r->me.pidns);
		ns = r->me.pidns;
	}
	if (ns != 0 && r->me.pidns != 0 && ns != r->me.pidns)
		return LW_EFOREIGNPIDNS;
	r->pidns = ns;
	return 0;
}

/* attach is (*Region).attach, under the exclusive flock. */
static int attach(lw_region *r, const lw_obj *objs, uint32_t n) {
	int err = check_pid_namespace(r, true);
	if (err)
		return err;
	uint32_t hint = atomic_load(w32(r->data, LW_HDR_SLOT_HINT)) % LW_PROC_SLOTS;
	uint32_t slot = 0;
	bool found = false;
	for (uint32_t i = 0; i < LW_PROC_SLOTS && !found; i++) {
		uint32_t s = (hint + i) % LW_PROC_SLOTS;
		if (!(atomic_load(w32(slot_at(r, s), LW_PROC_STATE)) & LW_PROC_LIVE))
			slot = s, found = true;
	}
	/* Then a dead process's slot, one that no lock word names first. */
	for (int pass = 0; pass < 2 && !found; pass++) {
		for (uint32_t i = 0; i < LW_PROC_SLOTS; i++) {
			uint32_t s = (hint + i) % LW_PROC_SLOTS;
			uint32_t token = make_token(s, atomic_load(w32(slot_at(r, s), LW_PROC_STATE)) & LW_PROC_GEN_MASK);
			if (token_named(r, objs, n, token) != (pass == 1))
				continue;
			uint32_t pid;
			if (!token_alive(r, token, &pid)) {
				slot = s, found = true;
				break;
			}
		}
	}
	if (!found)
		return LW_ETOOMANYPROCS;
	unsigned char *sw = slot_at(r, slot);
	_Atomic uint32_t *state = w32(sw, LW_PROC_STATE);
	uint32_t gen = atomic_load(state) & LW_PROC_GEN_MASK;
	/* Not live while the identity changes. */
	atomic_store(state, gen);
	/* nextGen: skip 0, the all-ones value and any generation a lock word
	 * still names. */
	bool fresh = false;
	for (uint32_t i = 0; i < LW_OWNER_GEN_MAX && !fresh; i++) { /* every generation once */
		gen++;
		if (gen > LW_OWNER_GEN_MAX)
			gen = 1;
		fresh = !token_named(r, objs, n, make_token(slot, gen));
	}
	if (!fresh) /* owner words written to name every generation: not ours */
		gen = gen % LW_OWNER_GEN_MAX + 1;
	uint64_t b0, b1;
	memcpy(&b0, r->me.boot, 8);
	memcpy(&b1, r->me.boot + 8, 8);
	atomic_store(w32(sw, LW_PROC_PID), r->me.pid);
	atomic_store(w64(sw, LW_PROC_START), r->me.start);
	atomic_store(w64(sw, LW_PROC_BOOT), b0);
	atomic_store(w64(sw, LW_PROC_BOOT + 8), b1);
	/* A record left by the slot's previous process must not speak for us. */
	reset_waits_for(r, slot);
	/* Publish: from here on lock words may name (slot, gen). */
	atomic_store(state, LW_PROC_LIVE | gen);
	atomic_store(w32(r->data, LW_HDR_SLOT_HINT), (slot + 1) % LW_PROC_SLOTS);
	r->slot = slot;
	r->token = make_token(slot, gen);
	return 0;
}
