//go:build ignore

/*
 * regionabi.c: docs/abi.md in code: CRC-32C, the kind registry (size, alignment, owner
 * words), names, and the header and table parser with its check order
 * (magic, version, size, checksum), each check its own error code.
 *
 * Go twin: shm/regionabi.go.
 */
#include "internal.h"

/* ---- CRC-32C (Castagnoli), as Go's hash/crc32 computes it ---- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
}

/* crc_update is crc32.Update(crc, castagnoli, p). */
static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n) {
	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static const kind_info *kind_of(uint32_t kind) {
	/* queueOwnerWords: 64 ticket records of 8 bytes from offset 128;
	 * rwOwnerWords: those and 1024 reader-slot stamps from offset 8896. */
	static const kind_info kinds[] = {
		[LW_KIND_MUTEX] = {64, 64, 1, 0, 0, 0, 0, 0},
		[LW_KIND_BYTES] = {0, 64, 0, 0, 0, 0, 0, 0},
		[LW_KIND_TICKET_MUTEX] = {640, 64, 64, 128, 8, 0, 0, 0},
		[LW_KIND_RWMUTEX_V1] = {704, 64, 64, 128, 8, 0, 0, 0},
		[LW_KIND_COND] = {64, 64, 0, 0, 0, 0, 0, 0},
		[LW_KIND_RING] = {0, 128, 2, 0, 4, 0, 0, 0},
		[LW_KIND_SEQLOCK] = {0, 64, 1, 0, 0, 0, 0, 0},
		[LW_KIND_RWMUTEX] = {12992, 64, 64, 128, 8, 1024, 8896, 4},
		[LW_KIND_VALUE] = {0, 64, 0, 0, 0, 0, 0, 0},
		[LW_KIND_SEMAPHORE] = {LW_SEM_OBJ_SIZE, 64, 1, 0, 0, LW_PROC_SLOTS, LW_SEM_SLOTS + LW_SEM_SLOT_TOKEN, LW_SEM_SLOT_SIZE},
		[LW_KIND_MPSC] = {0, LW_MPSC_ALIGN, 1, 0, 0, 0, 0, 0},
	};
	if (kind == 0 || kind >= sizeof kinds / sizeof kinds[0])
		return NULL;
	return &kinds[kind];
}

static uint32_t header_checksum(const unsigned char *hdr, uint32_t count) {
	uint32_t c = crc_update(0, hdr + LW_HDR_CHECKED, LW_HDR_CHECKED_END - LW_HDR_CHECKED);
	unsigned char n[4];
	memcpy(n, &count, 4);
	c = crc_update(c, n, 4);
	uint32_t used = count < LW_TABLE_CAP ? count : LW_TABLE_CAP;
	return crc_update(c, hdr + LW_TABLE_OFFSET, (size_t)used * LW_TABLE_ENTRY_SIZE);
}

static uint64_t count_checksum_word(uint32_t count, uint32_t sum) {
	unsigned char b[8];
	memcpy(b + (LW_HDR_OBJECT_COUNT - LW_HDR_COUNT_CHECKSUM), &count, 4);
	memcpy(b + (LW_HDR_CHECKSUM - LW_HDR_COUNT_CHECKSUM), &sum, 4);
	return get64(b, 0);
}

/* utf8_decode decodes one rune of s[0:n] as Go's utf8.DecodeRune does:
 * *size is 1 and the rune -1 for an invalid sequence. */
static int32_t utf8_decode(const unsigned char *s, size_t n, size_t *size) {
	unsigned char c = s[0];
	*size = 1;
	if (c < 0x80)
		return c;
	int need;
	int32_t r, min;
	if (c >= 0xC2 && c <= 0xDF)
		need = 1, r = c & 0x1F, min = 0x80;
	else if (c >= 0xE0 && c <= 0xEF)
		need = 2, r = c & 0x0F, min = 0x800;
	else if (c >= 0xF0 && c <= 0xF4)
		need = 3, r = c & 0x07, min = 0x10000;
	else
		return -1;
	if ((size_t)need >= n)
		return -1;
	for (int i = 1; i <= need; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return -1;
		r = r << 6 | (s[i] & 0x3F);
	}
	if (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))
		return -1;
	*size = (size_t)need + 1;
	return r;
}

/* check_name is checkObjectName: 1 to 48 bytes of UTF-8 without control
 * characters (C0, DEL, C1: Go's unicode.IsControl). */
static int check_name(const char *name, size_t n) {
	if (n == 0 || n > LW_ENTRY_NAME_MAX)
		return LW_EOBJNAME;
	const unsigned char *s = (const unsigned char *)name;
	for (size_t i = 0; i < n;) {
		size_t sz;
		int32_t r = utf8_decode(s + i, n - i, &sz);
		if (r < 0 || r < 0x20 || (r >= 0x7F && r <= 0x9F))
			return LW_EOBJNAME;
		i += sz;
	}
	return 0;
}

