/*
 * lockword.h: the C side of lockword's shared region ABI, version 1.
 *
 * A region is a file mapped MAP_SHARED by every process that uses it
 * (docs/abi.md fixes its layout, for Go and C alike). This library opens,
 * validates, creates and attaches to regions exactly as the Go package
 * github.com/lockword/lockword does, and implements two of its objects on
 * the same words: shm.Mutex (kind 1), a robust lock, and the shared byte
 * ring (kind 6). A C process and a Go process that open the same file take
 * the same lock and pass messages over the same ring.
 *
 * C11 with <stdatomic.h>; Linux system calls only (futex, flock, mmap)
 * through libc. Build: `make -C c` gives liblockword.a and liblockword.so.
 *
 * Example: take the lock "orders" that a Go process also takes with
 * r.Mutex("orders").LockContext(ctx):
 *
 *     lw_region *r;
 *     lw_mutex *m;
 *     int err = lw_region_open_or_create("orders", 0, &r); // /dev/shm/orders
 *     if (err == 0)
 *         err = lw_region_mutex(r, "orders", &m);
 *     if (err != 0) {
 *         fprintf(stderr, "lockword: %s\n", lw_strerror(err));
 *         return 1;
 *     }
 *     err = lw_mutex_lock(m);
 *     if (err == LW_EOWNERDEAD) {        // we hold it; the last holder died
 *         repair_the_data();
 *         lw_mutex_consistent(m);
 *     } else if (err != 0) {
 *         return 1;                       // LW_ENOTRECOVERABLE: not held
 *     }
 *     update_the_data();
 *     lw_mutex_unlock(m);
 *     lw_region_close(r);
 *
 * Return values: every function that can fail returns 0 on success or a
 * positive code: an errno value (below LW_EBASE) from a failed system call
 * (ENOENT, EEXIST, EACCES, ...), or one of the LW_E codes below, each the
 * twin of one Go sentinel error. The mutex calls return the POSIX robust
 * mutex codes (LW_EOWNERDEAD is EOWNERDEAD, and so on). lw_strerror names
 * any of them.
 *
 * NULL: each function below says which of its pointer arguments must not
 * be NULL ("Non-NULL: ..."). Every one that returns a code checks them
 * first, before its other arguments and before doing anything, and returns
 * LW_EINVAL for a NULL one; those that return a value return 0 for a NULL
 * handle, and those that return nothing do nothing (as free(NULL) does).
 * So a handle left NULL by a failed open gives LW_EINVAL, not a crash.
 * Any other invalid handle (freed, closed, or never returned by these
 * functions) is undefined behaviour: no check can see it.
 *
 * Thread safety: a region handle and its mutex handles may be used by any
 * number of threads at once. Owner identity is per process (per region
 * handle), as in Go: any thread of the holding process may unlock. A ring
 * handle is used by one thread at a time.
 */
#ifndef LOCKWORD_H
#define LOCKWORD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ABI constants (docs/abi.md; compared with the Go constants by
 * TestCHeaderConstants in the Go module, and with the structs below by
 * _Static_assert) ---- */

#define LW_REGION_MAGIC 0x64726f776b636f6cULL /* the bytes "lockword" */
#define LW_REGION_VERSION 1

/* Header, at offset 0 (4096 bytes). */
#define LW_HDR_MAGIC 0           /* uint64, published last */
#define LW_HDR_VERSION 8         /* uint32 */
#define LW_HDR_HEADER_SIZE 12    /* uint32: offset of the object area */
#define LW_HDR_SIZE 16           /* uint64: file size */
#define LW_HDR_TABLE_CAP 24      /* uint32 */
#define LW_HDR_PROC_SLOTS 28     /* uint32 */
#define LW_HDR_FLAGS 32          /* uint32, 0 */
#define LW_HDR_CREATED_NS 40     /* uint64, Unix ns */
#define LW_HDR_CHECKED 8         /* checksum covers [8, 48) ... */
#define LW_HDR_CHECKED_END 48
#define LW_HDR_OBJECT_COUNT 48   /* uint32 */
#define LW_HDR_CHECKSUM 52       /* uint32 CRC-32C */
#define LW_HDR_COUNT_CHECKSUM 48 /* the uint64 holding both, stored at once */
#define LW_HDR_SLOT_HINT 56      /* uint32, live */
#define LW_HDR_PID_NAMESPACE 64  /* uint64, live */

/* Object table: 128 entries of 64 bytes at 4096. */
#define LW_TABLE_OFFSET 4096
#define LW_TABLE_ENTRY_SIZE 64
#define LW_TABLE_CAP 128
#define LW_ENTRY_NAME 0
#define LW_ENTRY_NAME_MAX 48
#define LW_ENTRY_KIND 48 /* uint32: bits 0-15 the kind, 16-31 its parameter (0 but for values) */
#define LW_ENTRY_KIND_MASK 0xFFFFu
#define LW_ENTRY_KIND_PARAM_SHIFT 16
#define LW_ENTRY_SIZE 52
#define LW_ENTRY_OFFSET 56

