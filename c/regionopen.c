//go:build ignore

/*
 * regionopen.c: Opening: create exclusively and publish the header last; open, wait for
 * the creator, map, validate, attach; the descriptor variant; close.
 *
 * Go twin: shm/regionopen.go, shm/region.go (Close).
 */
#include "internal.h"

static char *region_path(const char *path) {
	if (path[0] != 0 && !strchr(path, '/')) {
		size_t n = strlen(path);
		char *p = malloc(n + sizeof "/dev/shm/");
		if (p) {
			memcpy(p, "/dev/shm/", 9);
			memcpy(p + 9, path, n + 1);
		}
		return p;
	}
	return strdup(path);
}

static lw_region *new_region(const char *path, int fd, unsigned char *data, size_t size) {
	lw_region *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->path = strdup(path);
	r->fd = fd;
	r->data = data;
	r->size = size;
	pthread_mutex_init(&r->mu, NULL);
	return r;
}

static void free_region(lw_region *r) {
	for (uint32_t i = 0; i < LW_TABLE_CAP; i++)
		free(r->mutexes[i]), free(r->sems[i]);
	pthread_mutex_destroy(&r->mu);
	free(r->path);
	free(r);
}

static void learn(lw_region *r, const lw_hdr *h) {
	for (uint32_t i = 0; i < h->count; i++) {
		bool known = false;
		for (uint32_t j = 0; j < r->nobj && !known; j++)
			known = strcmp(r->objs[j].name, h->objs[i].name) == 0;
		if (!known && r->nobj < LW_TABLE_CAP)
			r->objs[r->nobj++] = h->objs[i];
	}
}

static int init_region(const char *path, int fd, int64_t size, open_limits lim, bool fresh, lw_region **out);
static int open_fd(const char *path, int fd, open_limits lim, lw_region **out);

/* create_region is createRegion. */
static int create_region(const char *path, int64_t size, open_limits lim, lw_region **out) {
	if (size == 0)
		size = LW_DEFAULT_REGION_SIZE;
	if (size < LW_MIN_REGION_SIZE || (uint64_t)size > SIZE_MAX / 2)
		return LW_ETOOSMALL;
	const mode_t mode = lim.mode ? lim.mode : 0600;
	if ((mode & 022) && !lim.allow_unsafe)
		return LW_EUNSAFEPERMS;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return errno;
	if (fchmod(fd, mode) != 0) {
		int err = errno;
		unlink(path);
		close(fd);
		return err;
	}
	return init_region(path, fd, size, lim, true, out);
}

/* init_region is initRegion: sizes fd (which it owns from now on), writes
 * and publishes the header, attaches. A failure closes fd and, if fresh
 * (we created the file), removes it; a header published meanwhile by an
 * opener that reclaimed the file (reclaim_abandoned) is EEXIST, and the
 * file is left alone. */