static int parse_entry(const unsigned char *e, uint64_t arena_end, lw_obj *o) {
	const unsigned char *raw = e + LW_ENTRY_NAME;
	const unsigned char *nul = memchr(raw, 0, LW_ENTRY_NAME_MAX);
	size_t n = nul ? (size_t)(nul - raw) : LW_ENTRY_NAME_MAX;
	memcpy(o->name, raw, n);
	o->name[n] = 0;
	uint32_t raw_kind = get32(e, LW_ENTRY_KIND), param = raw_kind >> LW_ENTRY_KIND_PARAM_SHIFT;
	o->kind = raw_kind & LW_ENTRY_KIND_MASK;
	o->size = get32(e, LW_ENTRY_SIZE);
	o->offset = get64(e, LW_ENTRY_OFFSET);
	int err = check_name(o->name, n);
	if (err)
		return err;
	for (size_t i = n; i < LW_ENTRY_NAME_MAX; i++)
		if (raw[i] != 0)
			return LW_EOBJNAME; /* not NUL-padded */
	const kind_info *k = kind_of(o->kind);
	if (!k)
		return LW_EOBJKIND;
	/* checkKindParam: a value's alignment, a power of two up to its
	 * object's; no other kind has a parameter. */
	if (o->kind == LW_KIND_VALUE ? param == 0 || (param & (param - 1)) != 0 || param > k->align : param != 0)
		return LW_EOBJKIND;
	if ((k->size != 0 && o->size != k->size) || o->size == 0 || o->offset < LW_ARENA_OFFSET || o->offset > arena_end ||
	    (uint64_t)o->size > arena_end - o->offset)
		return LW_EOBJBOUNDS;
	if (o->offset % k->align != 0)
		return LW_EOBJALIGN;
	return 0;
}

static int cmp_offset(const void *a, const void *b) {
	const lw_obj *x = *(const lw_obj *const *)a, *y = *(const lw_obj *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* parse_header is parseRegionHeader over a private copy of the first
 * LW_ARENA_OFFSET bytes (zero past the end of a shorter file). */
static int parse_header(const unsigned char *hdr, int64_t file_size, lw_hdr *h) {
	uint64_t magic = get64(hdr, LW_HDR_MAGIC);
	if (magic == 0)
		return LW_ENOTINIT;
	if (magic != LW_REGION_MAGIC)
		return LW_EBADMAGIC;
	if (get32(hdr, LW_HDR_VERSION) != LW_REGION_VERSION)
		return LW_EBADVERSION;
	if (get32(hdr, LW_HDR_HEADER_SIZE) != LW_ARENA_OFFSET || get32(hdr, LW_HDR_TABLE_CAP) != LW_TABLE_CAP ||
	    get32(hdr, LW_HDR_PROC_SLOTS) != LW_PROC_SLOTS)
		return LW_EBADVERSION;
	uint64_t size = get64(hdr, LW_HDR_SIZE);
	if (file_size < LW_MIN_REGION_SIZE || size != (uint64_t)file_size)
		return LW_EBADSIZE;
	uint32_t count = get32(hdr, LW_HDR_OBJECT_COUNT);
	if (get32(hdr, LW_HDR_CHECKSUM) != header_checksum(hdr, count))
		return LW_EBADCHECKSUM;
	h->size = size;
	h->arena_used = LW_ARENA_OFFSET;
	h->count = 0;
	if (count > LW_TABLE_CAP)
		return LW_EOBJBOUNDS;
	for (uint32_t i = 0; i < count; i++) {
		lw_obj *o = &h->objs[i];
		int err = parse_entry(hdr + LW_TABLE_OFFSET + (size_t)i * LW_TABLE_ENTRY_SIZE, size, o);
		if (err)
			return err;
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(h->objs[j].name, o->name) == 0)
				return LW_EOBJNAME; /* appears twice */
		h->count = i + 1;
		if (o->offset + o->size > h->arena_used)
			h->arena_used = o->offset + o->size;
	}
	/* No two objects may share a byte. */
	const lw_obj *sorted[LW_TABLE_CAP];
	for (uint32_t i = 0; i < count; i++)
		sorted[i] = &h->objs[i];
	qsort(sorted, count, sizeof sorted[0], cmp_offset);
	for (uint32_t i = 1; i < count; i++)
		if (sorted[i - 1]->offset + sorted[i - 1]->size > sorted[i]->offset)
			return LW_EOBJBOUNDS;
	return 0;
}
