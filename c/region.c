//go:build ignore

/*
 * region.c: Objects: find or allocate a named object of a kind under the file lock,
 * and Bytes.
 *
 * Go twin: shm/region.go.
 */
#include "internal.h"

/* object is (*Region).object, the one allocator: the named object of kind,
 * created with size bytes if absent. r->mu must be held. */
static int object(lw_region *r, const char *name, uint32_t kind, uint32_t size, uint32_t *index) {
	size_t n = strnlen(name, LW_ENTRY_NAME_MAX + 1);
	int err = check_name(name, n);
	if (err)
		return err;
	for (uint32_t i = 0; i < r->nobj; i++) {
		if (strcmp(r->objs[i].name, name) == 0) {
			*index = i;
			return r->objs[i].kind == kind ? 0 : LW_EOBJKIND;
		}
	}
	if ((err = flock_until(r->fd, LOCK_EX, lock_deadline(r->lock_timeout_ns))) != 0)
		return err;
	unsigned char *hdr = malloc(LW_ARENA_OFFSET);
	lw_hdr *h = malloc(sizeof *h);
	if (!hdr || !h) {
		err = ENOMEM;
		goto out;
	}
	/* Re-read the table: other processes may have added objects. Look at
	 * the file's size first: a truncated file would fault (checkSize). */
	struct stat st;
	if (fstat(r->fd, &st) != 0) {
		err = errno;
		goto out;
	}
	if ((uint64_t)st.st_size < r->size) {
		err = LW_ETRUNCATED;
		goto out;
	}
	memcpy(hdr, r->data, LW_ARENA_OFFSET);
	if ((err = parse_header(hdr, (int64_t)r->size, h)) != 0)
		goto out;
	learn(r, h);
	for (uint32_t i = 0; i < r->nobj; i++) {
		if (strcmp(r->objs[i].name, name) == 0) {
			*index = i;
			err = r->objs[i].kind == kind ? 0 : LW_EOBJKIND;
			goto out;
		}
	}
	const kind_info *k = kind_of(kind);
	uint32_t count = h->count;
	uint64_t off = (h->arena_used + k->align - 1) / k->align * k->align;
	if (count == LW_TABLE_CAP || off + size > h->size || r->nobj == LW_TABLE_CAP) {
		err = LW_EREGIONFULL;
		goto out;
	}
	/* Write the entry past the count, where nobody reads, then commit
	 * count and checksum with one store. The object's bytes are zero. */
	unsigned char *e = r->data + LW_TABLE_OFFSET + (size_t)count * LW_TABLE_ENTRY_SIZE;
	memset(e, 0, LW_TABLE_ENTRY_SIZE);
	memcpy(e + LW_ENTRY_NAME, name, n);
	put32(e, LW_ENTRY_KIND, kind);
	put32(e, LW_ENTRY_SIZE, size);
	put64(e, LW_ENTRY_OFFSET, off);
	memcpy(hdr + LW_TABLE_OFFSET, r->data + LW_TABLE_OFFSET, LW_PROC_OFFSET - LW_TABLE_OFFSET);
	atomic_store(w64(r->data, LW_HDR_COUNT_CHECKSUM), count_checksum_word(count + 1, header_checksum(hdr, count + 1)));
	lw_obj *o = &r->objs[r->nobj];
	memcpy(o->name, name, n);
	o->name[n] = 0;
	o->kind = kind;
	o->size = size;
	o->offset = off;
	*index = r->nobj++;
out:
	flock_retry(r->fd, LOCK_UN);
	free(hdr);
	free(h);
	return err;
}

/* sized_object is object for the kinds whose size the caller chooses
 * (Bytes, rings, MPSC queues): it takes r->mu itself, and an existing
 * object of another size is LW_EOBJBOUNDS, as the Go callers check. On
 * success *obj is the object's first byte. */
static int sized_object(lw_region *r, const char *name, uint32_t kind, size_t size, unsigned char **obj) {
	pthread_mutex_lock(&r->mu);
	uint32_t i;
	int err = object(r, name, kind, (uint32_t)size, &i);
	if (err == 0 && r->objs[i].size != size)
		err = LW_EOBJBOUNDS;
	*obj = err ? NULL : r->data + r->objs[i].offset;
	pthread_mutex_unlock(&r->mu);
	return err;
}

int lw_region_bytes(lw_region *r, const char *name, size_t size, void **out) {
	if (!r || !name || !out)
		return LW_EINVAL;
	if (size == 0 || size > (1u << 31))
		return LW_EOBJBOUNDS;
	unsigned char *obj;
	int err = sized_object(r, name, LW_KIND_BYTES, size, &obj);
	if (err == 0)
		*out = obj;
	return err;
}
