//go:build ignore

/*
 * lockword.c: the region ABI of docs/abi.md in C, step for step as the Go
 * package does it. Each function names its Go twin; the check order, the
 * error per check, the slot and generation rules and the futex words are
 * the same. Shared words are changed only with sequentially consistent
 * atomics, and every futex on region memory is a shared one (no
 * FUTEX_PRIVATE_FLAG): the waker is usually another process.
 */
#define _GNU_SOURCE
#include "lockword.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

_Static_assert(LW_EPERM == EPERM && LW_EBUSY == EBUSY && LW_EINVAL == EINVAL && LW_ETIMEDOUT == ETIMEDOUT &&
		       LW_EOWNERDEAD == EOWNERDEAD && LW_ENOTRECOVERABLE == ENOTRECOVERABLE,
	       "POSIX codes");
_Static_assert(sizeof(_Atomic uint32_t) == 4 && sizeof(_Atomic uint64_t) == 8, "atomics are plain words");

/* ---- Casts: region memory as atomic words ----
 * The mapping is page-aligned and every word the ABI names is naturally
 * aligned, so an _Atomic uint32_t/uint64_t (lock-free, the same size and
 * representation as the plain type on gcc and clang) may overlay it: this
 * is how Go's atomic.Uint32 reads the same bytes. */
static inline _Atomic uint32_t *w32(unsigned char *base, uint64_t off) {
	return (_Atomic uint32_t *)(void *)(base + off);
}
static inline _Atomic uint64_t *w64(unsigned char *base, uint64_t off) {
	return (_Atomic uint64_t *)(void *)(base + off);
}

/* Retry bounds (corrupt.go): a CAS loop that fails only because another
 * party moved the word makes progress in every valid history; a word
 * rewritten outside the protocol could keep it failing for ever, so loops
 * look at their deadline every retry_check_every tries, and loops without
 * one stop after retry_limit. */
enum { retry_check_every = 64, retry_limit = 1 << 16 };

/* ---- Time, futex, pause ---- */

static int64_t mono_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* futex_wait sleeps while *addr == val for at most timeout_ns (< 0: no
 * limit). Spurious returns are fine: callers loop. shared picks the
 * shared futex (region words) or the private one (process-local gate). */
static void futex_wait(_Atomic uint32_t *addr, uint32_t val, int64_t timeout_ns, bool shared) {
	struct timespec ts, *tsp = NULL;
	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tsp = &ts;
	}
	syscall(SYS_futex, (void *)addr, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, val, tsp, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr, int n, bool shared) {
	syscall(SYS_futex, (void *)addr, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_pause(uint32_t n) {
	for (uint32_t i = 0; i < n; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__asm__ __volatile__("pause");
#elif defined(__aarch64__)
		__asm__ __volatile__("yield");
#endif
	}
}

/* deadline_of turns a relative timeout into an absolute CLOCK_MONOTONIC
 * deadline; -1 means none. */
static int64_t deadline_of(int64_t timeout_ns) {
	if (timeout_ns < 0)
		return -1;
	int64_t now = mono_ns();
	return timeout_ns > INT64_MAX - now ? -1 : now + timeout_ns;
}

/* slice_until bounds a sleep of at most slice_ns by a deadline. */
static int64_t slice_until(int64_t deadline, int64_t slice_ns) {
	if (deadline < 0)
		return slice_ns;
	int64_t left = deadline - mono_ns();
	if (left < 0)
		left = 0;
	return left < slice_ns ? left : slice_ns;
}

/* ---- Process identity (regionowner.go, proc_linux.go) ---- */

typedef struct {
	uint32_t pid;
	uint64_t start;
	unsigned char boot[16];
	uint64_t pidns;
} lw_ident;

/* read_file reads up to n-1 bytes of path into buf, NUL-terminated. */
static int read_file(const char *path, char *buf, size_t n, size_t *got) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t total = 0;
	while (total < n - 1) {
		ssize_t k = read(fd, buf + total, n - 1 - total);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return e;
		}
		if (k == 0)
			break;
		total += (size_t)k;
	}
	close(fd);
	buf[total] = 0;
	*got = total;
	return 0;
}

#define ERR_NO_PROCESS (-1)

/* read_proc_stat is readProcStat: the state letter and start time (field
 * 22) of /proc/PID/stat, counting fields from the last ')'. */
