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

/* sem-acquire REGION NAME PERMITS K TIMEOUT_MS: one timed acquisition;
 * prints "CODE HOLDERS PERMITS PID HELD", then releases what it holds. */
static int cmd_sem_acquire(int argc, char **argv) {
	if (argc != 7)
		return 2;
	lw_region *r;
	lw_sem *s = sem_open_args(argv, &r);
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
