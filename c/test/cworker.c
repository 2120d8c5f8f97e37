/*
 * cworker: the C side of lockword's cross-language tests and of
 * `lockword torture -lock shared-c`. One binary, one subcommand per job:
 *
 *   cworker torture REGION PROC PROCS WORKERS VALUE WORK KILL BROKEN ITERS IDS
 *       a torture worker process: the C twin of workerMain in
 *       cmd/lockword/internal/torture/procs_worker.go (same shared state,
 *       st* offsets); IDS is a comma-separated list of worker ids, one
 *       thread each. BROKEN 1 takes the lock by storing the token
 *       without looking at the word: the mixed torture must then FAIL.
 *   cworker open PATH...          print each open's code: "CODE NAME"
 *   cworker stress THREADS ITERS [broken]  in-process stress on a fresh
 *                                 region (broken: a trylock ignoring the word)
 *   cworker send REGION RING CAP COUNT   variable-length messages, checked
 *   cworker recv REGION RING CAP COUNT   by the receiver byte for byte
 *   cworker hold REGION LOCK      lock, print "held", then sleep (to be killed)
 *   cworker api REGION            check the return codes of the API
 *   cworker nullargs REGION       call every function with each pointer
 *                                 argument NULL in turn, each call in a child
 *   cworker wait REGION LOCK [abandon]  lock (a holder is expected to die); print
 *                                 "CODE DEADPID MS MONO_NS": the wait in ms,
 *                                 and CLOCK_MONOTONIC when it ended; abandon:
 *                                 unlock without lw_mutex_consistent, then
 *                                 print the codes of timedlock(0) and trylock
 *   cworker create REGION [SIZE]  create a region with "m", "data", "q"
 *   cworker bench-child REGION I N  a child of bench/cross_test.go
 *   cworker flocked REGION MS     open REGION with an init timeout of MS ms,
 *                                 print "opened", and after a line on stdin
 *                                 (another process then holds the region's
 *                                 file lock) try an open, a new object and
 *                                 a close, printing "CALL CODE MS HOLDER
 *                                 STOPPED" for each (lw_region_lock_holder);
 *                                 after another line, close: "close CODE"
 */
#define _GNU_SOURCE
#include "../lockword.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The torture's shared state (cmd/lockword/internal/torture/procs_worker.go). */
enum {
	st_counter = 0,
	st_owner = 8,
	st_intent_active = 16,
	st_intent_worker = 24,
	st_intent_counter = 32,
	st_intent_committed = 40,
	st_violations = 48,
	st_recoveries = 56,
	st_rolled_back = 64,
	st_last_recovery = 72,
	st_go = 80,
	st_stop = 88,
	st_recovering = 96,
	st_detected = 104,
	st_ready = 128,
	recovery_log = 4096,
	kill_window_steps = 2000,
};

static const char *lock_name = "torture", *state_name = "torture-state";

static int64_t now_unix_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

_Noreturn static void die(const char *what, int code) {
	fprintf(stderr, "cworker %d: %s: %s\n", (int)getpid(), what, lw_strerror(code));
	exit(1);
}

/* The state words are plain memory, read and written under the lock; the
 * volatile accesses keep the compiler from caching them across the lock
 * calls of the broken variant, which are not atomics. */
static inline uint64_t get(unsigned char *st, size_t off) { return *(volatile uint64_t *)(void *)(st + off); }
static inline void put(unsigned char *st, size_t off, uint64_t v) { *(volatile uint64_t *)(void *)(st + off) = v; }