/* Process table: 1024 slots of 32 bytes at 12288. */
#define LW_PROC_OFFSET 12288
#define LW_PROC_SLOT_SIZE 32
#define LW_PROC_SLOTS 1024
#define LW_PROC_STATE 0 /* uint32: LW_PROC_LIVE | generation */
#define LW_PROC_PID 4   /* uint32 */
#define LW_PROC_START 8 /* uint64: clock ticks since boot */
#define LW_PROC_BOOT 16 /* 16 bytes: boot ID */
#define LW_PROC_LIVE 0x80000000u
#define LW_PROC_GEN_MASK 0x3FFFFu

#define LW_ARENA_OFFSET 45056 /* object area; also the minimum size */
#define LW_MIN_REGION_SIZE 45056
#define LW_DEFAULT_REGION_SIZE (1 << 20)

/* Object kinds (never renumbered). */
#define LW_KIND_MUTEX 1
#define LW_KIND_BYTES 2
#define LW_KIND_TICKET_MUTEX 3
#define LW_KIND_RWMUTEX_V1 4 /* the layout before per-process reader counts */
#define LW_KIND_COND 5
#define LW_KIND_RING 6
#define LW_KIND_SEQLOCK 7
#define LW_KIND_RWMUTEX 8
#define LW_KIND_VALUE 9 /* Go's shm.Value; parameter: the value's alignment */

/* Owner token and shm.Mutex lock word. */
#define LW_OWNER_GEN_BITS 18
#define LW_OWNER_SLOT_BITS 10
#define LW_OWNER_MASK 0x0FFFFFFFu
#define LW_OWNER_NOT_RECOVERABLE 0x0FFFFFFFu
#define LW_OWNER_GEN_MAX 0x3FFFEu
#define LW_WORD_STATS 0x10000000u
#define LW_WORD_INCONSISTENT 0x20000000u
#define LW_WORD_WAITERS 0x40000000u
#define LW_WORD_TIMED 0x80000000u

/* shm.Mutex object (kind 1, 64 bytes, 64-aligned). */
#define LW_MUTEX_OBJ_SIZE 64
#define LW_MUTEX_WORD 0
#define LW_MUTEX_HELD_SINCE 8
#define LW_MUTEX_ACQUIRED 16
#define LW_MUTEX_SLOW 24
#define LW_MUTEX_PARKS 32
#define LW_MUTEX_WAIT_NS 40
#define LW_MUTEX_WAIT_MAX_NS 48
#define LW_MUTEX_HANDOFF 56 /* uint32: the hand-off word (docs/abi.md) */
/* Hand-off word: bits 0-27 the requesting process's owner token, 28-30
 * zero, 31 granted (the lock was handed to that process). */
#define LW_HANDOFF_GRANTED 0x80000000u
#define LW_HANDOFF_RESERVED 0x70000000u

/* Shared ring object (kind 6, 512 + capacity bytes, 128-aligned). */
#define LW_RING_PRODUCER_ROLE 0
#define LW_RING_CONSUMER_ROLE 4
#define LW_RING_TAIL 128
#define LW_RING_NOT_EMPTY 136
#define LW_RING_PRODUCER_SLEEPS 144
#define LW_RING_PRODUCER_WAKES 152
#define LW_RING_MESSAGES_SENT 160 /* producer: messages published (inspection) */
#define LW_RING_HEAD 256
#define LW_RING_NOT_FULL 264
#define LW_RING_CONSUMER_SLEEPS 272
#define LW_RING_CONSUMER_WAKES 280
#define LW_RING_MESSAGES_RECEIVED 288 /* consumer: messages received (inspection) */
#define LW_RING_DATA 512
#define LW_RING_ALIGN 128
#define LW_RING_MIN_CAPACITY 64
#define LW_RING_MAX_CAPACITY (1 << 30)
#define LW_REC_LENGTH 0
#define LW_REC_TYPE 4
#define LW_REC_HEADER_SIZE 8
#define LW_REC_MESSAGE 0
#define LW_REC_PADDING 1
#define LW_RING_SLEEPING 1u
#define LW_RING_CLOSED 2u

/* Liveness: a waiter checks a sleeping holder (or peer) every 10 ms. */
#define LW_OWNER_CHECK_INTERVAL_NS 10000000

/* shm.Semaphore object (kind 10, 16512 bytes, 64-aligned): the guard (a
 * mutex object) at 0, the counts, then an entry per process-table slot. */
#define LW_KIND_SEMAPHORE 10
#define LW_SEM_OBJ_SIZE 16512
#define LW_SEM_PERMITS 64       /* uint32: the capacity; 0 until recorded */
#define LW_SEM_IN_USE 68        /* uint32: the sum of the entries' held */
#define LW_SEM_SEQ 72           /* uint32: bit 0 sleepers, bumped by 2 per change */
#define LW_SEM_NEXT 76          /* uint32: the next ticket (never 0) */
#define LW_SEM_WAITERS 80       /* uint32: entries with a ticket */
#define LW_SEM_DEAD_HOLDERS 84  /* uint32: dead entries cleared */
#define LW_SEM_RECOVERED 88     /* uint64: permits taken back, in all */
#define LW_SEM_DEAD_PID 96      /* uint32: the last dead holder's PID */
#define LW_SEM_SLOTS 128        /* the entries */
#define LW_SEM_SLOT_SIZE 16
#define LW_SEM_SLOT_HELD 0      /* uint32 */
#define LW_SEM_SLOT_TOKEN 4     /* uint32: the owner token of the holder */
#define LW_SEM_SLOT_TICKET 8    /* uint32: its waiter's ticket, 0: none */
#define LW_SEM_SLOT_WANT 12     /* uint32: what that waiter asks for */
#define LW_SEM_SLEEPERS 1u
#define LW_SEM_SEQ_ONE 2u

