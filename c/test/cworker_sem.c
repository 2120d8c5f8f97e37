/* cworker_sem.c: the SharedSemaphore commands of the C worker (included by
 * cworker.c). The checked section's words are a bytes object "check" of
 * the region, laid out as c/ctest's semaphore tests lay it out:
 *   0 in use (uint64), 8 acquisitions, 16 permits acquired, 24 violations,
 *   64 + 4i: the PID holding permit i (uint32), for i < the capacity. */

enum { sem_chk_in_use = 0, sem_chk_acquired = 8, sem_chk_permits = 16, sem_chk_violations = 24, sem_chk_owners = 64,
       sem_chk_size = 64 + 4 * 64 };

static _Atomic uint64_t *chk64(unsigned char *c, size_t off) { return (_Atomic uint64_t *)(void *)(c + off); }
static _Atomic uint32_t *chk32(unsigned char *c, size_t off) { return (_Atomic uint32_t *)(void *)(c + off); }

static lw_sem *sem_open_args(char **argv, lw_region **r) {
	lw_sem *s;
	int err = lw_region_open(argv[2], r);
	if (err)
		die("open", err);
	if ((err = lw_region_sem(*r, argv[3], strtoll(argv[4], NULL, 10), &s)))
		die("sem", err);
	return s;
}

/* sem-hold REGION NAME PERMITS K: take K permits, print "held", sleep. */
static int cmd_sem_hold(int argc, char **argv) {
	if (argc != 6)
		return 2;
	lw_region *r;
	lw_sem *s = sem_open_args(argv, &r);
	lw_sem_recovery dead = {0};
	int err = lw_sem_acquire(s, strtoll(argv[5], NULL, 10), &dead);
	if (err && err != LW_EOWNERDEAD)
		die("acquire", err);
	printf("held\n");
	fflush(stdout);
	for (;;)
		pause();
}

/* sem-open-close REGION: open the region (no handle, no acquisition),
 * print "open CODE", wait for a line on stdin, close, print "close CODE":
 * the housekeeping of open and close, each alone. */
static int cmd_sem_open_close(int argc, char **argv) {
	if (argc != 3)
		return 2;
	lw_region *r;
	int err = lw_region_open(argv[2], &r);
	printf("open %d\n", err);
	fflush(stdout);
	if (err)
		return 1;
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	printf("close %d\n", lw_region_close(r));
	return 0;
}

/* sem-release-after REGION NAME PERMITS K: take K permits, print "held",
 * wait for a line on stdin (the test writes the region meanwhile), then
 * release them and close, printing "release CODE HELD" and "close CODE". */