static uint64_t busy_work(uint64_t x, int steps) {
	for (int i = 0; i < steps; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	return x;
}

struct torture {
	lw_region *r;
	lw_mutex *m;
	unsigned char *st;
	int procs, workers, work;
	uint64_t value;
	int64_t iters;
	bool kill, broken;
};

static size_t state_size(int procs, int workers) { return st_ready + 8 * (size_t)procs + 8 * (size_t)(workers + 1) + 8 * recovery_log; }
static size_t committed_off(int procs, int id) { return st_ready + 8 * (size_t)procs + 8 * (size_t)id; }
static size_t recovered_off(int procs, int workers, uint64_t i) {
	return st_ready + 8 * (size_t)procs + 8 * (size_t)(workers + 1) + 8 * (size_t)(i % recovery_log);
}

/* note appends a line to $LOCKWORD_TORTURE_LANG_LOG, if set: which
 * processes are C, and which recoveries C workers made, for the tests that
 * check that holders of each language were recovered by each. */
static void note(const char *what, uint32_t pid) {
	const char *path = getenv("LOCKWORD_TORTURE_LANG_LOG");
	if (!path)
		return;
	FILE *f = fopen(path, "a");
	if (f) {
		fprintf(f, "c %s %d %u\n", what, (int)getpid(), pid);
		fclose(f);
	}
}

/* repair_state and recover_state are repairState and recoverState. */
static void recover_state(struct torture *t, uint32_t dead_pid) {
	unsigned char *st = t->st;
	put(st, st_detected, (uint64_t)now_unix_ns());
	put(st, st_recovering, dead_pid);
	if (get(st, st_intent_active) == 1) {
		uint64_t w = get(st, st_intent_worker);
		if (w >= 1 && w <= (uint64_t)t->workers)
			put(st, committed_off(t->procs, (int)w), get(st, st_intent_committed));
		put(st, st_counter, get(st, st_intent_counter));
		put(st, st_intent_active, 0);
		put(st, st_rolled_back, get(st, st_rolled_back) + 1);
	}
	put(st, st_owner, 0);
	int err = lw_mutex_consistent(t->m);
	if (err)
		die("consistent", err);
	note("recovered", dead_pid);
	uint64_t n = get(st, st_recoveries);
	put(st, recovered_off(t->procs, t->workers, n), dead_pid);
	put(st, st_last_recovery, (uint64_t)now_unix_ns());
	put(st, st_recoveries, n + 1);
}

/* section is procSection: the counter, the owner slot, the intent record. */
static bool section(struct torture *t, int id, int steps, uint64_t *sink) {
	unsigned char *st = t->st;
	if (get(st, st_owner) != 0)
		put(st, st_violations, get(st, st_violations) + 1);
	put(st, st_owner, (uint64_t)id);
	if (get(st, st_stop) != 0) {
		put(st, st_owner, 0);
		return true;
	}
	size_t c_off = committed_off(t->procs, id);
	uint64_t counter = get(st, st_counter), committed = get(st, c_off);
	put(st, st_intent_worker, (uint64_t)id);
	put(st, st_intent_counter, counter);
	put(st, st_intent_committed, committed);
	put(st, st_intent_active, 1);
	*sink = busy_work(*sink, steps);
	if (t->broken)
		sched_yield(); /* widen the window, as the none kind does */
	put(st, st_counter, counter + t->value);
	if (t->kill)
		*sink = busy_work(*sink, kill_window_steps);
	put(st, c_off, committed + t->value);
	put(st, st_intent_active, 0);
	if (get(st, st_owner) != (uint64_t)id)
		put(st, st_violations, get(st, st_violations) + 1);
	put(st, st_owner, 0);
	return false;
}

struct worker_arg {
	struct torture *t;
	int id;
	int failed;
};

static void *torture_worker(void *p) {
	struct worker_arg *a = p;
	struct torture *t = a->t;
	uint64_t rng = (uint64_t)a->id * 0x9E3779B97F4A7C15u ^ (uint64_t)getpid(), sink = 0;
	for (int64_t n = 0; t->iters == 0 || n < t->iters; n++) {
		int steps = 0;
		if (t->work > 0) {
			rng = rng * 6364136223846793005u + 1442695040888963407u;
			steps = (int)((rng >> 33) % (uint64_t)(t->work + 1));
		}
		if (t->broken) {
			/* A trylock that ignores the word: take it if free,
			 * else go in anyway. Unlock below clears it if ours. */
			(void)lw_mutex_trylock(t->m);
		} else {
			uint32_t dead = 0;
			int err = lw_mutex_timedlock_pid(t->m, -1, &dead);
			if (err == LW_EOWNERDEAD)
				recover_state(t, dead);
			else if (err) {
				fprintf(stderr, "cworker %d: lock: %s\n", (int)getpid(), lw_strerror(err));
				a->failed = 1;
				return NULL;
			}
		}
		bool stop = section(t, a->id, steps, &sink);
		int err = lw_mutex_unlock(t->m);
		if (err && !t->broken) {
			fprintf(stderr, "cworker %d: unlock: %s\n", (int)getpid(), lw_strerror(err));
			a->failed = 1;
			return NULL;
		}
		if (stop)
			break;
	}
	if (sink == 42)
		fputc(' ', stderr);
	return NULL;
}

static int cmd_torture(int argc, char **argv) {
	if (argc != 12) {
		fprintf(stderr, "usage: cworker torture REGION PROC PROCS WORKERS VALUE WORK KILL BROKEN ITERS IDS\n");
		return 2;
	}
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	struct torture t = {0};
	int proc = atoi(argv[3]);
	t.procs = atoi(argv[4]);
	t.workers = atoi(argv[5]);
	t.value = strtoull(argv[6], NULL, 10);
	t.work = atoi(argv[7]);
	t.kill = atoi(argv[8]) != 0;
	t.broken = atoi(argv[9]) != 0;
	t.iters = strtoll(argv[10], NULL, 10);
	/* A memfd region (path "memfd:NAME") comes as the inherited fd 3, as
	 * for the Go workers (openTortureRegion). */
	int err = strncmp(argv[2], "memfd:", 6) == 0 ? lw_region_open_fd(3, argv[2], &t.r) : lw_region_open(argv[2], &t.r);
	if (err)
		die("open region", err);
	if ((err = lw_region_mutex(t.r, lock_name, &t.m)) != 0)
		die("mutex", err);
	void *st;
	if ((err = lw_region_bytes(t.r, state_name, state_size(t.procs, t.workers), &st)) != 0)
		die("state", err);
	t.st = st;
	int ids[1024], n = 0;
	for (char *s = argv[11], *tok; n < 1024 && (tok = strtok(s, ",")) != NULL; s = NULL)
		ids[n++] = atoi(tok);
	note("start", 0);
	if (proc >= 0)
		put(t.st, st_ready + 8 * (size_t)proc, 1);
	while (get(t.st, st_go) == 0)
		usleep(100);
	pthread_t th[1024];
	struct worker_arg args[1024];
	for (int i = 0; i < n; i++) {
		args[i] = (struct worker_arg){&t, ids[i], 0};
		if (pthread_create(&th[i], NULL, torture_worker, &args[i]) != 0)
			die("pthread_create", errno);
	}
	int failed = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		failed |= args[i].failed;
	}
	if (failed)
		return 1;
	if ((err = lw_region_close(t.r)) != 0 && !t.broken)
		die("close", err);
	return 0;
}