static int init_region(const char *path, int fd, int64_t size, open_limits lim, bool fresh, lw_region **out) {
	unsigned char *data = NULL;
	lw_region *r = NULL;
	int err = 0;
	lw_ident me;
	uint64_t magic = 0;
	if ((err = flock_until(fd, LOCK_EX, lim.lock)) != 0)
		goto fail;
	if (pread(fd, &magic, sizeof magic, LW_HDR_MAGIC) > 0 && magic != 0) {
		fresh = false;
		err = EEXIST;
		goto fail;
	}
	if (ftruncate(fd, size) != 0) {
		err = errno;
		goto fail;
	}
	data = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (data == MAP_FAILED) {
		err = errno;
		data = NULL;
		goto fail;
	}
	int idErr = self_identity(&me); /* an error fails attach, below */
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	put32(data, LW_HDR_VERSION, LW_REGION_VERSION);
	put32(data, LW_HDR_HEADER_SIZE, LW_ARENA_OFFSET);
	put64(data, LW_HDR_SIZE, (uint64_t)size);
	put32(data, LW_HDR_TABLE_CAP, LW_TABLE_CAP);
	put32(data, LW_HDR_PROC_SLOTS, LW_PROC_SLOTS);
	put64(data, LW_HDR_CREATED_NS, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
	atomic_store(w64(data, LW_HDR_PID_NAMESPACE), me.pidns);
	atomic_store(w64(data, LW_HDR_COUNT_CHECKSUM), count_checksum_word(0, header_checksum(data, 0)));
	/* Publish: a release (here sequentially consistent) store of the
	 * magic after every header field; wake openers sleeping on it. */
	atomic_store(w64(data, LW_HDR_MAGIC), LW_REGION_MAGIC);
	futex_wake(w32(data, LW_HDR_MAGIC), INT32_MAX, true);
	r = new_region(path, fd, data, (size_t)size);
	if (!r) {
		err = ENOMEM;
		goto fail;
	}
	r->me = me;
	r->lock_timeout_ns = lim.lock_timeout_ns;
	if (idErr) {
		err = idErr;
		goto fail;
	}
	if ((err = attach(r, NULL, 0)) != 0)
		goto fail;
	flock_retry(fd, LOCK_UN);
	*out = r;
	return 0;
fail:
	/* Nobody else can have initialized it: remove it. */
	if (fresh)
		unlink(path);
	if (data)
		munmap(data, (size_t)size);
	if (r)
		free_region(r);
	close(fd);
	return err;
}

static bool all_zero(const unsigned char *b, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* reclaim_abandoned is reclaimAbandoned: if path is an abandoned creation
 * (docs/abi.md: its flock free, its magic zero, its tables zero), it
 * initializes and attaches to it; -1 if it is not one. */
static int reclaim_abandoned(const char *path, int64_t size, open_limits lim, lw_region **out) {
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	unsigned char *head = NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (!lim.allow_unsafe && !(seals >= 0 && (seals & F_SEAL_SHRINK)) && ((st.st_mode & 022) != 0 || st.st_uid != geteuid())) ||
	    flock(fd, LOCK_EX | LOCK_NB) != 0 ||
	    !(head = calloc(1, LW_ARENA_OFFSET)) || pread(fd, head, LW_ARENA_OFFSET, 0) < 0) {
		free(head);
		close(fd);
		return -1;
	}
	bool published = !all_zero(head + LW_HDR_MAGIC, 8);
	bool used = !all_zero(head + LW_TABLE_OFFSET, LW_ARENA_OFFSET - LW_TABLE_OFFSET);
	free(head);
	if (published) {
		flock_retry(fd, LOCK_UN);
		return open_fd(path, fd, lim, out);
	}
	if (st.st_size >= LW_MIN_REGION_SIZE)
		size = st.st_size;
	else if (size == 0)
		size = LW_DEFAULT_REGION_SIZE;
	if (used || size < LW_MIN_REGION_SIZE || (uint64_t)size > SIZE_MAX / 2) {
		close(fd);
		return used ? -1 : LW_ETOOSMALL;
	}
	return init_region(path, fd, size, lim, false, out);
}

/* open_existing is openExisting (mode open). */

static int open_existing(const char *path, open_limits lim, lw_region **out) {
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ELOOP || errno == EISDIR || errno == ENXIO)
			return LW_ENOTREGULAR;
		return errno;
	}
	return open_fd(path, fd, lim, out);
}

/* open_fd is openFD: the open of the region in fd, which it owns from
 * now on (a failed open closes it). */