static int read_proc_stat(uint32_t pid, char *state, uint64_t *start) {
	char path[64], buf[4096];
	size_t n;
	snprintf(path, sizeof path, "/proc/%u/stat", pid);
	int err = read_file(path, buf, sizeof buf, &n);
	if (err == ENOENT || err == ESRCH)
		return ERR_NO_PROCESS;
	if (err)
		return err;
	char *p = strrchr(buf, ')');
	if (!p)
		return EINVAL;
	p++;
	char *fields[20];
	int nf = 0;
	while (nf < 20) {
		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		if (!*p)
			break;
		fields[nf++] = p;
		while (*p && *p != ' ' && *p != '\n' && *p != '\t')
			p++;
	}
	if (nf < 20 || fields[0][1] != ' ')
		return EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(fields[19], &end, 10);
	if (errno || end == fields[19] || (*end != ' ' && *end != '\n' && *end != 0))
		return EINVAL;
	*state = fields[0][0];
	*start = v;
	return 0;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* boot_id is bootID: /proc/sys/kernel/random/boot_id as 16 bytes. */
static int boot_id(unsigned char id[16]) {
	char buf[128], hex[64];
	size_t n, h = 0;
	int err = read_file("/proc/sys/kernel/random/boot_id", buf, sizeof buf, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == '-' || c == ' ' || c == '\n' || c == '\t' || c == '\r')
			continue;
		if (h == sizeof hex)
			return EINVAL;
		hex[h++] = c;
	}
	if (h != 32)
		return EINVAL;
	for (int i = 0; i < 16; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return EINVAL;
		id[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* self_identity is selfIdentity (read per region open: a forked child is
 * another process). */
static int self_identity(lw_ident *me) {
	memset(me, 0, sizeof *me);
	me->pid = (uint32_t)getpid();
	char state;
	int err = read_proc_stat(me->pid, &state, &me->start);
	if (err)
		return err == ERR_NO_PROCESS ? ESRCH : err;
	struct stat st;
	if (stat("/proc/self/ns/pid", &st) == 0)
		me->pidns = (uint64_t)st.st_ino;
	return boot_id(me->boot);
}

/* process_alive is processAlive: errs towards alive. Built with
 * -DLW_TEST_BROKEN_ALIVE it declares every other process dead, a broken
 * check that the tests must catch (TestBrokenLivenessIsCaught). */
static bool process_alive(const lw_ident *me, const lw_ident *id) {
#ifdef LW_TEST_BROKEN_ALIVE
	if (id->pid != me->pid)
		return false;
#endif
	if (memcmp(id->boot, me->boot, 16) != 0)
		return false; /* registered during an earlier boot */
	if (id->pidns == 0 || id->pidns != me->pidns)
		return true; /* cannot check the PID here: never rob */
	if (id->pid == me->pid)
		return id->start == me->start;
	if (id->pid == 0 || id->pid > (1u << 22))
		return false;
	if (kill((pid_t)id->pid, 0) != 0 && errno == ESRCH)
		return false;
	char state;
	uint64_t start;
	int err = read_proc_stat(id->pid, &state, &start);
	if (err == ERR_NO_PROCESS)
		return !(kill((pid_t)id->pid, 0) != 0 && errno == ESRCH);
	if (err)
		return true;
	if (state == 'Z' || state == 'X')
		return false;
	return start == id->start;
}

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

/* ---- Header parsing (parseRegionHeader, parseEntry) ---- */

static inline uint32_t get32(const unsigned char *b, size_t off) {
	uint32_t v;
	memcpy(&v, b + off, 4);
	return v;
}
static inline uint64_t get64(const unsigned char *b, size_t off) {
	uint64_t v;
	memcpy(&v, b + off, 8);
	return v;
}
static inline void put32(unsigned char *b, size_t off, uint32_t v) { memcpy(b + off, &v, 4); }
static inline void put64(unsigned char *b, size_t off, uint64_t v) { memcpy(b + off, &v, 8); }

typedef struct {
	char name[LW_ENTRY_NAME_MAX + 1];
	uint32_t kind, size;
	uint64_t offset;
} lw_obj;

typedef struct {
	uint64_t size, arena_used;
	uint32_t count;
	lw_obj objs[LW_TABLE_CAP];
} lw_hdr;

/* kind_info is objectKinds: size (0: any), alignment, owner words. */
typedef struct {
	uint32_t size, align;
	int nowner;
	uint32_t owner0, stride; /* owner words at owner0 + i*stride, i < nowner */
	int nowner2;
	uint32_t owner2, stride2; /* and at owner2 + i*stride2, i < nowner2 */
} kind_info;

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

/* ---- Regions ---- */

struct lw_mutex {
	lw_region *r;
	_Atomic uint32_t *word;
	_Atomic uint32_t *handoff; /* the hand-off word, object offset 56 */
	unsigned char *obj;
	uint32_t token;
	/* gate queues this process's slow-path waiters (private futex, three
	 * states: 0 free, 1 held, 2 held with sleepers), so that one thread
	 * per process sleeps on the shared word, as Go's gate does. */
	_Atomic uint32_t gate;
	char name[LW_ENTRY_NAME_MAX + 1];
};

struct lw_region {
	char *path;
	int fd;
	unsigned char *data;
	size_t size;
	uint32_t slot, token;
	uint64_t pidns; /* the region's PID namespace record; 0 unknown */
	int64_t lock_timeout_ns; /* bounds each later wait for the file lock */
	lw_ident me;
	_Atomic int waiting; /* threads in a slow path: close refuses */
	pthread_mutex_t mu;  /* guards what follows */
	uint32_t nobj;
	lw_obj objs[LW_TABLE_CAP];
	lw_mutex *mutexes[LW_TABLE_CAP]; /* by index in objs */
};

static int flock_retry(int fd, int how) {
	while (flock(fd, how) != 0) {
		if (errno != EINTR)
			return errno;
	}
	return 0;
}

/* ---- The region's file lock (regionflock.go) ----
 * Held for microseconds by a running process (to fill the header, attach,
 * detach, add an object); a process stopped or hung while holding it must
 * not block everyone else's open, object creation and close: every taker
 * polls flock with LOCK_NB, sleeping 50 us doubling up to 2 ms, until its
 * deadline, then returns LW_ETIMEDOUT and records who held the lock for
 * lw_region_lock_holder. Not a timed lock: flock has none (only a signal
 * cuts a blocking one short), and OFD locks, which have no timeout either,
 * do not exclude the flock of other processes. */

enum { flock_first_sleep_ns = 50000, flock_max_sleep_ns = 2000000 };

/* The holder found by this thread's last file-lock timeout. */
static _Thread_local struct {
	uint32_t pid;
	bool stopped;
} flock_timeout;

/* flock_holder is fileLockHolders: the PID that /proc/locks says holds a
 * flock on fd's file ("N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ...", a
 * waiter's line has "->" for its type), or 0. */
static uint32_t flock_holder(int fd) {
	struct stat st;
	if (fstat(fd, &st) != 0)
		return 0;
	FILE *f = fopen("/proc/locks", "re");
	if (!f)
		return 0;
	char line[256];
	uint32_t pid = 0;
	while (!pid && fgets(line, sizeof line, f)) {
		char type[16];
		long long p;
		unsigned maj, min;
		unsigned long long ino;
		if (sscanf(line, "%*s %15s %*s %*s %lld %x:%x:%llu", type, &p, &maj, &min, &ino) == 5 && !strcmp(type, "FLOCK") &&
		    p > 0 && p <= UINT32_MAX && maj == major(st.st_dev) && min == minor(st.st_dev) && ino == (unsigned long long)st.st_ino)
			pid = (uint32_t)p;
	}
	fclose(f);
	return pid;
}

/* flock_until is lockFile: flock(how) on fd, trying until deadline
 * (CLOCK_MONOTONIC ns): 0, LW_ETIMEDOUT, or flock's errno. */
static int flock_until(int fd, int how, int64_t deadline) {
	int64_t sleep_ns = flock_first_sleep_ns;
	for (;;) {
		if (flock(fd, how | LOCK_NB) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return errno;
		int64_t left = deadline - mono_ns();
		if (left <= 0) {
			char state = 0;
			uint64_t start;
			flock_timeout.pid = flock_holder(fd);
			flock_timeout.stopped = flock_timeout.pid && read_proc_stat(flock_timeout.pid, &state, &start) == 0 &&
						(state == 'T' || state == 't');
			return LW_ETIMEDOUT;
		}
		int64_t ns = sleep_ns < left ? sleep_ns : left;
		struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
		nanosleep(&ts, NULL);
		if (sleep_ns < flock_max_sleep_ns)
			sleep_ns *= 2;
	}
}

/* lock_deadline is the CLOCK_MONOTONIC deadline timeout_ns (> 0) from
 * now, saturating. */
static int64_t lock_deadline(int64_t timeout_ns) {
	int64_t now = mono_ns();
	return timeout_ns > INT64_MAX - now ? INT64_MAX : now + timeout_ns;
}

uint32_t lw_region_lock_holder(int *stopped) {
	if (stopped)
		*stopped = flock_timeout.stopped;
	return flock_timeout.pid;
}

/* open_limits is openLimits: an open's deadlines (CLOCK_MONOTONIC ns). */
typedef struct {
	int64_t init;            /* for the creator: >= 0, or -2: do not wait */
	int64_t lock;            /* for the file lock during the open */
	int64_t lock_timeout_ns; /* for each later wait for it */
} open_limits;

/* limits_of is limitsOf: init_timeout_ns (0: 2 s) for the creator and the
 * file lock; negative: no wait for the creator, 2 s for the lock. */
static open_limits limits_of(int64_t init_timeout_ns) {
	if (init_timeout_ns == 0)
		init_timeout_ns = 2000000000; /* DefaultInitTimeout */
	open_limits lim = {.lock_timeout_ns = init_timeout_ns > 0 ? init_timeout_ns : 2000000000};
	lim.lock = lock_deadline(lim.lock_timeout_ns);
	lim.init = init_timeout_ns < 0 ? -2 : lim.lock;
	return lim;
}

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
	/* Publish: from here on lock words may name (slot, gen). */
	atomic_store(state, LW_PROC_LIVE | gen);
	atomic_store(w32(r->data, LW_HDR_SLOT_HINT), (slot + 1) % LW_PROC_SLOTS);
	r->slot = slot;
	r->token = make_token(slot, gen);
	return 0;
}

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
		free(r->mutexes[i]);
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

/* create_region is createRegion. */
static int create_region(const char *path, int64_t size, open_limits lim, lw_region **out) {
	if (size == 0)
		size = LW_DEFAULT_REGION_SIZE;
	if (size < LW_MIN_REGION_SIZE || (uint64_t)size > SIZE_MAX / 2)
		return LW_ETOOSMALL;
	const mode_t mode = 0600;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return errno;
	unsigned char *data = NULL;
	lw_region *r = NULL;
	int err = 0;
	lw_ident me;
	if (fchmod(fd, mode) != 0 || (err = flock_until(fd, LOCK_EX, lim.lock)) != 0 || ftruncate(fd, size) != 0) {
		err = err ? err : errno;
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

/* open_existing is openExisting (mode open). */
static int open_fd(const char *path, int fd, open_limits lim, lw_region **out);

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
	if (!(seals >= 0 && (seals & F_SEAL_SHRINK)) && ((st.st_mode & 022) != 0 || st.st_uid != geteuid())) {
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
static int open_region(const char *path, int64_t size, int64_t init_timeout_ns, bool create, bool open, lw_region **out) {
	if (!path || !out)
		return EINVAL;
	char *p = region_path(path);
	if (!p)
		return ENOMEM;
	if (p[0] == 0) {
		free(p);
		return EINVAL;
	}
	open_limits lim = limits_of(init_timeout_ns);
	int err;
	for (;;) {
		if (create) {
			err = create_region(p, size, lim, out);
			if (err == 0 || !open || err != EEXIST)
				break;
		}
		err = open_existing(p, lim, out);
		if (create && err == ENOENT && lim.init >= 0 && mono_ns() < lim.init)
			continue; /* removed since our create failed */
		break;
	}
	free(p);
	return err;
}

int lw_region_create(const char *path, int64_t size, lw_region **out) {
	return open_region(path, size, 0, true, false, out);
}

int lw_region_open(const char *path, lw_region **out) { return open_region(path, 0, 0, false, true, out); }

int lw_region_open_init(const char *path, int64_t init_timeout_ns, lw_region **out) {
	return open_region(path, 0, init_timeout_ns, false, true, out);
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
	return open_region(path, size, 0, true, true, out);
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
		if (r->mutexes[i] && (atomic_load(r->mutexes[i]->word) & LW_OWNER_MASK) == r->token) {
			pthread_mutex_unlock(&r->mu);
			return LW_EREGIONBUSY; /* unmapping a held lock would strand it */
		}
	}
	pthread_mutex_unlock(&r->mu);
	int err = flock_until(r->fd, LOCK_EX, lock_deadline(r->lock_timeout_ns));
	if (err == LW_ETIMEDOUT)
		return err; /* nothing closed: the caller may try again */
	if (err == 0) {
		_Atomic uint32_t *state = w32(slot_at(r, r->slot), LW_PROC_STATE);
		atomic_store(state, atomic_load(state) & ~LW_PROC_LIVE);
		flock_retry(r->fd, LOCK_UN);
	}
	munmap(r->data, r->size);
	close(r->fd);
	free_region(r);
	return 0;
}

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

int lw_region_bytes(lw_region *r, const char *name, size_t size, void **out) {
	if (!r || !name || !out)
		return LW_EINVAL;
	if (size == 0 || size > (1u << 31))
		return LW_EOBJBOUNDS;
	pthread_mutex_lock(&r->mu);
	uint32_t i;
	int err = object(r, name, LW_KIND_BYTES, (uint32_t)size, &i);
	if (err == 0 && r->objs[i].size != size)
		err = LW_EOBJBOUNDS;
	if (err == 0)
		*out = r->data + r->objs[i].offset;
	pthread_mutex_unlock(&r->mu);
	return err;
}

/* ---- SharedMutex (sharedmutex.go) ---- */

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

int lw_mutex_lock(lw_mutex *m) {
	if (!m)
		return LW_EINVAL;
	uint32_t free_word = 0;
	if (atomic_compare_exchange_strong(m->word, &free_word, m->token))
		return 0;
	return lock_slow(m, -1, NULL);
}

int lw_mutex_timedlock(lw_mutex *m, int64_t timeout_ns) {
	if (!m)
		return LW_EINVAL;
	uint32_t free_word = 0;
	if (atomic_compare_exchange_strong(m->word, &free_word, m->token))
		return 0;
	return lock_slow(m, timeout_ns, NULL);
}

int lw_mutex_timedlock_pid(lw_mutex *m, int64_t timeout_ns, uint32_t *dead_pid) {
	if (!m)
		return LW_EINVAL;
	uint32_t free_word = 0;
	if (atomic_compare_exchange_strong(m->word, &free_word, m->token))
		return 0;
	return lock_slow(m, timeout_ns, dead_pid);
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
				withdraw(m, requested);
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
			uint32_t r1 = m->token;
			if (requested && !atomic_compare_exchange_strong(m->handoff, &r1, 0))
				continue; /* granted meanwhile: take it */
			if (slept) /* we may have consumed a wake-up: pass it on */
				futex_wake(m->word, 1, true);
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
	pthread_mutex_lock(&r->mu);
	uint32_t i;
	int err = object(r, name, LW_KIND_RING, (uint32_t)(LW_RING_DATA + capacity), &i);
	if (err == 0 && r->objs[i].size != LW_RING_DATA + capacity)
		err = LW_EOBJBOUNDS;
	unsigned char *obj = err ? NULL : r->data + r->objs[i].offset;
	pthread_mutex_unlock(&r->mu);
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

/* ---- Errors ---- */

const char *lw_strerror(int code) {
	switch (code) {
	case 0:
		return "success";
	case LW_ENOTREGULAR:
		return "lockword: region path is not a regular file";
	case LW_ENOTINIT:
		return "lockword: region header was never initialized";
	case LW_EBADMAGIC:
		return "lockword: not a lockword region (bad magic)";
	case LW_EBADVERSION:
		return "lockword: unsupported region ABI version";
	case LW_EBADSIZE:
		return "lockword: region size does not match the file";
	case LW_EBADCHECKSUM:
		return "lockword: region header checksum mismatch";
	case LW_EOBJNAME:
		return "lockword: bad region object name";
	case LW_EOBJKIND:
		return "lockword: bad region object kind";
	case LW_EOBJBOUNDS:
		return "lockword: region object out of bounds";
	case LW_EOBJALIGN:
		return "lockword: region object misaligned";
	case LW_EFOREIGNPIDNS:
		return "lockword: region is in use by processes of another PID namespace";
	case LW_EREGIONFULL:
		return "lockword: region full";
	case LW_ETOOMANYPROCS:
		return "lockword: region process table full";
	case LW_EREGIONBUSY:
		return "lockword: region in use";
	case LW_ETOOSMALL:
		return "lockword: requested region size is too small";
	case LW_ERINGCORRUPT:
		return "lockword: shared ring corrupt";
	case LW_EPEERDEAD:
		return "lockword: the other side of the shared ring died";
	case LW_ERINGBUSY:
		return "lockword: shared ring role already taken by a live process";
	case LW_ERINGCLOSED:
		return "lockword: ring closed";
	case LW_EMSGSIZE:
		return "lockword: message larger than the shared ring can hold (or the buffer)";
	case LW_EUNSAFEPERMS:
		return "lockword: region file is writable by other users";
	case LW_ETRUNCATED:
		return "lockword: region file truncated";
	case LW_ECORRUPT:
		return "lockword: corrupt shared object";
	case LW_EOWNERDEAD:
		return "lockword: previous holder of the shared lock died while holding it";
	case LW_ENOTRECOVERABLE:
		return "lockword: shared lock is not recoverable";
	}
	return code > 0 && code < LW_EBASE ? strerror(code) : "lockword: unknown error code";
}
