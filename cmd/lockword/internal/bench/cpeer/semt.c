/* semt.c: the POSIX sem_t peer of `lockword bench`'s shm.Semaphore
 * row, built with the C compiler at run time (../semt.go) and run as a
 * cross-process bench child, speaking the Go children's protocol
 * (internal/startgate; procs.go's child): its spec is the JSON in
 * LOCKWORD_BENCH_CHILD; it prints "ready", reads the start time (Unix ns)
 * on stdin, takes and gives back one permit of a pshared sem_t until
 * start + duration, incrementing a plain counter under it with the spin
 * steps of the Go children between read and write, times one wait in 32,
 * and prints one JSON childResult line (its Histogram in hist.go's
 * buckets). libc only.
 *
 *   semt init FILE   make FILE: a sem_t of one permit, then the counter
 *   semt             a child (the spec names the directory holding FILE)
 *
 * FILE's layout (semt.go reads the counter): the sem_t at 0, the counter
 * (uint64, native order) at 64. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct shared {
	sem_t sem;
	_Alignas(64) volatile uint64_t counter; /* at 64 */
};

enum { sub_bits = 4, sub_buckets = 1 << sub_bits, hist_buckets = (64 - sub_bits) * sub_buckets, sample_every = 32 };

static uint64_t counts[hist_buckets];
static uint64_t hist_n;
static int64_t hist_min, hist_max;

/* bucket_of is hist.go's bucketOf. */
static int bucket_of(uint64_t u) {
	if (u < sub_buckets)
		return (int)u;
	int shift = 64 - __builtin_clzll(u) - sub_bits - 1;
	return (shift + 1) * sub_buckets + (int)(u >> shift) - sub_buckets;
}

static void record(int64_t ns) {
	if (ns < 0)
		ns = 0;
	counts[bucket_of((uint64_t)ns)]++;
	if (hist_n == 0 || ns < hist_min)
		hist_min = ns;
	if (ns > hist_max)
		hist_max = ns;
	hist_n++;
}

static int64_t clock_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* spin is measure.go's spin: the critical section's busy work. */
static int64_t spin(int64_t n) {
	int64_t x = 1;
	for (int64_t i = 0; i < n; i++)
		x = x * 31 + i;
	return x;
}

static volatile int64_t sink;

/* spec_int returns the integer after "key": in the JSON spec, or -1. */
static int64_t spec_int(const char *spec, const char *key) {
	const char *p = strstr(spec, key);
	return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

static struct shared *map_file(const char *path, int flags) {
	int fd = open(path, flags, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(struct shared)) != 0) {
		perror(path);
		return NULL;
	}
	struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (s == MAP_FAILED) {
		perror("mmap");
		return NULL;
	}
	return s;
}

static int child(const char *spec) {
	/* The directory is a Go temporary directory: no quote or backslash
	 * to unescape; refuse one rather than misread it. */
	const char *d = strstr(spec, "\"dir\":\"");
	if (!d)
		return fprintf(stderr, "semt: no dir in spec\n"), 1;
	d += strlen("\"dir\":\"");
	size_t dn = strcspn(d, "\"\\");
	if (d[dn] != '"')
		return fprintf(stderr, "semt: dir needs unescaping\n"), 1;
	char path[4096];
	if (dn + sizeof "/semt" > sizeof path)
		return fprintf(stderr, "semt: dir too long\n"), 1;
	memcpy(path, d, dn);
	strcpy(path + dn, "/semt");
	int64_t dur = spec_int(spec, "\"duration\":"), inside = spec_int(spec, "\"Inside\":"),
		outside = spec_int(spec, "\"Outside\":");
	if (dur <= 0 || inside < 0 || outside < 0)
		return fprintf(stderr, "semt: bad spec %s\n", spec), 1;
	struct shared *s = map_file(path, O_RDWR);
	if (!s)
		return 1;
	printf("ready\n");
	fflush(stdout);
	long long start;
	if (scanf("%lld", &start) != 1)
		return fprintf(stderr, "semt: no start time\n"), 1;
	struct timespec at = {.tv_sec = start / 1000000000, .tv_nsec = start % 1000000000};
	while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL) == EINTR)
		;
	int64_t end = start + dur, ops = 0, local = 0;
	for (;;) {
		int timed = ops % sample_every == 0;
		int64_t t0 = timed ? clock_ns(CLOCK_MONOTONIC) : 0;
		while (sem_wait(&s->sem) != 0)
			if (errno != EINTR)
				return perror("sem_wait"), 1;
		if (timed)
			record(clock_ns(CLOCK_MONOTONIC) - t0);
		uint64_t v = s->counter;
		local += spin(inside);
		s->counter = v + 1;
		if (sem_post(&s->sem) != 0)
			return perror("sem_post"), 1;
		ops++;
		local += spin(outside);
		if (timed && clock_ns(CLOCK_REALTIME) >= end)
			break;
	}
	sink = local & 1;
	printf("{\"ops\":%lld,\"end_ns\":%lld,\"waits\":{\"Counts\":[", (long long)ops, (long long)clock_ns(CLOCK_REALTIME));
	for (int i = 0; i < hist_buckets; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)counts[i]);
	printf("],\"N\":%llu,\"Min\":%lld,\"Max\":%lld}}\n", (unsigned long long)hist_n, (long long)hist_min,
	       (long long)hist_max);
	return fflush(stdout) != 0;
}

int main(int argc, char **argv) {
	if (argc == 3 && !strcmp(argv[1], "init")) {
		struct shared *s = map_file(argv[2], O_RDWR | O_CREAT | O_TRUNC);
		if (!s || sem_init(&s->sem, 1, 1) != 0)
			return perror("sem_init"), 1;
		return 0;
	}
	const char *spec = getenv("LOCKWORD_BENCH_CHILD");
	if (argc != 1 || !spec)
		return fprintf(stderr, "usage: %s init FILE | %s (a bench child: LOCKWORD_BENCH_CHILD)\n", argv[0], argv[0]), 2;
	if (!strcmp(spec, "probe"))
		return 0;
	return child(spec);
}
