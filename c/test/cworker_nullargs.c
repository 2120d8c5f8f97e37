/*
 * cworker_nullargs.c: the NULL-argument calls of cworker (the "nullargs"
 * command): every exported function with each pointer argument NULL in
 * turn, each in a forked child. Joined into cworker.c, which includes it
 * where its helpers are defined; not compiled on its own.
 */

/* ---- NULL arguments ---- */

/* The handles every NULL case uses: all valid, so that the one NULL under
 * test is the only thing wrong with a call. */
struct null_env {
	const char *path; /* an existing region */
	int fd;           /* open on it, read-write */
	lw_region *r;
	lw_mutex *m;    /* "m": lw_region_mutex(r, "m", NULL) finds it */
	lw_ring *p, *c; /* producer and consumer of the empty ring "q" */
	lw_mpsc *mp, *mc; /* producer and consumer of the empty MPSC queue "mq" */
};

/* null_case describes call i of the table below, and makes it if run:
 * *what is its text, *want the result it must give, *got the result it
 * gave (0 for a function returning void: it must return). 0 past the end
 * of the table. The text is what the Go test (TestCNullArguments) reads
 * to check that each pointer parameter of each function in lockword.h is
 * NULL in some call. */
static int null_case(int i, bool run, const struct null_env *e, const char **what, int64_t *want, int64_t *got) {
	const char *path = e->path;
	int fd = e->fd, n = 0;
	lw_region *r = e->r, *rr;
	lw_mutex *mm;
	lw_sem *ss;
	lw_ring *p = e->p, *c = e->c, *qq;
	lw_mpsc *mp = e->mp, *mc = e->mc, *mq;
	void *v;
	char buf[8] = "x";
	size_t len;
	uint32_t pid;
	uint64_t u64;
#define NULL_CASE(call, expected) \
	if (i == n++) { \
		*what = #call; \
		*want = (expected); \
		*got = run ? (int64_t)(call) : 0; \
		return 1; \
	}
#define NULL_VOID(call) \
	if (i == n++) { \
		*what = #call; \
		*want = 0; \
		if (run) \
			call; \
		*got = 0; \
		return 1; \
	}
	NULL_CASE(lw_region_create(NULL, 0, &rr), LW_EINVAL)
	NULL_CASE(lw_region_create(path, 0, NULL), LW_EINVAL)
	NULL_CASE(lw_region_open(NULL, &rr), LW_EINVAL)
	NULL_CASE(lw_region_open(path, NULL), LW_EINVAL)
	NULL_CASE(lw_region_open_init(NULL, -1, &rr), LW_EINVAL)
	NULL_CASE(lw_region_open_init(path, -1, NULL), LW_EINVAL)
	NULL_CASE(lw_region_open_fd(fd, NULL, &rr), LW_EINVAL)
	NULL_CASE(lw_region_open_fd(fd, "by fd", NULL), LW_EINVAL)
	NULL_CASE(lw_region_open_or_create(NULL, 0, &rr), LW_EINVAL)
	NULL_CASE(lw_region_open_or_create(path, 0, NULL), LW_EINVAL)
	NULL_CASE(lw_region_create_options(NULL, 0, NULL, &rr), LW_EINVAL)
	NULL_CASE(lw_region_create_options(path, 0, NULL, NULL), LW_EINVAL)
	NULL_CASE(lw_region_open_options(NULL, NULL, &rr), LW_EINVAL)
	NULL_CASE(lw_region_open_options(path, NULL, NULL), LW_EINVAL)
	NULL_CASE(lw_region_open_or_create_options(NULL, 0, NULL, &rr), LW_EINVAL)
	NULL_CASE(lw_region_open_or_create_options(path, 0, NULL, NULL), LW_EINVAL)
	NULL_CASE(lw_region_close(NULL), LW_EINVAL)
	NULL_CASE(lw_region_size(NULL), 0)
	NULL_CASE(lw_region_token(NULL), 0)
	NULL_CASE(lw_region_lock_holder(NULL), 0)
	NULL_CASE(lw_region_bytes(NULL, "b", 8, &v), LW_EINVAL)
	NULL_CASE(lw_region_bytes(r, NULL, 8, &v), LW_EINVAL)
	NULL_CASE(lw_region_bytes(r, "b", 8, NULL), LW_EINVAL)
	NULL_CASE(lw_region_mutex(NULL, "m", &mm), LW_EINVAL)
	NULL_CASE(lw_region_mutex(r, NULL, &mm), LW_EINVAL)
	NULL_CASE(lw_region_mutex(r, "m", NULL), LW_EINVAL)
	NULL_CASE(lw_mutex_lock(NULL), LW_EINVAL)
	NULL_CASE(lw_mutex_timedlock(NULL, 0), LW_EINVAL)
	NULL_CASE(lw_mutex_timedlock_pid(NULL, 0, &pid), LW_EINVAL)
	NULL_CASE(lw_mutex_trylock(NULL), LW_EINVAL)
	NULL_CASE(lw_mutex_unlock(NULL), LW_EINVAL)
	NULL_CASE(lw_mutex_consistent(NULL), LW_EINVAL)
	NULL_VOID(lw_mutex_enable_stats(NULL))
	NULL_CASE(lw_mutex_word(NULL), 0)
	NULL_CASE(lw_region_sem(NULL, "s", 2, &ss), LW_EINVAL)
	NULL_CASE(lw_region_sem(r, NULL, 2, &ss), LW_EINVAL)
	NULL_CASE(lw_region_sem(r, "s", 2, NULL), LW_EINVAL)
	NULL_CASE(lw_sem_timedacquire(NULL, 1, 0, NULL), LW_EINVAL)
	NULL_CASE(lw_sem_acquire(NULL, 1, NULL), LW_EINVAL)
	NULL_CASE(lw_sem_tryacquire(NULL, 1, NULL), LW_EINVAL)
	NULL_CASE(lw_sem_release(NULL, 1), LW_EINVAL)
	NULL_CASE(lw_sem_held(NULL), 0)
	NULL_CASE(lw_sem_capacity(NULL), 0)
	NULL_CASE(lw_region_ring_producer(NULL, "q2", 256, &qq), LW_EINVAL)
	NULL_CASE(lw_region_ring_producer(r, NULL, 256, &qq), LW_EINVAL)
	NULL_CASE(lw_region_ring_producer(r, "q2", 256, NULL), LW_EINVAL)
	NULL_CASE(lw_region_ring_consumer(NULL, "q2", 256, &qq), LW_EINVAL)
	NULL_CASE(lw_region_ring_consumer(r, NULL, 256, &qq), LW_EINVAL)
	NULL_CASE(lw_region_ring_consumer(r, "q2", 256, NULL), LW_EINVAL)
	NULL_CASE(lw_ring_max_message(NULL), 0)
	NULL_CASE(lw_ring_send(NULL, buf, 1, 0), LW_EINVAL)
	NULL_CASE(lw_ring_send(p, NULL, 8, 0), LW_EINVAL)
	NULL_CASE(lw_ring_receive(NULL, buf, sizeof buf, &len, 0), LW_EINVAL)
	NULL_CASE(lw_ring_receive(c, NULL, sizeof buf, &len, 0), LW_EINVAL)
	NULL_CASE(lw_ring_receive(c, buf, sizeof buf, NULL, 0), LW_EINVAL)
	NULL_VOID(lw_ring_close(NULL))
	NULL_VOID(lw_ring_detach(NULL))
	NULL_VOID(lw_ring_free(NULL))
	/* NULL with length 0 is an empty message, not a mistake: sent, and
	 * received, without handing the NULL to memcpy (UBSan would abort).
	 * Each case runs in a child of its own, but the ring's words are
	 * shared: each receive takes the message of the send before it. */
	NULL_CASE(lw_ring_send(p, NULL, 0, 0), 0)
	NULL_CASE(lw_ring_receive(c, buf, sizeof buf, &len, 0), 0)
	NULL_CASE(lw_ring_send(p, buf, 0, 0), 0)
	NULL_CASE(lw_ring_receive(c, NULL, 0, &len, 0), 0)
	NULL_CASE(lw_region_mpsc_producer(NULL, "mq2", 256, &mq), LW_EINVAL)
	NULL_CASE(lw_region_mpsc_producer(r, NULL, 256, &mq), LW_EINVAL)
	NULL_CASE(lw_region_mpsc_producer(r, "mq2", 256, NULL), LW_EINVAL)
	NULL_CASE(lw_region_mpsc_consumer(NULL, "mq2", 256, &mq), LW_EINVAL)
	NULL_CASE(lw_region_mpsc_consumer(r, NULL, 256, &mq), LW_EINVAL)
	NULL_CASE(lw_region_mpsc_consumer(r, "mq2", 256, NULL), LW_EINVAL)
	NULL_CASE(lw_mpsc_max_message(NULL), 0)
	NULL_CASE(lw_mpsc_lost(NULL, &u64), LW_EINVAL)
	NULL_CASE(lw_mpsc_lost(mp, NULL), LW_EINVAL)
	NULL_CASE(lw_mpsc_send(NULL, buf, 1, 0), LW_EINVAL)
	NULL_CASE(lw_mpsc_send(mp, NULL, 8, 0), LW_EINVAL)
	NULL_CASE(lw_mpsc_try_send(NULL, buf, 1), LW_EINVAL)
	NULL_CASE(lw_mpsc_try_send(mp, NULL, 8), LW_EINVAL)
	NULL_CASE(lw_mpsc_receive(NULL, buf, sizeof buf, &len, 0), LW_EINVAL)
	NULL_CASE(lw_mpsc_receive(mc, NULL, sizeof buf, &len, 0), LW_EINVAL)
	NULL_CASE(lw_mpsc_receive(mc, buf, sizeof buf, NULL, 0), LW_EINVAL)
	NULL_CASE(lw_mpsc_try_receive(NULL, buf, sizeof buf, &len), LW_EINVAL)
	NULL_CASE(lw_mpsc_try_receive(mc, NULL, sizeof buf, &len), LW_EINVAL)
	NULL_CASE(lw_mpsc_try_receive(mc, buf, sizeof buf, NULL), LW_EINVAL)
	NULL_CASE(lw_mpsc_send(mc, buf, 1, 0), LW_EINVAL) /* the other role */
	NULL_CASE(lw_mpsc_receive(mp, buf, sizeof buf, &len, 0), LW_EINVAL)
	NULL_VOID(lw_mpsc_close(NULL))
	NULL_VOID(lw_mpsc_detach(NULL))
	NULL_VOID(lw_mpsc_free(NULL))
	/* An empty message, sent with a NULL msg, arrives in a NULL buf. */
	NULL_CASE(lw_mpsc_send(mp, NULL, 0, 0), 0)
	NULL_CASE(lw_mpsc_try_receive(mc, NULL, 0, &len), 0)
#undef NULL_CASE
#undef NULL_VOID
	return 0;
}