/* MPSC queue (kind 11, 512 + capacity bytes): docs/abi.md, c/mpscqueue.c. */
#define LW_KIND_MPSC 11
#define LW_MPSC_ALIGN 128
#define LW_MPSC_MIN_CAPACITY 128
#define LW_MPSC_MAX_CAPACITY (1 << 30)

/* ---- The layout as C structs, for readers of a mapping ---- */

struct lw_header {
	uint64_t magic;
	uint32_t version, header_size;
	uint64_t size;
	uint32_t table_cap, proc_slots, flags, reserved36;
	uint64_t created_ns;
	uint32_t object_count, checksum, slot_hint, reserved60;
	uint64_t pid_namespace;
	unsigned char reserved72[4024];
};

struct lw_entry {
	char name[48];
	uint32_t kind, size;
	uint64_t offset;
};

struct lw_slot {
	uint32_t state, pid;
	uint64_t start;
	unsigned char boot[16];
};

struct lw_mutex_obj {
	uint32_t word, reserved4;
	uint64_t held_since, acquired, slow, parks, wait_ns, wait_max_ns;
	uint32_t handoff, reserved60;
};

struct lw_ring_obj {
	uint32_t producer_role, consumer_role;
	unsigned char reserved8[120];
	uint64_t tail;
	uint32_t not_empty, reserved140;
	uint64_t producer_sleeps, producer_wakes, messages_sent;
	unsigned char reserved168[88];
	uint64_t head;
	uint32_t not_full, reserved268;
	uint64_t consumer_sleeps, consumer_wakes, messages_received;
	unsigned char reserved296[216];
	/* capacity bytes of records follow */
};

struct lw_record {
	uint32_t length, type;
	/* payload, padded to 8 bytes */
};

#define LW__CHECK(type, field, off) _Static_assert(offsetof(struct type, field) == (off), #type "." #field)
LW__CHECK(lw_header, magic, LW_HDR_MAGIC);
LW__CHECK(lw_header, version, LW_HDR_VERSION);
LW__CHECK(lw_header, header_size, LW_HDR_HEADER_SIZE);
LW__CHECK(lw_header, size, LW_HDR_SIZE);
LW__CHECK(lw_header, table_cap, LW_HDR_TABLE_CAP);
LW__CHECK(lw_header, proc_slots, LW_HDR_PROC_SLOTS);
LW__CHECK(lw_header, flags, LW_HDR_FLAGS);
LW__CHECK(lw_header, created_ns, LW_HDR_CREATED_NS);
LW__CHECK(lw_header, object_count, LW_HDR_OBJECT_COUNT);
LW__CHECK(lw_header, checksum, LW_HDR_CHECKSUM);
LW__CHECK(lw_header, slot_hint, LW_HDR_SLOT_HINT);
LW__CHECK(lw_header, pid_namespace, LW_HDR_PID_NAMESPACE);
_Static_assert(sizeof(struct lw_header) == LW_TABLE_OFFSET, "header size");
LW__CHECK(lw_entry, name, LW_ENTRY_NAME);
LW__CHECK(lw_entry, kind, LW_ENTRY_KIND);
LW__CHECK(lw_entry, size, LW_ENTRY_SIZE);
LW__CHECK(lw_entry, offset, LW_ENTRY_OFFSET);
_Static_assert(sizeof(((struct lw_entry *)0)->name) == LW_ENTRY_NAME_MAX, "entry name");
_Static_assert(sizeof(struct lw_entry) == LW_TABLE_ENTRY_SIZE, "entry size");
_Static_assert(LW_TABLE_OFFSET + LW_TABLE_CAP * LW_TABLE_ENTRY_SIZE == LW_PROC_OFFSET, "process table offset");
LW__CHECK(lw_slot, state, LW_PROC_STATE);
LW__CHECK(lw_slot, pid, LW_PROC_PID);
LW__CHECK(lw_slot, start, LW_PROC_START);
LW__CHECK(lw_slot, boot, LW_PROC_BOOT);
_Static_assert(sizeof(struct lw_slot) == LW_PROC_SLOT_SIZE, "slot size");
_Static_assert(LW_PROC_OFFSET + LW_PROC_SLOTS * LW_PROC_SLOT_SIZE == LW_ARENA_OFFSET, "object area offset");
_Static_assert(LW_PROC_SLOTS == 1 << LW_OWNER_SLOT_BITS, "one slot per token slot value");
_Static_assert(LW_OWNER_MASK == (1u << (LW_OWNER_GEN_BITS + LW_OWNER_SLOT_BITS)) - 1, "owner mask");
_Static_assert(LW_PROC_GEN_MASK == (1u << LW_OWNER_GEN_BITS) - 1, "generation mask");
_Static_assert(LW_OWNER_GEN_MAX == LW_PROC_GEN_MASK - 1, "all-ones generation is reserved");
_Static_assert((LW_OWNER_MASK & (LW_WORD_STATS | LW_WORD_INCONSISTENT | LW_WORD_WAITERS | LW_WORD_TIMED)) == 0, "flag bits");
LW__CHECK(lw_mutex_obj, word, LW_MUTEX_WORD);
LW__CHECK(lw_mutex_obj, held_since, LW_MUTEX_HELD_SINCE);
LW__CHECK(lw_mutex_obj, acquired, LW_MUTEX_ACQUIRED);
LW__CHECK(lw_mutex_obj, slow, LW_MUTEX_SLOW);
LW__CHECK(lw_mutex_obj, parks, LW_MUTEX_PARKS);
LW__CHECK(lw_mutex_obj, wait_ns, LW_MUTEX_WAIT_NS);
LW__CHECK(lw_mutex_obj, wait_max_ns, LW_MUTEX_WAIT_MAX_NS);
LW__CHECK(lw_mutex_obj, handoff, LW_MUTEX_HANDOFF);
_Static_assert(sizeof(struct lw_mutex_obj) == LW_MUTEX_OBJ_SIZE, "mutex object size");
LW__CHECK(lw_ring_obj, producer_role, LW_RING_PRODUCER_ROLE);
LW__CHECK(lw_ring_obj, consumer_role, LW_RING_CONSUMER_ROLE);
LW__CHECK(lw_ring_obj, tail, LW_RING_TAIL);
LW__CHECK(lw_ring_obj, not_empty, LW_RING_NOT_EMPTY);
LW__CHECK(lw_ring_obj, producer_sleeps, LW_RING_PRODUCER_SLEEPS);
LW__CHECK(lw_ring_obj, producer_wakes, LW_RING_PRODUCER_WAKES);
LW__CHECK(lw_ring_obj, messages_sent, LW_RING_MESSAGES_SENT);
LW__CHECK(lw_ring_obj, head, LW_RING_HEAD);
LW__CHECK(lw_ring_obj, not_full, LW_RING_NOT_FULL);
LW__CHECK(lw_ring_obj, consumer_sleeps, LW_RING_CONSUMER_SLEEPS);
LW__CHECK(lw_ring_obj, consumer_wakes, LW_RING_CONSUMER_WAKES);
LW__CHECK(lw_ring_obj, messages_received, LW_RING_MESSAGES_RECEIVED);
_Static_assert(sizeof(struct lw_ring_obj) == LW_RING_DATA, "ring header size");
LW__CHECK(lw_record, length, LW_REC_LENGTH);
LW__CHECK(lw_record, type, LW_REC_TYPE);
_Static_assert(sizeof(struct lw_record) == LW_REC_HEADER_SIZE, "record header size");
#undef LW__CHECK

