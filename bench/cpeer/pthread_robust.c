// The C peer of BenchmarkCrossProcess: a pthread mutex with
// PTHREAD_PROCESS_SHARED and PTHREAD_MUTEX_ROBUST in a file mapped
// MAP_SHARED, locked and unlocked by 1 (uncontended) or N forked processes
// around the same critical section as the Go kinds (a plain counter
// increment in the shared mapping). It prints lines in the format of Go's
// testing package, so that benchstat reads them with the Go results.
//
// Build and run (run.sh does both):
//   gcc -O2 -pthread -o pthread_robust pthread_robust.c
//   ./pthread_robust PROCS TARGET_MS FILE
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 64

struct shared {
	pthread_mutex_t mu;
	char pad1[64];
	uint64_t counter; // plain: protected by mu
	char pad2[64];
	_Atomic uint64_t ready;
	_Atomic uint64_t go;
	_Atomic uint64_t done[MAX_PROCS]; // finish times, ns
};

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void lock(struct shared *s) {
	int err = pthread_mutex_lock(&s->mu);
	if (err == EOWNERDEAD) {
		pthread_mutex_consistent(&s->mu);
	} else if (err != 0) {
		fprintf(stderr, "pthread_mutex_lock: %d\n", err);
		exit(1);
	}
}

static void work(struct shared *s, uint64_t n) {
	for (uint64_t i = 0; i < n; i++) {
		lock(s);
		s->counter++;
		pthread_mutex_unlock(&s->mu);
	}
}

// run does n acquisitions in procs processes and returns the elapsed ns.
static uint64_t run(struct shared *s, int procs, uint64_t n) {
	s->counter = 0;
	atomic_store(&s->ready, 0);
	atomic_store(&s->go, 0);
	uint64_t per = n / procs;
	if (procs == 1) {
		uint64_t t0 = now_ns();
		work(s, per);
		return now_ns() - t0;
	}
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			exit(1);
		}
		if (pid == 0) {
			atomic_fetch_add(&s->ready, 1);
			while (atomic_load(&s->go) == 0)
				;
			work(s, per);
			atomic_store(&s->done[i], now_ns());
			_exit(0);
		}
	}
	while (atomic_load(&s->ready) < (uint64_t)procs)
		usleep(100);
	uint64_t t0 = now_ns();
	atomic_store(&s->go, t0);
	for (int i = 0; i < procs; i++)
		wait(NULL);
	uint64_t end = 0;
	for (int i = 0; i < procs; i++)
		if (atomic_load(&s->done[i]) > end)
			end = atomic_load(&s->done[i]);
	if (s->counter != per * procs) {
		fprintf(stderr, "counter %llu, want %llu\n", (unsigned long long)s->counter, (unsigned long long)(per * procs));
		exit(1);
	}
	return end - t0;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: %s PROCS TARGET_MS FILE\n", argv[0]);
		return 2;
	}
	int procs = atoi(argv[1]);
	uint64_t target = (uint64_t)atoll(argv[2]) * 1000000u;
	if (procs < 1 || procs > MAX_PROCS) {
		fprintf(stderr, "PROCS must be 1..%d\n", MAX_PROCS);
		return 2;
	}
	int fd = open(argv[3], O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(struct shared)) != 0) {
		perror(argv[3]);
		return 1;
	}
	struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->mu, &attr);

	// Grow n as testing.B does until a run lasts the target time.
	uint64_t n = 1000, ns = 0;
	for (;;) {
		ns = run(s, procs, n);
		if (ns >= target || n >= 1000000000u)
			break;
		uint64_t next = ns ? n * target / ns * 6 / 5 : n * 100;
		if (next > n * 100)
			next = n * 100;
		n = next > n ? next : n + 1;
	}
	n = n / procs * procs;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	double per_acq = (double)ns / (double)n;
	printf("BenchmarkCrossProcess/kind=pthread-robust/procs=%d-%ld \t%llu\t%10.2f ns/op\t%10.4f Macq/s", procs, cpus,
	       (unsigned long long)n, per_acq, 1e3 / per_acq);
	if (procs > 1)
		printf("\t%10.2f ns/acq", per_acq);
	printf("\n");
	return 0;
}