static int open_fd(const char *path, int fd, open_limits lim, lw_region **out) {
	int64_t deadline = lim.init;
	unsigned char *data = NULL;
	size_t mapped = 0;
	unsigned char *hdr = NULL;
	lw_hdr *h = NULL;
	lw_region *r = NULL;
	bool locked = false;
	int err = 0;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		err = errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		err = LW_ENOTREGULAR;
		goto fail;
	}
	/* checkPermissions: a file others may write (or another user owns)
	 * is refused, unless it is sealed against shrinking. */
	int seals = fcntl(fd, F_GET_SEALS);
	if (!lim.allow_unsafe && !(seals >= 0 && (seals & F_SEAL_SHRINK)) && ((st.st_mode & 022) != 0 || st.st_uid != geteuid())) {
		err = LW_EUNSAFEPERMS;
		goto fail;
	}
	/* Wait for the creator: first for its ftruncate, then for the magic. */
	for (;;) {
		if (fstat(fd, &st) != 0) {
			err = errno;
			goto fail;
		}
		if (st.st_size >= LW_MIN_REGION_SIZE)
			break;
		unsigned char head[8] = {0};
		ssize_t n = pread(fd, head, sizeof head, 0);
		if (!all_zero(head, n > 0 ? (size_t)n : 0)) {
			off_t was = st.st_size;
			if (fstat(fd, &st) != 0) {
				err = errno;
				goto fail;
			}
			if (st.st_size == was || (deadline >= 0 && mono_ns() >= deadline) || deadline < -1)
				break;
			continue;
		}
		if (deadline < -1 || (deadline >= 0 && mono_ns() >= deadline)) {
			err = LW_ENOTINIT;
			goto fail;
		}
		usleep(1000);
	}
	if (st.st_size >= LW_MIN_REGION_SIZE) {
		if ((uint64_t)st.st_size > SIZE_MAX / 2) {
			err = LW_EBADSIZE;
			goto fail;
		}
		mapped = (size_t)st.st_size;
		data = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (data == MAP_FAILED) {
			err = errno;
			data = NULL;
			goto fail;
		}
		/* While the magic is zero the creator has not published: sleep
		 * on its low word (the creator wakes us). */
		while (atomic_load(w64(data, LW_HDR_MAGIC)) == 0) {
			int64_t left = deadline < 0 ? (deadline == -1 ? LW_OWNER_CHECK_INTERVAL_NS : 0) : deadline - mono_ns();
			if (left <= 0) {
				err = LW_ENOTINIT;
				goto fail;
			}
			futex_wait(w32(data, LW_HDR_MAGIC), 0, left < LW_OWNER_CHECK_INTERVAL_NS ? left : LW_OWNER_CHECK_INTERVAL_NS, true);
		}
	}
	if ((err = flock_until(fd, LOCK_EX, lim.lock)) != 0)
		goto fail;
	locked = true;
	int64_t size = data ? (int64_t)mapped : (int64_t)st.st_size;
	hdr = calloc(1, LW_ARENA_OFFSET);
	h = malloc(sizeof *h);
	if (!hdr || !h) {
		err = ENOMEM;
		goto fail;
	}
	if (data)
		memcpy(hdr, data, LW_ARENA_OFFSET);
	else if (pread(fd, hdr, LW_ARENA_OFFSET, 0) < 0) {
		err = errno;
		goto fail;
	}
	if ((err = parse_header(hdr, size, h)) != 0)
		goto fail;
	if (!data) {
		err = LW_EBADSIZE; /* unreachable: parse rejects short files */
		goto fail;
	}
	r = new_region(path, fd, data, mapped);
	if (!r) {
		err = ENOMEM;
		goto fail;
	}
	r->lock_timeout_ns = lim.lock_timeout_ns;
	learn(r, h);
	if ((err = self_identity(&r->me)) != 0 || (err = attach(r, h->objs, h->count)) != 0)
		goto fail;
	flock_retry(fd, LOCK_UN);
	free(hdr);
	free(h);
	pthread_mutex_lock(&r->mu);
	sem_housekeep(r); /* what dead processes hold in semaphores comes back */
	pthread_mutex_unlock(&r->mu);
	*out = r;
	return 0;
fail:
	if (locked)
		flock_retry(fd, LOCK_UN);
	free(hdr);
	free(h);
	if (r)
		free_region(r);
	if (data)
		munmap(data, mapped);
	close(fd);
	return err;
}

/* open_region is openRegion; its deadlines are limits_of's. */
static int open_region(const char *path, int64_t size, const lw_region_options *o, bool create, bool open, lw_region **out) {
	if (!path || !out)
		return EINVAL;
	if (o && (o->mode & ~(uint32_t)0777))
		return EINVAL;
	char *p = region_path(path);
	if (!p)
		return ENOMEM;
	if (p[0] == 0) {
		free(p);
		return EINVAL;
	}
	open_limits lim = limits_of(o ? o->init_timeout_ns : 0);
	if (o) {
		lim.mode = (mode_t)o->mode;
		lim.allow_unsafe = o->allow_unsafe_permissions != 0;
	}
	int err;
	for (;;) {
		if (create) {
			err = create_region(p, size, lim, out);
			if (err == 0 || !open || err != EEXIST)
				break;
		}
		err = open_existing(p, lim, out);
		if (err == LW_ENOTINIT) {
			int rerr = reclaim_abandoned(p, size, lim, out);
			if (rerr != -1)
				err = rerr;
		}
		if (create && err == ENOENT && lim.init >= 0 && mono_ns() < lim.init)
			continue; /* removed since our create failed */
		break;
	}
	free(p);
	return err;
}

int lw_region_create(const char *path, int64_t size, lw_region **out) {
	return open_region(path, size, NULL, true, false, out);
}

int lw_region_open(const char *path, lw_region **out) { return open_region(path, 0, NULL, false, true, out); }

int lw_region_open_init(const char *path, int64_t init_timeout_ns, lw_region **out) {
	lw_region_options o = {.init_timeout_ns = init_timeout_ns};
	return open_region(path, 0, &o, false, true, out);
}

int lw_region_create_options(const char *path, int64_t size, const lw_region_options *opts, lw_region **out) {
	return open_region(path, size, opts, true, false, out);
}

int lw_region_open_options(const char *path, const lw_region_options *opts, lw_region **out) {
	return open_region(path, 0, opts, false, true, out);
}

int lw_region_open_or_create_options(const char *path, int64_t size, const lw_region_options *opts, lw_region **out) {
	return open_region(path, size, opts, true, true, out);
}