/* ---- Error codes ---- */

#define LW_EBASE 1000
#define LW_ENOTREGULAR (LW_EBASE + 1)   /* ErrNotRegularFile */
#define LW_ENOTINIT (LW_EBASE + 2)      /* ErrNotInitialized */
#define LW_EBADMAGIC (LW_EBASE + 3)     /* ErrBadMagic */
#define LW_EBADVERSION (LW_EBASE + 4)   /* ErrBadVersion */
#define LW_EBADSIZE (LW_EBASE + 5)      /* ErrBadSize */
#define LW_EBADCHECKSUM (LW_EBASE + 6)  /* ErrBadChecksum */
#define LW_EOBJNAME (LW_EBASE + 7)      /* ErrObjectName */
#define LW_EOBJKIND (LW_EBASE + 8)      /* ErrObjectKind */
#define LW_EOBJBOUNDS (LW_EBASE + 9)    /* ErrObjectBounds */
#define LW_EOBJALIGN (LW_EBASE + 10)    /* ErrObjectAlignment */
#define LW_EFOREIGNPIDNS (LW_EBASE + 11) /* ErrForeignPIDNamespace */
#define LW_EREGIONFULL (LW_EBASE + 12)  /* ErrRegionFull */
#define LW_ETOOMANYPROCS (LW_EBASE + 13) /* ErrTooManyProcesses */
#define LW_EREGIONBUSY (LW_EBASE + 14)  /* ErrRegionBusy */
#define LW_ETOOSMALL (LW_EBASE + 15)    /* ErrRegionTooSmall */
#define LW_ERINGCORRUPT (LW_EBASE + 16) /* ErrRingCorrupt */
#define LW_EPEERDEAD (LW_EBASE + 17)    /* ErrPeerDead */
#define LW_ERINGBUSY (LW_EBASE + 18)    /* ErrRingBusy */
#define LW_ERINGCLOSED (LW_EBASE + 19)  /* ErrRingClosed */
#define LW_EMSGSIZE (LW_EBASE + 20)     /* ErrMessageTooLarge */
#define LW_EUNSAFEPERMS (LW_EBASE + 21) /* ErrUnsafePermissions */
#define LW_ETRUNCATED (LW_EBASE + 22)   /* ErrTruncated */
#define LW_ECORRUPT (LW_EBASE + 23)     /* ErrCorrupt: a lock word no valid history makes */
#define LW_EPERMITS (LW_EBASE + 24)     /* ErrPermitsMismatch: a semaphore with another permit count */

/* The POSIX codes, as <errno.h> has them on Linux. */
#define LW_EPERM 1            /* EPERM: unlock by a non-holder */
#define LW_EBUSY 16           /* EBUSY: trylock of a held lock; MPSC try call with no room / no message */
#define LW_EINVAL 22          /* EINVAL: a bad argument: NULL, an empty path, a value out of range, a handle of the other role */
#define LW_ETIMEDOUT 110      /* ETIMEDOUT: timed lock or ring call timed out */
#define LW_EOWNERDEAD 130     /* EOWNERDEAD: held; the last holder died */
#define LW_ENOTRECOVERABLE 131 /* ENOTRECOVERABLE: not held; never again */