static int cmd_open(int argc, char **argv) {
	for (int i = 2; i < argc; i++) {
		lw_region *r;
		int err = lw_region_open_init(argv[i], -1, &r);
		if (err == 0) {
			/* Touch an object the opener accepted. */
			lw_mutex *m;
			if (lw_region_mutex(r, "m", &m) == 0)
				(void)lw_mutex_word(m);
			err = lw_region_close(r);
		}
		printf("%d %s\n", err, lw_strerror(err));
	}
	return 0;
}

/* ---- in-process stress ---- */

struct stress {
	lw_mutex *m;
	uint64_t *counter, *owner;
	int iters;
	bool broken; /* a trylock that ignores the word: the checks must fail */
	_Atomic int violations;
};

struct stress_arg {
	struct stress *s;
	int id;
};

static void *stress_thread(void *p) {
	struct stress_arg *a = p;
	struct stress *s = a->s;
	uint64_t x = (uint64_t)a->id;
	for (int i = 0; i < s->iters; i++) {
		int err = 0;
		if (s->broken) {
			(void)lw_mutex_trylock(s->m);
			goto held;
		}
		switch (i % 3) {
		case 0:
			err = lw_mutex_lock(s->m);
			break;
		case 1:
			while ((err = lw_mutex_trylock(s->m)) == LW_EBUSY)
				sched_yield();
			break;
		default:
			while ((err = lw_mutex_timedlock(s->m, 1000000)) == LW_ETIMEDOUT)
				;
			break;
		}
		if (err)
			die("stress lock", err);
	held:
		if (*s->owner != 0)
			atomic_fetch_add(&s->violations, 1);
		*s->owner = (uint64_t)a->id;
		uint64_t c = *s->counter;
		x = busy_work(x, (int)(x >> 60));
		if (s->broken && i % 16 == 0)
			sched_yield(); /* widen the window, as the torture's none kind does */
		*s->counter = c + 1;
		if (*s->owner != (uint64_t)a->id)
			atomic_fetch_add(&s->violations, 1);
		*s->owner = 0;
		if ((err = lw_mutex_unlock(s->m)) != 0 && !s->broken)
			die("stress unlock", err);
	}
	return NULL;
}

