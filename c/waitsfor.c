//go:build ignore

/*
 * waitsfor.c: the waits-for records: one 16-bit record per process slot in
 * the header's reserved bytes (slot s at hdr_waits_for + 2s), naming
 * the lock that the slot's process sleeps waiting for, so that `lockword
 * inspect` can find deadlock cycles across processes (see docs/abi.md,
 * "Waits-for records"). Bits 0-7: 1 + the lock's object table index (0:
 * none); bits 8-15: a sequence advanced by every set. A record shares an
 * aligned 32-bit word with its neighbour slot's (another process), so it
 * is changed by CAS on that word, retried when only the other half moved.
 *
 * Go twin: shm/waitsfor.go.
 */
#include "internal.h"

enum { waits_for_obj_mask = 0xff, waits_for_seq_shift = 8 };

static _Atomic uint32_t *waits_for_word(lw_region *r, uint32_t slot, uint32_t *shift) {
	*shift = (slot & 1) * 16;
	return w32(r->data, hdr_waits_for + (uint64_t)(slot & ~1u) * 2);
}

static uint16_t waits_for_record(lw_region *r, uint32_t slot) {
	uint32_t shift;
	_Atomic uint32_t *w = waits_for_word(r, slot, &shift); /* sets shift first: the order matters */
	return (uint16_t)(atomic_load(w) >> shift);
}

/* swap_waits_for changes slot's record from old to new; false if it is not
 * old (or a neighbour keeps rewriting its half: record nothing). */
static bool swap_waits_for(lw_region *r, uint32_t slot, uint16_t old, uint16_t new) {
	uint32_t shift;
	_Atomic uint32_t *w = waits_for_word(r, slot, &shift);
	for (int i = 0; i < retry_limit; i++) {
		uint32_t cur = atomic_load(w);
		if ((uint16_t)(cur >> shift) != old)
			return false;
		if (atomic_compare_exchange_strong(w, &cur, (cur & ~(0xffffu << shift)) | (uint32_t)new << shift))
			return true;
	}
	return false;
}

/* table_index1 is tableIndex1: 1 + the table index of the object at off,
 * 0 if none. Entries below the count never change. */
static uint32_t table_index1(lw_region *r, uint64_t off) {
	uint32_t n = atomic_load(w32(r->data, LW_HDR_OBJECT_COUNT));
	for (uint32_t i = 0; i < n && i < LW_TABLE_CAP; i++)
		if (atomic_load(w64(r->data, LW_TABLE_OFFSET + (uint64_t)i * LW_TABLE_ENTRY_SIZE + LW_ENTRY_OFFSET)) == off)
			return i + 1;
	return 0;
}

/* set_waits_for is setWaitsFor: record that our sleeping thread waits for
 * the object idx1 - 1, before its first futex wait. Returns the record for
 * clear_waits_for; 0 if none was set (another thread of ours holds it). */
static uint16_t set_waits_for(lw_region *r, uint32_t idx1) {
	if (idx1 == 0 || idx1 > waits_for_obj_mask)
		return 0;
	uint16_t old = waits_for_record(r, r->slot);
	if (old & waits_for_obj_mask)
		return 0;
	uint16_t rec = (uint16_t)(((old >> waits_for_seq_shift) + 1) << waits_for_seq_shift | idx1);
	return swap_waits_for(r, r->slot, old, rec) ? rec : 0;
}

/* clear_waits_for is clearWaitsFor: the wait recorded as rec has ended
 * (holding or not); the sequence stays. */
static void clear_waits_for(lw_region *r, uint16_t rec) {
#ifdef LW_TEST_BROKEN_WAITS_FOR
	return; /* tests: a record never cleared must make the false cycle they catch */
#endif
	if (rec)
		swap_waits_for(r, r->slot, rec, rec & ~waits_for_obj_mask);
}

/* reset_waits_for clears slot's record, whatever it holds: attach (before
 * publishing the slot live) and close, under the exclusive flock. */
static void reset_waits_for(lw_region *r, uint32_t slot) {
	for (;;) {
		uint16_t old = waits_for_record(r, slot);
		if (old == 0 || swap_waits_for(r, slot, old, 0))
			return;
	}
}
