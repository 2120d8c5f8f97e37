// The C peer of BenchmarkSharedSemaphorePeers (bench/semaphore_procs_test.go):
// a POSIX sem_t with pshared = 1 in a file mapped MAP_SHARED, PERMITS
// permits, PROCS forked processes each taking 1 permit, doing 10 steps of
// work (locktest.SpinWork's loop) and giving it back, for MS milliseconds
// from a common start. Under the permit every process checks the permits
// in use (a counter in the mapping) against PERMITS. It prints one line in
// the format of Go's testing package, the same metrics as the Go side:
// total acquisitions, ns and M acquisitions per second, p99 and max of the
// timed waits (one in 32), and max/min acquisitions across processes.
// libc only.
//
//   gcc -O2 -Wall -pthread -o posix_sem posix_sem.c
//   ./posix_sem PERMITS PROCS MS FILE
#define _GNU_SOURCE
#include <fcntl.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { max_procs = 64, max_samples = 1 << 14, sample_every = 32 };

struct shared {
	sem_t sem;
	char pad1[64];
	_Atomic int64_t in_use, violations;
	char pad2[64];
	_Atomic uint64_t ready, go;
	_Atomic uint64_t ops[max_procs];
	_Atomic uint64_t done[max_procs]; // finish times, ns
	_Atomic uint64_t nsamples[max_procs];
	uint64_t samples[max_procs][max_samples]; // each child writes its own row
};

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

// spin_work is locktest.SpinWork.
static uint64_t spin_work(int n) {
	uint64_t x = 1;
	for (int i = 0; i < n; i++)
		x = x * 31 + (uint64_t)i;
	return x;
}

static void acquire(struct shared *s) {
	while (sem_wait(&s->sem) != 0)
		; // EINTR
}

static void child(struct shared *s, int idx, int64_t permits, uint64_t dur) {
	atomic_fetch_add(&s->ready, 1);
	uint64_t start;
	while ((start = atomic_load(&s->go)) == 0)
		;
	uint64_t end = start + dur, ops = 0, ns = 0, x = 0;
	for (uint64_t t = start; t < end; ops++) {
		if (ops % sample_every == 0) {
			uint64_t t0 = now_ns();
			acquire(s);
			t = now_ns();
			if (ns < max_samples)
				s->samples[idx][ns++] = t - t0;
		} else {
			acquire(s);
			if (ops % 8 == 0)
				t = now_ns();
		}
		if (atomic_fetch_add(&s->in_use, 1) + 1 > permits)
			atomic_fetch_add(&s->violations, 1);
		x += spin_work(10);
		atomic_fetch_sub(&s->in_use, 1);
		sem_post(&s->sem);
	}
	atomic_store(&s->done[idx], now_ns());
	sink = x;
	atomic_store(&s->ops[idx], ops);
	atomic_store(&s->nsamples[idx], ns);
}

static int cmp_u64(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: %s PERMITS PROCS MS FILE\n", argv[0]);
		return 2;
	}
	int64_t permits = atoll(argv[1]);
	int procs = atoi(argv[2]);
	uint64_t dur = (uint64_t)atoll(argv[3]) * 1000000u;
	if (permits < 1 || permits > 1 << 20 || procs < 1 || procs > max_procs || dur == 0) {
		fprintf(stderr, "PERMITS 1..2^20, PROCS 1..%d, MS > 0\n", max_procs);
		return 2;
	}
	int fd = open(argv[4], O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(struct shared)) != 0) {
		perror(argv[4]);
		return 1;
	}
	struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (sem_init(&s->sem, 1, (unsigned)permits) != 0) {
		perror("sem_init");
		return 1;
	}
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			child(s, i, permits, dur);
			_exit(0);
		}
	}
	while (atomic_load(&s->ready) < (uint64_t)procs)
		usleep(100);
	uint64_t t0 = now_ns();
	atomic_store(&s->go, t0);
	for (int i = 0; i < procs; i++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "a child failed\n");
			return 1;
		}
	}
	uint64_t elapsed = 0, total = 0, lo = UINT64_MAX, hi = 0, n = 0;
	for (int i = 0; i < procs; i++) {
		uint64_t o = atomic_load(&s->ops[i]), d = atomic_load(&s->done[i]) - t0;
		elapsed = d > elapsed ? d : elapsed;
		total += o;
		lo = o < lo ? o : lo;
		hi = o > hi ? o : hi;
		n += atomic_load(&s->nsamples[i]);
	}
	uint64_t *all = malloc(n * sizeof *all + 1);
	if (!all)
		return 1;
	n = 0;
	for (int i = 0; i < procs; i++)
		for (uint64_t k = 0; k < atomic_load(&s->nsamples[i]); k++)
			all[n++] = s->samples[i][k];
	qsort(all, n, sizeof *all, cmp_u64);
	if (atomic_load(&s->violations) != 0 || atomic_load(&s->in_use) != 0) {
		fprintf(stderr, "sem_t: %lld violations: more than %lld permits in use\n",
			(long long)atomic_load(&s->violations), (long long)permits);
		return 1;
	}
	if (total == 0 || n == 0) {
		fprintf(stderr, "no acquisitions\n");
		return 1;
	}
	double per_acq = (double)elapsed / (double)total;
	printf("BenchmarkSharedSemaphorePeers/permits=%lld/procs=%d/sem_t-%ld \t1\t%.0f ns/op\t%.2f ns/acq\t%.4f Macq/s\t%llu p99-wait-ns\t%llu max-wait-ns\t%.3f max/min\n",
	       (long long)permits, procs, sysconf(_SC_NPROCESSORS_ONLN), (double)elapsed, per_acq, 1e3 / per_acq,
	       (unsigned long long)all[n * 99 / 100], (unsigned long long)all[n - 1], lo ? (double)hi / (double)lo : 0.0);
	sem_destroy(&s->sem);
	return 0;
}