static int cmd_stress(int argc, char **argv) {
	if (argc != 4 && argc != 5)
		return 2;
	int threads = atoi(argv[2]), iters = atoi(argv[3]);
	bool broken = argc == 5 && !strcmp(argv[4], "broken");
	char path[128];
	snprintf(path, sizeof path, "lockword-cstress-%d", (int)getpid());
	lw_region *r;
	int err = lw_region_create(path, 0, &r);
	if (err)
		die("create", err);
	struct stress s = {.iters = iters, .broken = broken};
	void *b;
	if ((err = lw_region_mutex(r, "m", &s.m)) != 0 || (err = lw_region_bytes(r, "data", 16, &b)) != 0)
		die("objects", err);
	s.counter = b;
	s.owner = (uint64_t *)b + 1;
	lw_mutex_enable_stats(s.m);
	pthread_t th[256];
	struct stress_arg args[256];
	if (threads > 256)
		threads = 256;
	for (int i = 0; i < threads; i++) {
		args[i] = (struct stress_arg){&s, i + 1};
		pthread_create(&th[i], NULL, stress_thread, &args[i]);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	uint64_t want = (uint64_t)threads * (uint64_t)iters;
	printf("counter %llu want %llu violations %d\n", (unsigned long long)*s.counter, (unsigned long long)want, s.violations);
	int bad = *s.counter != want || s.violations != 0;
	if ((err = lw_region_close(r)) != 0)
		die("close", err);
	char full[160];
	snprintf(full, sizeof full, "/dev/shm/%s", path);
	unlink(full);
	return bad;
}

/* ---- rings ---- */

/* message i: length and bytes derived from i alone, so that the receiver
 * checks every byte without being told. */
static size_t msg_len(uint64_t i, size_t max) {
	size_t span = max < 256 ? max : 256;
	return 1 + (size_t)((i * 2654435761u >> 7) % span);
}

static void msg_fill(unsigned char *b, size_t n, uint64_t i) {
	memcpy(b, &i, n < 8 ? n : 8);
	for (size_t k = 8; k < n; k++)
		b[k] = (unsigned char)(i * 31 + k);
}

/* attach_ring opens REGION (argv[2]) and attaches to ring argv[3] of
 * capacity argv[4] as the producer or the consumer, then says "attached". */
static lw_ring *attach_ring(char **argv, bool producer, lw_region **r) {
	int err = lw_region_open(argv[2], r);
	if (err)
		die("open", err);
	size_t cap = strtoull(argv[4], NULL, 10);
	lw_ring *q;
	err = producer ? lw_region_ring_producer(*r, argv[3], cap, &q) : lw_region_ring_consumer(*r, argv[3], cap, &q);
	if (err)
		die(producer ? "producer" : "consumer", err);
	printf("attached\n");
	fflush(stdout);
	return q;
}

static int cmd_send(int argc, char **argv) {
	if (argc != 6)
		return 2;
	lw_region *r;
	lw_ring *q = attach_ring(argv, true, &r);
	uint64_t count = strtoull(argv[5], NULL, 10);
	size_t max = lw_ring_max_message(q);
	unsigned char *buf = malloc(max);
	int err;
	for (uint64_t i = 0; i < count; i++) {
		size_t n = msg_len(i, max);
		msg_fill(buf, n, i);
		if ((err = lw_ring_send(q, buf, n, 30000000000)) != 0)
			die("send", err);
	}
	lw_ring_close(q);
	lw_ring_free(q);
	free(buf);
	if ((err = lw_region_close(r)) != 0)
		die("close", err);
	return 0;
}

static int cmd_recv(int argc, char **argv) {
	if (argc != 6)
		return 2;
	lw_region *r;
	lw_ring *q = attach_ring(argv, false, &r);
	int err;
	uint64_t count = strtoull(argv[5], NULL, 10), got = 0, bytes = 0;
	size_t max = lw_ring_max_message(q);
	unsigned char *buf = malloc(max), *want = malloc(max);
	for (;;) {
		size_t n;
		err = lw_ring_receive(q, buf, max, &n, 30000000000);
		if (err)
			break;
		size_t wn = msg_len(got, max);
		msg_fill(want, wn, got);
		if (n != wn || memcmp(buf, want, n) != 0) {
			printf("FAIL message %llu: %zu bytes, want %zu\n", (unsigned long long)got, n, wn);
			return 1;
		}
		got++;
		bytes += n;
	}
	/* The end: closed (all sent) or the producer died mid-stream. */
	printf("received %llu bytes %llu end %d %s\n", (unsigned long long)got, (unsigned long long)bytes, err, lw_strerror(err));
	lw_ring_free(q);
	free(buf);
	free(want);
	lw_region_close(r);
	if (err == LW_ERINGCLOSED && got != count) {
		printf("FAIL closed after %llu of %llu\n", (unsigned long long)got, (unsigned long long)count);
		return 1;
	}
	return err == LW_ERINGCLOSED || err == LW_EPEERDEAD ? 0 : 1;
}

/* cmd_create makes a region from C, with a mutex "m", bytes "data" and a
 * ring "q", for Go to open. */
static int cmd_create(int argc, char **argv) {
	if (argc != 3 && argc != 4)
		return 2;
	lw_region *r;
	lw_mutex *m;
	lw_ring *q;
	void *b;
	int err = lw_region_create(argv[2], argc == 4 ? strtoll(argv[3], NULL, 10) : 0, &r);
	if (err || (err = lw_region_mutex(r, "m", &m)) != 0 || (err = lw_region_bytes(r, "data", 100, &b)) != 0 ||
	    (err = lw_region_ring_producer(r, "q", 4096, &q)) != 0)
		die("create", err);
	memcpy(b, "from C", 6);
	if ((err = lw_ring_send(q, "hello from C", 12, 0)) != 0)
		die("send", err);
	lw_ring_free(q);
	if ((err = lw_region_close(r)) != 0)
		die("close", err);
	return 0;
}

/* cmd_bench_child is a child of bench/cross_test.go's contend: the same
 * region words as its Go children (bytes "data": counter at 0, go at 64,
 * ready at 128+8i, done at 256+8i; mutex "bench"), N acquisitions. */
static int cmd_bench_child(int argc, char **argv) {
	if (argc != 5)
		return 2;
	lw_region *r;
	lw_mutex *m;
	void *b;
	int err = lw_region_open(argv[2], &r);
	if (err || (err = lw_region_mutex(r, "bench", &m)) != 0 || (err = lw_region_bytes(r, "data", 512, &b)) != 0)
		die("bench child", err);
	unsigned char *data = b;
	size_t idx = strtoull(argv[3], NULL, 10);
	uint64_t n = strtoull(argv[4], NULL, 10);
	put(data, 128 + 8 * idx, 1);
	while (get(data, 64) == 0)
		usleep(50);
	for (uint64_t i = 0; i < n; i++) {
		if ((err = lw_mutex_lock(m)) != 0)
			die("bench lock", err);
		(*(uint64_t *)(void *)data)++;
		lw_mutex_unlock(m);
	}
	put(data, 256 + 8 * idx, (uint64_t)now_unix_ns());
	lw_region_close(r);
	return 0;
}

/* ---- death detection ---- */

/* open_mutex opens REGION and its mutex NAME, or dies. */
static lw_mutex *open_mutex(const char *path, const char *name, lw_region **r) {
	lw_mutex *m;
	int err = lw_region_open(path, r);
	if (err || (err = lw_region_mutex(*r, name, &m)) != 0)
		die("open", err);
	return m;
}

static int cmd_hold(int argc, char **argv) {
	if (argc != 4)
		return 2;
	lw_region *r;
	lw_mutex *m = open_mutex(argv[2], argv[3], &r);
	int err = lw_mutex_lock(m);
	if (err == LW_EOWNERDEAD)
		err = lw_mutex_consistent(m);
	if (err)
		die("lock", err);
	printf("held\n");
	fflush(stdout);
	for (;;)
		pause();
}

static int cmd_wait(int argc, char **argv) {
	if (argc != 4 && argc != 5)
		return 2;
	lw_region *r;
	lw_mutex *m = open_mutex(argv[2], argv[3], &r);
	int err;
	printf("waiting\n");
	fflush(stdout);
	int64_t t0 = mono_ms();
	uint32_t dead = 0;
	err = lw_mutex_timedlock_pid(m, 20000000000, &dead);
	int64_t ms = mono_ms() - t0;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("%d %u %lld %lld\n", err, dead, (long long)ms, (long long)ts.tv_sec * 1000000000 + ts.tv_nsec);
	bool abandon = argc == 5 && !strcmp(argv[4], "abandon");
	if (err == 0 || err == LW_EOWNERDEAD) {
		if (err == LW_EOWNERDEAD && !abandon)
			lw_mutex_consistent(m);
		lw_mutex_unlock(m);
	}
	if (abandon) /* unlocked without repair: not recoverable, for all */
		printf("%d %d\n", lw_mutex_timedlock(m, 0), lw_mutex_trylock(m));
	lw_region_close(r);
	return 0;
}

#include "cworker_api.c"

#include "cworker_nullargs.c"

#include "cworker_sem.c"

#include "cworker_deadlock.c"
#include "cworker_mpsc.c"

static void flocked_report(const char *call, int code, int64_t start_ms) {
	int stopped = -1;
	uint32_t pid = lw_region_lock_holder(&stopped);
	printf("%s %d %lld %u %d\n", call, code, (long long)(mono_ms() - start_ms), pid, stopped);
	fflush(stdout);
}

static int cmd_flocked(int argc, char **argv) {
	if (argc != 4)
		return 2;
	int64_t timeout_ns = strtoll(argv[3], NULL, 10) * 1000000;
	lw_region *r, *r2;
	lw_mutex *m;
	char line[64];
	int err = lw_region_open_init(argv[2], timeout_ns, &r);
	if (err)
		die("open", err);
	printf("opened\n");
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return 1;
	int64_t start = mono_ms();
	err = lw_region_open_init(argv[2], timeout_ns, &r2);
	if (err == 0)
		lw_region_close(r2);
	flocked_report("open", err, start);
	start = mono_ms();
	flocked_report("mutex", lw_region_mutex(r, "new", &m), start);
	start = mono_ms();
	flocked_report("close", lw_region_close(r), start);
	if (!fgets(line, sizeof line, stdin))
		return 1;
	printf("close %d\n", lw_region_close(r));
	return 0;
}

static const struct {
	const char *name;
	int (*run)(int, char **);
} commands[] = {
	{"torture", cmd_torture}, {"open", cmd_open}, {"stress", cmd_stress}, {"send", cmd_send}, {"recv", cmd_recv},
	{"hold", cmd_hold}, {"wait", cmd_wait}, {"create", cmd_create}, {"bench-child", cmd_bench_child}, {"api", cmd_api},
	{"nullargs", cmd_nullargs}, {"flocked", cmd_flocked}, {"sem-hold", cmd_sem_hold}, {"sem-acquire", cmd_sem_acquire},
	{"sem-open-close", cmd_sem_open_close}, {"sem-release-after", cmd_sem_release_after},
	{"sem-stress", cmd_sem_stress}, {"sem-torture", cmd_sem_torture}, {"cycle", cmd_cycle},
	{"wait-then-hold", cmd_wait_then_hold},
	{"mpsc-send", cmd_mpsc_send},
	{"mpsc-recv", cmd_mpsc_recv}, {"mpsc-stress", cmd_mpsc_stress},
};

int main(int argc, char **argv) {
	for (size_t i = 0; argc >= 2 && i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc, argv);
	fprintf(stderr, "usage: cworker torture|open|stress|send|recv|hold|wait|create|bench-child ...\n");
	return 2;
}