int lw_region_open_fd(int fd, const char *name, lw_region **out) {
	if (!name || !out)
		return EINVAL;
	/* A new open file description, ours to close (the caller keeps fd):
	 * not dup(2), whose copy shares fd's description, and with it the
	 * flock under which processes claim process-table slots, with the
	 * creator and every process that inherited fd: locks through one
	 * description never exclude each other. */
	/* The reopen asks for read and write whatever fd allows: fd itself
	 * must allow both (not O_RDONLY, not O_PATH), or a read-only
	 * descriptor of a memfd (mode 0777) would become a writable region. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return errno;
	if ((fl & O_ACCMODE) != O_RDWR || (fl & O_PATH))
		return EACCES;
	char proc[32];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	int own;
	do
		own = open(proc, O_RDWR | O_CLOEXEC);
	while (own < 0 && errno == EINTR);
	if (own < 0)
		return errno;
	return open_fd(name, own, limits_of(0), out);
}

int lw_region_open_or_create(const char *path, int64_t size, lw_region **out) {
	return open_region(path, size, NULL, true, true, out);
}

/* NULL handles and out pointers: every function that returns a code
 * checks its pointer arguments first, before any other argument and
 * before any side effect, and returns LW_EINVAL; those returning a value
 * return 0, which no valid handle gives (a region is never empty, a token
 * has a non-zero generation, a ring holds at least one byte) except the
 * lock word, a diagnostic; those returning void do nothing, as free(NULL).
 * A caller that ignored a failed open then gets an error it can name
 * (lw_strerror) from its next call, not a crash in a library frame. */

int64_t lw_region_size(const lw_region *r) { return r ? (int64_t)r->size : 0; }
uint32_t lw_region_token(const lw_region *r) { return r ? r->token : 0; }

int lw_region_close(lw_region *r) {
	if (!r)
		return LW_EINVAL;
	if ((uint32_t)getpid() != r->me.pid) {
		/* A copy that fork(2) gave a child: the slot, and every hold
		 * through it, are the parent's. Clearing the slot's live bit
		 * would make the live parent look dead, and its locks be
		 * taken from it: release the child's copy only. */
		munmap(r->data, r->size);
		close(r->fd);
		free_region(r);
		return 0;
	}
	/* A file truncated under the mapping took the words with it: reading
	 * them faults (SIGBUS). Nothing can be held or released there any
	 * more, and the slot is gone: unmap, close, and say so (Go's Close
	 * does the same). */
	struct stat st;
	if (fstat(r->fd, &st) == 0 && (uint64_t)st.st_size < r->size) {
		munmap(r->data, r->size);
		close(r->fd);
		free_region(r);
		return LW_ETRUNCATED;
	}
	pthread_mutex_lock(&r->mu);
	if (atomic_load(&r->waiting) > 0) {
		pthread_mutex_unlock(&r->mu);
		return LW_EREGIONBUSY;
	}
	for (uint32_t i = 0; i < LW_TABLE_CAP; i++) {
		if ((r->mutexes[i] && (atomic_load(r->mutexes[i]->word) & LW_OWNER_MASK) == r->token) || (r->sems[i] && sem_holds(r->sems[i]))) {
			pthread_mutex_unlock(&r->mu);
			return LW_EREGIONBUSY; /* unmapping a held lock would strand it */
		}
	}
	pthread_mutex_unlock(&r->mu);
	int err = flock_until(r->fd, LOCK_EX, lock_deadline(r->lock_timeout_ns));
	if (err == LW_ETIMEDOUT)
		return err; /* nothing closed: the caller may try again */
	if (err == 0) {
		/* Housekeeping, as at open, over the table as it is now: what
		 * dead processes hold in semaphores comes back. */
		pthread_mutex_lock(&r->mu);
		lw_hdr *h = malloc(sizeof *h);
		unsigned char *hdr = malloc(LW_ARENA_OFFSET);
		if (h && hdr) {
			memcpy(hdr, r->data, LW_ARENA_OFFSET);
			if (parse_header(hdr, (int64_t)r->size, h) == 0)
				learn(r, h);
		}
		free(h);
		free(hdr);
		sem_housekeep(r);
		pthread_mutex_unlock(&r->mu);
	}
	if (err == 0) {
		_Atomic uint32_t *state = w32(slot_at(r, r->slot), LW_PROC_STATE);
		atomic_store(state, atomic_load(state) & ~LW_PROC_LIVE);
		reset_waits_for(r, r->slot);
		flock_retry(r->fd, LOCK_UN);
	}
	munmap(r->data, r->size);
	close(r->fd);
	free_region(r);
	return 0;
}