/* lw_strerror returns a static description of any code these functions
 * return (errno values included; those through strerror). */
const char *lw_strerror(int code);

/* ---- Regions ---- */

typedef struct lw_region lw_region;

/* The region's file lock: processes take flock(2) on the region file to
 * create its header, to attach (every open), to detach (lw_region_close)
 * and to add an object (lw_region_bytes, lw_region_mutex, ring attach, for
 * a name the handle does not know yet). A running process holds it for
 * microseconds; one that is stopped (SIGSTOP, a debugger) or hung while
 * holding it would block everyone else, so no call waits for it longer
 * than the open's init timeout (lw_region_open_init; 2 s by default and
 * for a negative timeout; the opens' wait for the lock counts against the
 * same deadline as their wait for the creator). Past it the call returns
 * LW_ETIMEDOUT having changed nothing (lw_region_close closes nothing and
 * may be called again), and lw_region_lock_holder names the holder. Go
 * twin: ErrFileLockTimeout, FileLockTimeoutError. */

/* lw_region_lock_holder returns the PID that held the region's file lock
 * (from /proc/locks) when the last call of this thread that returned
 * LW_ETIMEDOUT for it gave up, 0 if none did or /proc/locks named no
 * holder; if stopped is not NULL, *stopped is 1 if that process was
 * stopped (state T or t in /proc/PID/stat: it holds the lock until it is
 * continued with SIGCONT or killed), else 0. */
uint32_t lw_region_lock_holder(int *stopped);

/* lw_region_create creates the region file path (a path without a slash is
 * a name under /dev/shm) of size bytes (0: LW_DEFAULT_REGION_SIZE; at
 * least LW_MIN_REGION_SIZE, else LW_ETOOSMALL), mode 0600, attaches to it
 * and stores the handle in *out. EEXIST if the path exists; LW_EINVAL for
 * an empty path. Non-NULL: path, out. Go twin: shm.Create. */
int lw_region_create(const char *path, int64_t size, lw_region **out);

/* lw_region_open opens, validates and attaches to an existing region,
 * waiting up to 2 s for a concurrent creator to publish the header. The
 * checks, in order, and their codes: LW_ENOTREGULAR, LW_EUNSAFEPERMS (a
 * file that group or others may write, or that another user owns, unless
 * sealed against shrinking), LW_ENOTINIT,
 * LW_EBADMAGIC, LW_EBADVERSION, LW_EBADSIZE, LW_EBADCHECKSUM, then each
 * table entry: LW_EOBJNAME, LW_EOBJKIND, LW_EOBJBOUNDS, LW_EOBJALIGN, and
 * last LW_EFOREIGNPIDNS; LW_ETOOMANYPROCS if every process slot is live.
 * Non-NULL: path, out. Go twin: shm.Open. */
int lw_region_open(const char *path, lw_region **out);

/* lw_region_open_init is lw_region_open waiting at most init_timeout_ns
 * nanoseconds for the creator and the region's file lock (0: the default
 * 2 s; negative: do not wait for the creator, and 2 s for the lock, as Go's
 * shm.Options.InitTimeout): LW_ENOTINIT, or LW_ETIMEDOUT for the lock.
 * The handle's later waits for the file lock take init_timeout_ns too.
 * Non-NULL: path, out. */
int lw_region_open_init(const char *path, int64_t init_timeout_ns, lw_region **out);

/* lw_region_open_fd opens the region in the open file fd (a memfd that
 * a Go creator passed down with shm.CreateMemfd and exec.Cmd.ExtraFiles,
 * or any region file), validating and attaching as lw_region_open does,
 * on a new open of the same file through /proc/self/fd (not a duplicate:
 * the region's flock belongs to the open file description, which fd shares
 * with its creator and every process that inherited it): the caller may
 * close fd afterwards. fd must be open for reading and writing (EACCES
 * otherwise, O_PATH included). name is the region's name in messages.
 * Non-NULL: name, out. Go twin: shm.OpenFile. */
int lw_region_open_fd(int fd, const char *name, lw_region **out);

/* lw_region_open_or_create opens path, creating it with size bytes if it
 * does not exist; of racing processes exactly one creates it. Non-NULL:
 * path, out. Go twin: shm.OpenOrCreate. */
int lw_region_open_or_create(const char *path, int64_t size, lw_region **out);

/* lw_region_options adjust how a region is created or opened (Go twin:
 * shm.Options). Zero fields mean the defaults; a NULL options pointer
 * means all of them.
 *  - mode: the permission bits of a file created (0: 0600; the umask is not
 *    applied); bits outside 0777 are LW_EINVAL.
 *  - init_timeout_ns: as lw_region_open_init's.
 *  - allow_unsafe_permissions: non-zero opts in to creating (with such a
 *    mode) or opening a file that group or others may write, or that
 *    another user owns; without it those are LW_EUNSAFEPERMS. Whoever can
 *    write the file can corrupt every lock in it: set it where a group of
 *    cooperating users is meant to share the region. */
typedef struct lw_region_options {
	uint32_t mode;
	int64_t init_timeout_ns;
	int allow_unsafe_permissions;
} lw_region_options;

