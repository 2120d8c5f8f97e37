//go:build ignore

/*
 * wait.c: Time and sleeping: the monotonic clock, deadlines and the slices a sleep
 * is cut into, the shared futex (never FUTEX_PRIVATE_FLAG: the waker is
 * usually another process) and the CPU pause. Nothing here knows a region.
 *
 * Go twin: internal/wait, shm/wait.go, internal/backoff.
 */
#include "internal.h"

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

/* futex_wait_bits is futex_wait on the shared futex, filed under bits:
 * only a futex_wake_bits whose bits meet them (or a plain futex_wake)
 * wakes it. FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time. */
static void futex_wait_bits(_Atomic uint32_t *addr, uint32_t val, uint32_t bits, int64_t timeout_ns) {
	struct timespec ts, *tsp = NULL;
	if (timeout_ns >= 0) {
		int64_t at = mono_ns() + timeout_ns;
		ts.tv_sec = at / 1000000000;
		ts.tv_nsec = at % 1000000000;
		tsp = &ts;
	}
	syscall(SYS_futex, (void *)addr, FUTEX_WAIT_BITSET, val, tsp, NULL, bits);
}

/* futex_wake_bits wakes up to n sleepers of the shared futex at addr
 * whose bits meet bits (Go: wakeSharedBits). */
static void futex_wake_bits(_Atomic uint32_t *addr, int n, uint32_t bits) {
	syscall(SYS_futex, (void *)addr, FUTEX_WAKE_BITSET, n, NULL, NULL, bits);
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
