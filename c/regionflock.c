//go:build ignore

/*
 * regionflock.c: the region's file lock (flock), under which a process claims its
 * process-table slot and objects are created, taken with a deadline so
 * that a stopped holder cannot block every other process; and an open's
 * deadlines.
 *
 * Go twin: shm/regionflock.go.
 */
#include "internal.h"

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