/* lw_region_create_options, lw_region_open_options and
 * lw_region_open_or_create_options are lw_region_create, lw_region_open
 * and lw_region_open_or_create with options (opts may be NULL). Non-NULL:
 * path, out. Go twins: shm.Create, shm.Open, shm.OpenOrCreate with
 * *shm.Options. */
int lw_region_create_options(const char *path, int64_t size, const lw_region_options *opts, lw_region **out);
int lw_region_open_options(const char *path, const lw_region_options *opts, lw_region **out);
int lw_region_open_or_create_options(const char *path, int64_t size, const lw_region_options *opts, lw_region **out);

/* lw_region_close detaches from the process table, unmaps the region and
 * frees r and its mutex handles. LW_EREGIONBUSY (and nothing is closed)
 * while this process holds one of r's mutexes or a thread is waiting for
 * one. Ring handles must be freed first. If the file was truncated under
 * the mapping, the locks' words went with it and nothing can be released:
 * it unmaps and frees r anyway and returns LW_ETRUNCATED.
 *
 * Handles do not cross fork(2): a child's copy of r names its parent's
 * process-table slot, so the child's holds through it would be the
 * parent's. A child opens the region itself (lw_region_open, or
 * lw_region_open_fd on the inherited descriptor) and may only
 * lw_region_close its copies, which then unmaps them and leaves the
 * parent attached. Non-NULL: r. */
int lw_region_close(lw_region *r);

/* lw_region_size returns the region's size in bytes; lw_region_token this
 * process's owner token (slot << 18 | generation). Both return 0 for a
 * NULL r, which no region gives. */
int64_t lw_region_size(const lw_region *r);
uint32_t lw_region_token(const lw_region *r);

/* lw_region_bytes returns in *out the plain-data object name of size bytes
 * (1 to 2^31), creating it zero-filled if absent: LW_EOBJBOUNDS if it
 * exists with another size, LW_EOBJKIND if it is another kind,
 * LW_EOBJNAME for a bad name (1 to 48 bytes of UTF-8, no control
 * characters), LW_EREGIONFULL, LW_ETRUNCATED (the file is now shorter
 * than the mapping). The memory is shared with every process;
 * use it only under a lock. Non-NULL: r, name, out. Go twin:
 * (*Region).Bytes. */
int lw_region_bytes(lw_region *r, const char *name, size_t size, void **out);

/* ---- shm.Mutex (kind 1) ---- */

typedef struct lw_mutex lw_mutex;

/* lw_region_mutex returns the shm.Mutex named name, creating it unlocked
 * if absent; every call with one name returns the same handle, freed by
 * lw_region_close. Errors as lw_region_bytes. Non-NULL: r, name, out. Go
 * twin: (*Region).Mutex. */
int lw_region_mutex(lw_region *r, const char *name, lw_mutex **out);

/* lw_mutex_lock locks m, waiting as long as it takes. Returns 0 (held),
 * LW_EOWNERDEAD (held; the previous holder process died holding it: repair
 * the data, call lw_mutex_consistent, then unlock), or LW_ENOTRECOVERABLE
 * (not held: a holder after an owner death unlocked without marking it
 * consistent), or LW_ECORRUPT (not held: the word names no owner a region
 * could issue; something outside the protocol wrote it). A dead holder is
 * noticed at a waiter's next liveness check, made every 10 ms whenever the
 * waiter gets a CPU: about 10 ms after the death when CPUs are free, later
 * as the load grows (2 cores, p99: 12 ms at load 5-9, 28-92 ms at load 9-23,
 * 1.2 s at load 24-32). A live one is never robbed.
 * Non-NULL: m. Go twin: LockContext(context.Background()). */
int lw_mutex_lock(lw_mutex *m);

/* lw_mutex_timedlock is lw_mutex_lock giving up after timeout_ns
 * nanoseconds (relative, CLOCK_MONOTONIC) with LW_ETIMEDOUT. A free lock
 * is taken even with timeout 0; with timeout 0 a held lock is checked once
 * for a dead holder. Negative: no limit. Non-NULL: m. */
int lw_mutex_timedlock(lw_mutex *m, int64_t timeout_ns);

/* lw_mutex_timedlock_pid is lw_mutex_timedlock that also stores, on
 * LW_EOWNERDEAD, the dead holder's PID in *dead_pid (0 if unknown).
 * Non-NULL: m; dead_pid may be NULL (then it is lw_mutex_timedlock). */
int lw_mutex_timedlock_pid(lw_mutex *m, int64_t timeout_ns, uint32_t *dead_pid);

/* lw_mutex_trylock takes m if it is free: 0, else LW_EBUSY (held, by a
 * live or a dead holder: it never inspects the holder) or
 * LW_ENOTRECOVERABLE. Never waits. Non-NULL: m. */
int lw_mutex_trylock(lw_mutex *m);

/* lw_mutex_unlock unlocks m: 0, or LW_EPERM (nothing changed) if this
 * process does not hold it. After LW_EOWNERDEAD without
 * lw_mutex_consistent it makes m not recoverable for every process.
 * LW_ECORRUPT if the word keeps changing under its holder (65536 tries).
 * Non-NULL: m. */
int lw_mutex_unlock(lw_mutex *m);