/* cmd_nullargs makes every call of null_case, each in a forked child (a
 * crash there is reported, and the next call still runs), and prints
 * "PASS CALL" or "FAIL CALL: ..." per call, then "ok" if all passed. The
 * children use the parent's handles only to be refused or, for the empty
 * message, to move the shared ring words (docs: handles do not cross
 * fork; the parent makes no call on them until the children are done).
 * Timing assumption: every call returns at once; the alarm only turns a
 * hang into a FAIL line. */
static int cmd_nullargs(int argc, char **argv) {
	if (argc != 3)
		return 2;
	struct null_env e = {.path = argv[2]};
	int failures = 0;
	if (lw_region_create(e.path, 0, &e.r) != 0 || lw_region_mutex(e.r, "m", &e.m) != 0 ||
	    lw_region_ring_producer(e.r, "q", 256, &e.p) != 0 || lw_region_ring_consumer(e.r, "q", 256, &e.c) != 0 ||
	    lw_region_mpsc_producer(e.r, "mq", 256, &e.mp) != 0 || lw_region_mpsc_consumer(e.r, "mq", 256, &e.mc) != 0 ||
	    (e.fd = open(e.path, O_RDWR | O_CLOEXEC)) < 0) {
		printf("FAIL set-up of %s\n", e.path);
		return 1;
	}
	fflush(stdout);
	for (int i = 0;; i++) {
		const char *what;
		int64_t want, got;
		if (!null_case(i, false, &e, &what, &want, &got))
			break;
		int fds[2];
		if (pipe(fds) != 0) {
			perror("pipe");
			return 1;
		}
		pid_t kid = fork();
		if (kid == 0) {
			close(fds[0]);
			alarm(30);
			null_case(i, true, &e, &what, &want, &got);
			_exit(write(fds[1], &got, sizeof got) == sizeof got ? 0 : 1);
		}
		close(fds[1]);
		ssize_t nr = kid > 0 ? read(fds[0], &got, sizeof got) : -1;
		close(fds[0]);
		int st = 0;
		if (kid > 0)
			waitpid(kid, &st, 0);
		if (nr != (ssize_t)sizeof got) {
			if (kid < 0)
				printf("FAIL %s: fork: %s\n", what, strerror(errno));
			else if (WIFSIGNALED(st))
				printf("FAIL %s: killed by signal %d (%s)\n", what, WTERMSIG(st), strsignal(WTERMSIG(st)));
			else
				printf("FAIL %s: exited %d without a result\n", what, WEXITSTATUS(st));
			failures++;
		} else if (got != want) {
			printf("FAIL %s: %lld (%s), want %lld (%s)\n", what, (long long)got, lw_strerror((int)got),
			       (long long)want, lw_strerror((int)want));
			failures++;
		} else {
			printf("PASS %s\n", what);
		}
		fflush(stdout);
	}
	lw_ring_free(e.p);
	lw_ring_free(e.c);
	lw_mpsc_free(e.mp);
	lw_mpsc_free(e.mc);
	close(e.fd);
	if (lw_region_close(e.r) != 0) {
		printf("FAIL close after the NULL calls\n");
		failures++;
	}
	unlink(e.path);
	if (failures == 0)
		printf("ok\n");
	return failures != 0;
}