static int cmd_sem_release_after(int argc, char **argv) {
	if (argc != 6)
		return 2;
	lw_region *r;
	lw_sem *s = sem_open_args(argv, &r);
	int64_t k = strtoll(argv[5], NULL, 10);
	int err = lw_sem_acquire(s, k, NULL);
	if (err && err != LW_EOWNERDEAD)
		die("acquire", err);
	printf("held\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	err = lw_sem_release(s, k);
	printf("release %d %lld\n", err, (long long)lw_sem_held(s));
	printf("close %d\n", lw_region_close(r));
	return 0;
}

/* sem-acquire REGION NAME PERMITS K TIMEOUT_MS [wait]: one timed
 * acquisition; prints "CODE HOLDERS PERMITS PID HELD", then releases what
 * it holds. With wait, it first prints "open" and waits for a line on
 * stdin: attached before a holder dies, so that its open does not reap. */
static int cmd_sem_acquire(int argc, char **argv) {
	if (argc != 7 && !(argc == 8 && !strcmp(argv[7], "wait")))
		return 2;
	lw_region *r;
	lw_sem *s = sem_open_args(argv, &r);
	if (argc == 8) {
		char line[16];
		printf("open\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 1;
	}
	lw_sem_recovery dead = {0};
	int err = lw_sem_timedacquire(s, strtoll(argv[5], NULL, 10), strtoll(argv[6], NULL, 10) * 1000000, &dead);
	printf("%d %d %lld %u %lld\n", err, dead.holders, (long long)dead.permits, dead.pid, (long long)lw_sem_held(s));
	fflush(stdout);
	if (lw_sem_held(s) && (err = lw_sem_release(s, lw_sem_held(s))))
		die("release", err);
	return lw_region_close(r) ? 1 : 0;
}

/* sem-stress REGION NAME PERMITS ITERS: ITERS checked acquisitions of
 * 1 + (i + pid) % PERMITS permits; prints "done". */
static int cmd_sem_stress(int argc, char **argv) {
	if (argc != 6)
		return 2;
	lw_region *r;
	lw_sem *s = sem_open_args(argv, &r);
	void *cv;
	int err = lw_region_bytes(r, "check", sem_chk_size, &cv);
	if (err)
		die("bytes", err);
	unsigned char *c = cv;
	int64_t cap = lw_sem_capacity(s), iters = strtoll(argv[5], NULL, 10);
	uint32_t me = (uint32_t)getpid();
	for (int64_t i = 0; i < iters; i++) {
		int64_t k = 1 + (i + me) % cap;
		if ((err = lw_sem_acquire(s, k, NULL)))
			die("acquire", err);
		uint64_t bad = 0;
		if (atomic_fetch_add(chk64(c, sem_chk_in_use), (uint64_t)k) + (uint64_t)k > (uint64_t)cap)
			bad++;
		int64_t got = 0;
		uint32_t mine[64];
		for (int64_t p = 0; p < cap && got < k; p++) {
			uint32_t zero = 0;
			if (atomic_compare_exchange_strong(chk32(c, sem_chk_owners + 4 * p), &zero, me))
				mine[got++] = (uint32_t)p;
		}
		if (got != k)
			bad++;
		busy_work(i, (int)(i % 64));
		for (int64_t j = 0; j < got; j++) {
			uint32_t want = me;
			if (!atomic_compare_exchange_strong(chk32(c, sem_chk_owners + 4 * mine[j]), &want, 0))
				bad++;
		}
		atomic_fetch_sub(chk64(c, sem_chk_in_use), (uint64_t)k);
		atomic_fetch_add(chk64(c, sem_chk_acquired), 1);
		atomic_fetch_add(chk64(c, sem_chk_permits), (uint64_t)k);
		atomic_fetch_add(chk64(c, sem_chk_violations), bad);
		if ((err = lw_sem_release(s, k)))
			die("release", err);
	}
	printf("done\n");
	return lw_region_close(r) ? 1 : 0;
}

/* sem-torture REGION PERMITS KILL ITERS IDS OFFSETS: the C worker process of
 * torture -lock shared-semaphore-c. The state is the bytes object
 * "torture-sem-state" of STATE_SIZE bytes, laid out as the Go supervisor's
 * shSemState; OFFSETS (go stop in_use violations owners workers
 * worker_size killed_n killed killed_cap state_size) come from it
 * (unsafe.Offsetof), so the two never disagree. Each worker id of IDS (a
 * thread each) does what shSemWorker does: acquire k, claim k owner slots
 * (freeing killed processes' slots when short), hold, release, commit. */
struct sem_torture {
	lw_sem *s;
	unsigned char *st;
	size_t go, stop, in_use, viol, owners, workers, wsize, killed_n, killed, killed_cap;
	int64_t permits, iters;
	int kill;
	uint64_t tag;
	int id;
};

static void sem_free_killed(struct sem_torture *t) {
	uint64_t n = atomic_load(chk64(t->st, t->killed_n));
	for (int64_t p = 0; p < t->permits; p++) {
		uint64_t o = atomic_load(chk64(t->st, t->owners + 8 * p));
		for (uint64_t i = 0; o != 0 && i < n && i < t->killed_cap; i++) {
			if (atomic_load(chk64(t->st, t->killed + 8 * i)) == o) {
				atomic_compare_exchange_strong(chk64(t->st, t->owners + 8 * p), &o, 0);
				break;
			}
		}
	}
}

static void *sem_torture_worker(void *arg) {
	struct sem_torture *t = arg;
	size_t w = t->workers + t->wsize * t->id; /* acquisitions, permits, recovered, tag */
	for (int64_t i = 0; (t->iters == 0 || i < t->iters) && atomic_load(chk32(t->st, t->stop)) == 0; i++) {
		int64_t k = 1 + (i + t->id) % 3;
		lw_sem_recovery dead = {0};
		int err = lw_sem_timedacquire(t->s, k, 10000000000LL, &dead);
		if (err == LW_EOWNERDEAD)
			atomic_fetch_add(chk64(t->st, w + 16), (uint64_t)dead.permits);
		else if (err)
			die("acquire", err);
		uint64_t bad = 0;
		if (!t->kill && (int64_t)atomic_fetch_add(chk64(t->st, t->in_use), (uint64_t)k) + k > 4)
			bad++;
		int64_t mine[64], got = 0;
		for (int try = 0; try < 2 && got < k; try++) {
			for (int64_t p = 0; p < t->permits && got < k; p++) {
				uint64_t zero = 0;
				if (atomic_compare_exchange_strong(chk64(t->st, t->owners + 8 * p), &zero, t->tag))
					mine[got++] = p;
			}
			if (got < k)
				sem_free_killed(t);
		}
		bad += (uint64_t)(k - got);
		busy_work((uint64_t)i, (int)(i % 64));
		for (int64_t j = 0; j < got; j++) {
			uint64_t want = t->tag;
			if (!atomic_compare_exchange_strong(chk64(t->st, t->owners + 8 * mine[j]), &want, 0))
				bad++;
		}
		if (!t->kill)
			atomic_fetch_sub(chk64(t->st, t->in_use), (uint64_t)k);
		if ((err = lw_sem_release(t->s, k)))
			die("release", err);
		atomic_fetch_add(chk64(t->st, t->viol), bad);
		atomic_fetch_add(chk64(t->st, w), 1);
		atomic_fetch_add(chk64(t->st, w + 8), (uint64_t)k);
	}
	return NULL;
}

static int cmd_sem_torture(int argc, char **argv) {
	if (argc != 18)
		return 2;
	lw_region *r;
	int err = strncmp(argv[2], "memfd:", 6) == 0 ? lw_region_open_fd(3, argv[2], &r) : lw_region_open(argv[2], &r);
	if (err)
		die("open", err);
	struct sem_torture base = {0};
	base.permits = strtoll(argv[3], NULL, 10);
	base.kill = atoi(argv[4]);
	base.iters = strtoll(argv[5], NULL, 10);
	size_t *offs[] = {&base.go, &base.stop, &base.in_use, &base.viol, &base.owners, &base.workers, &base.wsize,
			  &base.killed_n, &base.killed, &base.killed_cap};
	for (int i = 0; i < 10; i++)
		*offs[i] = strtoull(argv[7 + i], NULL, 10);
	if ((err = lw_region_sem(r, "torture-sem", base.permits, &base.s)))
		die("sem", err);
	void *stv;
	if ((err = lw_region_bytes(r, "torture-sem-state", strtoull(argv[17], NULL, 10), &stv)))
		die("state", err);
	base.st = stv;
	base.tag = (uint64_t)getpid() << 32 | ((uint64_t)rand() | 1);
	int ids[256], n = 0;
	for (char *p = strtok(argv[6], ","); p && n < 256; p = strtok(NULL, ","))
		ids[n++] = atoi(p);
	if (n > 0)
		atomic_store(chk64(base.st, base.workers + base.wsize * ids[0] + 24), base.tag);
	while (atomic_load(chk32(base.st, base.go)) == 0)
		usleep(100);
	struct sem_torture ts[256];
	pthread_t th[256];
	for (int i = 0; i < n; i++) {
		ts[i] = base;
		ts[i].id = ids[i];
		pthread_create(&th[i], NULL, sem_torture_worker, &ts[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}