/* lw_mutex_consistent marks m, taken with LW_EOWNERDEAD, repaired
 * (pthread_mutex_consistent): 0, or LW_EPERM if this process does not hold
 * m. Non-NULL: m. Go twin: MarkConsistent. */
int lw_mutex_consistent(lw_mutex *m);

/* lw_mutex_enable_stats turns on the shared statistics (every acquisition,
 * in every process, then takes the slow path). A NULL m: nothing. Go twin:
 * EnableStats. */
void lw_mutex_enable_stats(lw_mutex *m);

/* lw_mutex_word returns the current lock word, for diagnostics; 0 for a
 * NULL m. */
uint32_t lw_mutex_word(const lw_mutex *m);

/* ---- shm.Semaphore (kind 10) ---- */

typedef struct lw_sem lw_sem;

/* lw_sem_recovery says what an acquisition took back from processes that
 * died holding permits: how many processes, how many permits, and the last
 * one's PID (0 if unknown). */
typedef struct {
	int holders;
	int64_t permits;
	uint32_t pid;
} lw_sem_recovery;

/* lw_region_sem returns the shm.Semaphore named name with permits
 * permits (1 to 2^32-1, else LW_EINVAL), creating it with every permit
 * free if absent; LW_EPERMITS if it exists with another number, and
 * LW_ECORRUPT if its words are corrupt. Every call with one name returns
 * the same handle, freed by lw_region_close, which refuses
 * (LW_EREGIONBUSY) while this process holds permits. Every region open and
 * close (C or Go) gives dead processes' permits back, once, telling only
 * the counts. Other errors as lw_region_bytes. Non-NULL: r, name, out. Go
 * twin: (*Region).Semaphore. */
int lw_region_sem(lw_region *r, const char *name, int64_t permits, lw_sem **out);

/* lw_sem_timedacquire takes n permits, waiting at most timeout_ns
 * (negative: no limit), FIFO by ticket, one per process (its other waiters
 * queue behind the ticket holder, holding none). 0: held; LW_EOWNERDEAD:
 * held, and dead processes' permits were taken back on the way (*dead says
 * which, if not NULL; no consistent step: a semaphore has no data of its
 * own); LW_ETIMEDOUT; LW_EINVAL for n < 0 or above the capacity;
 * LW_ECORRUPT for words no valid history makes. Non-NULL: s. Go twin:
 * Acquire. A timed-out waiter withdraws from the queue under the guard (a
 * few stores, or a dead guard holder's detection) after its deadline. */
int lw_sem_timedacquire(lw_sem *s, int64_t n, int64_t timeout_ns, lw_sem_recovery *dead);

/* lw_sem_acquire is lw_sem_timedacquire without a limit. */
int lw_sem_acquire(lw_sem *s, int64_t n, lw_sem_recovery *dead);

/* lw_sem_tryacquire takes n permits if they are free and nobody waits: 0
 * or LW_EOWNERDEAD (held, as above), else LW_EBUSY. It waits for the guard
 * only. Go twin: AcquireNow. */
int lw_sem_tryacquire(lw_sem *s, int64_t n, lw_sem_recovery *dead);

/* lw_sem_release gives back n permits this process holds: 0, LW_EPERM
 * (it holds fewer, by lw_sem_held: nothing changed), LW_EINVAL (n < 0),
 * LW_ECORRUPT (the words are corrupt, or this process's entry records
 * fewer than lw_sem_held: the n permits count as given back, and what the
 * entry still records is freed once this process detaches). */
int lw_sem_release(lw_sem *s, int64_t n);

/* lw_sem_held returns the permits this process holds, counted in process
 * memory as its calls returned them (a corrupt entry does not change it;
 * lw_region_close goes by it); lw_sem_capacity
 * the permits the semaphore has. 0 for a NULL s. */
int64_t lw_sem_held(const lw_sem *s);
int64_t lw_sem_capacity(const lw_sem *s);

/* ---- Shared byte ring (kind 6) ---- */

typedef struct lw_ring lw_ring;

/* lw_region_ring_producer (consumer) attaches this process as the
 * producer (consumer) of the ring name, creating it with capacity bytes of
 * record space (a power of two, LW_RING_MIN_CAPACITY to
 * LW_RING_MAX_CAPACITY; else LW_EOBJBOUNDS, also when it exists with
 * another capacity) if absent. LW_ERINGBUSY if a live process holds the
 * role; a dead one's role is taken over. LW_ERINGCORRUPT for impossible
 * indices. Non-NULL: r, name, out. Go twins: (*Region).RingProducer,
 * RingConsumer. */
int lw_region_ring_producer(lw_region *r, const char *name, size_t capacity, lw_ring **out);
int lw_region_ring_consumer(lw_region *r, const char *name, size_t capacity, lw_ring **out);

/* lw_ring_max_message returns the largest message, capacity - 8 bytes; 0
 * for a NULL q. */
size_t lw_ring_max_message(const lw_ring *q);

/* lw_ring_send copies len bytes as one message into the ring, waiting
 * while it lacks room, at most timeout_ns (negative: no limit). 0 once
 * published; LW_ERINGCLOSED, LW_EPEERDEAD (no room and the consumer died),
 * LW_EMSGSIZE, LW_ERINGCORRUPT, LW_ETIMEDOUT, LW_EINVAL on a consumer
 * handle; in every error case nothing was sent. Non-NULL: q; msg unless
 * len is 0 (an empty message). */
