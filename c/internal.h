/*
 * internal.h: what the rooms of the C library share. Not installed; not
 * part of the ABI. The rooms are compiled as one translation unit by
 * lockword.c, which includes them in the order it lists, so everything
 * below is static (no symbol beyond lockword.h is exported). Each room
 * names the Go file it mirrors.
 */
#ifndef LOCKWORD_INTERNAL_H
#define LOCKWORD_INTERNAL_H

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

/* ---- Process identity (regionowner.go, proc_linux.go) ---- */

typedef struct {
	uint32_t pid;
	uint64_t start;
	unsigned char boot[16];
	uint64_t pidns;
} lw_ident;

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
	uint32_t waits_for1; /* 1 + its table index: our waits-for record (waitsfor.c) */
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
	lw_sem *sems[LW_TABLE_CAP];      /* by index in objs */
};

/* open_limits is openLimits: an open's deadlines (CLOCK_MONOTONIC ns). */
typedef struct {
	int64_t init;            /* for the creator: >= 0, or -2: do not wait */
	int64_t lock;            /* for the file lock during the open */
	int64_t lock_timeout_ns; /* for each later wait for it */
	mode_t mode;             /* of a file created: 0 means 0600 */
	bool allow_unsafe;       /* lw_region_options.allow_unsafe_permissions */
} open_limits;


/* The waits-for records (waitsfor.c): 16 bits per process slot in the
 * header's reserved bytes, after every header field. */
enum { hdr_waits_for = 2048 };
_Static_assert(hdr_waits_for >= LW_HDR_PID_NAMESPACE + 8 && hdr_waits_for + 2 * LW_PROC_SLOTS <= LW_TABLE_OFFSET,
	       "waits-for records in the header's reserved bytes");

/* ---- Functions one room defines and another calls, by room ---- */

/* wait.c */
static int64_t mono_ns(void);
static void futex_wait(_Atomic uint32_t *addr, uint32_t val, int64_t timeout_ns, bool shared);
static void futex_wake(_Atomic uint32_t *addr, int n, bool shared);
static inline void cpu_pause(uint32_t n);
static int64_t deadline_of(int64_t timeout_ns);
static int64_t slice_until(int64_t deadline, int64_t slice_ns);

/* proc.c */
static int read_proc_stat(uint32_t pid, char *state, uint64_t *start);
static int self_identity(lw_ident *me);
static bool process_alive(const lw_ident *me, const lw_ident *id);

/* regionabi.c */
static const kind_info *kind_of(uint32_t kind);
static uint32_t header_checksum(const unsigned char *hdr, uint32_t count);
static uint64_t count_checksum_word(uint32_t count, uint32_t sum);
static int check_name(const char *name, size_t n);
static int parse_header(const unsigned char *hdr, int64_t file_size, lw_hdr *h);

/* regionflock.c */
static int flock_retry(int fd, int how);
static int flock_until(int fd, int how, int64_t deadline);
static int64_t lock_deadline(int64_t timeout_ns);
static open_limits limits_of(int64_t init_timeout_ns);

/* regionowner.c */
static unsigned char *slot_at(lw_region *r, uint32_t slot);
static inline uint32_t token_gen(uint32_t t);
static bool token_alive(lw_region *r, uint32_t token, uint32_t *pid);
static int attach(lw_region *r, const lw_obj *objs, uint32_t n);

/* waitsfor.c */
static uint32_t table_index1(lw_region *r, uint64_t off);
static uint16_t set_waits_for(lw_region *r, uint32_t idx1);
static void clear_waits_for(lw_region *r, uint16_t rec);
static void reset_waits_for(lw_region *r, uint32_t slot);

/* regionopen.c */
static void learn(lw_region *r, const lw_hdr *h);

/* sharedsemaphore.c */
static bool sem_holds(lw_sem *s);
static int64_t sem_housekeep(lw_region *r);

/* region.c */
static int object(lw_region *r, const char *name, uint32_t kind, uint32_t size, uint32_t *index);
static int sized_object(lw_region *r, const char *name, uint32_t kind, size_t size, unsigned char **obj);

#endif /* LOCKWORD_INTERNAL_H */