int lw_ring_send(lw_ring *q, const void *msg, size_t len, int64_t timeout_ns);

/* lw_ring_receive removes the oldest message into buf (bufsize bytes),
 * storing its length in *len, waiting while the ring is empty, at most
 * timeout_ns. 0, or: LW_ERINGCLOSED (closed and drained), LW_EPEERDEAD
 * (the producer died and every message it published was received),
 * LW_ERINGCORRUPT (never reads outside the ring), LW_ETIMEDOUT,
 * LW_EMSGSIZE (bufsize < the message; *len says how much is needed,
 * nothing removed), LW_EINVAL on a producer handle. Non-NULL: q, len; buf
 * unless bufsize is 0 (to receive an empty message, or to learn a
 * message's length from LW_EMSGSIZE). */
int lw_ring_receive(lw_ring *q, void *buf, size_t bufsize, size_t *len, int64_t timeout_ns);

/* lw_ring_close ends the stream (both sides then get LW_ERINGCLOSED, the
 * consumer after draining) and gives up the role; lw_ring_detach gives up
 * the role only, so another process may carry on. lw_ring_free detaches if
 * still attached and frees q. Each does nothing for a NULL q. */
void lw_ring_close(lw_ring *q);
void lw_ring_detach(lw_ring *q);
void lw_ring_free(lw_ring *q);

/* ---- Shared MPSC byte queue (kind 11) ----
 * Many producers (threads or processes), one consumer; variable-length
 * messages. Named lw_mpsc, not lw_queue: the name carries the contract
 * (one consumer at a time) and matches the Go twin, shm.MPSCProducer and
 * MPSCConsumer. A producer dead between claim and publish costs its one
 * record (skipped, counted by lw_mpsc_lost); none is delivered torn. */
typedef struct lw_mpsc lw_mpsc;

/* lw_region_mpsc_producer attaches a producer (any number may) and
 * lw_region_mpsc_consumer the consumer (LW_ERINGBUSY if a live process
 * is it; a dead one's role is taken over) of queue name, creating it with
 * capacity bytes of records (a power of two, LW_MPSC_MIN_CAPACITY to
 * LW_MPSC_MAX_CAPACITY, else LW_EOBJBOUNDS, also when it exists with
 * another) if absent. LW_ECORRUPT for impossible indices. Non-NULL: r,
 * name, out. A handle is used by one thread at a time. */
int lw_region_mpsc_producer(lw_region *r, const char *name, size_t capacity, lw_mpsc **out);
int lw_region_mpsc_consumer(lw_region *r, const char *name, size_t capacity, lw_mpsc **out);

/* lw_mpsc_max_message: capacity - 16 bytes; 0 for NULL. lw_mpsc_lost stores
 * in *lost the records skipped since creation: 0, LW_EINVAL (NULL), or
 * LW_ECORRUPT when a counter is impossible (more records counted than the
 * queue's indices have passed). */
size_t lw_mpsc_max_message(const lw_mpsc *q);
int lw_mpsc_lost(lw_mpsc *q, uint64_t *lost);

/* lw_mpsc_send copies len bytes into the queue as one message, waiting
 * while it lacks room, at most timeout_ns (negative: no limit); sent if
 * there is room even with a timeout of 0. 0 once published, or, with
 * nothing sent: LW_ERINGCLOSED (the consumer closed the queue),
 * LW_EPEERDEAD (no room, the consumer died), LW_EMSGSIZE, LW_ECORRUPT,
 * LW_ETIMEDOUT, LW_EINVAL (a consumer handle). lw_mpsc_try_send never
 * sleeps: LW_EBUSY when there is no room now. Non-NULL: q; msg unless
 * len is 0. */
int lw_mpsc_send(lw_mpsc *q, const void *msg, size_t len, int64_t timeout_ns);
int lw_mpsc_try_send(lw_mpsc *q, const void *msg, size_t len);

/* lw_mpsc_receive removes the oldest published message into buf, storing
 * its length in *len, waiting while there is none, at most timeout_ns.
 * 0, or: LW_EMSGSIZE (bufsize too small; *len says how much is needed,
 * nothing removed), LW_ECORRUPT (never reads outside the queue),
 * LW_ERINGCLOSED (this handle was closed), LW_ETIMEDOUT, LW_EINVAL (a
 * producer handle). lw_mpsc_try_receive: LW_EBUSY when none is ready.
 * Non-NULL: q, len; buf unless bufsize is 0. */
int lw_mpsc_receive(lw_mpsc *q, void *buf, size_t bufsize, size_t *len, int64_t timeout_ns);
int lw_mpsc_try_receive(lw_mpsc *q, void *buf, size_t bufsize, size_t *len);

/* lw_mpsc_close: on the consumer, closes the queue (producers then get
 * LW_ERINGCLOSED until a consumer attaches; what is queued stays) and
 * gives up the role; on a producer, gives up that handle. lw_mpsc_detach
 * gives up the consumer role without closing. lw_mpsc_free detaches if
 * still attached and frees q. Each does nothing for a NULL q. */
void lw_mpsc_close(lw_mpsc *q);
void lw_mpsc_detach(lw_mpsc *q);
void lw_mpsc_free(lw_mpsc *q);

#ifdef __cplusplus
}
#endif

#endif /* LOCKWORD_H */
