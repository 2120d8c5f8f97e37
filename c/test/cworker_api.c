/*
 * cworker_api.c: the return-code checks of cworker (the "api" command):
 * each exported function against the codes lockword.h documents. Joined
 * into cworker.c, which includes it where its helpers are defined; not
 * compiled on its own.
 */

/* ---- return codes ---- */

static int api_failures;

static void expect(const char *what, int got, int want) {
	if (got != want) {
		printf("FAIL %s: %d (%s), want %d (%s)\n", what, got, lw_strerror(got), want, lw_strerror(want));
		api_failures++;
	}
}

/* api_open_fd opens a region from a descriptor in a thread of its own,
 * for the api check that such an open takes the region's flock through an
 * open file description of its own. */
struct api_open_fd_arg {
	int fd, err;
	lw_region *r;
	atomic_int done;
};

static void *api_open_fd(void *p) {
	struct api_open_fd_arg *a = p;
	a->err = lw_region_open_fd(a->fd, "region by fd", &a->r);
	atomic_store(&a->done, 1);
	return NULL;
}

static void *api_other_thread(void *p) {
	lw_mutex *m = p;
	/* Ownership is per process: another thread of the holder's process
	 * may not take the lock, but may unlock it. */
	expect("trylock from another thread of the holder", lw_mutex_trylock(m), LW_EBUSY);
	expect("timedlock(0) from another thread of the holder", lw_mutex_timedlock(m, 0), LW_ETIMEDOUT);
	expect("unlock from another thread of the holder", lw_mutex_unlock(m), 0);
	return NULL;
}

/* cmd_api checks the return code of every documented case that one
 * process can provoke by itself; it prints "ok" or FAIL lines. */
static int cmd_api(int argc, char **argv) {
	if (argc != 3)
		return 2;
	lw_region *r, *r2;
	lw_mutex *m, *m2, *again;
	void *b;
	lw_ring *p, *c, *p2;
	expect("create too small", lw_region_create(argv[2], 4096, &r), LW_ETOOSMALL);
	expect("create", lw_region_create(argv[2], 0, &r), 0);
	expect("create again", lw_region_create(argv[2], 0, &r2), EEXIST);
	expect("mutex", lw_region_mutex(r, "m", &m), 0);
	expect("mutex again", lw_region_mutex(r, "m", &again), 0);
	expect("same handle", again == m, 1);
	expect("bytes named as a mutex", lw_region_bytes(r, "m", 8, &b), LW_EOBJKIND);
	expect("empty name", lw_region_mutex(r, "", &m2), LW_EOBJNAME);
	expect("control character", lw_region_mutex(r, "a\nb", &m2), LW_EOBJNAME);
	expect("49-byte name", lw_region_mutex(r, "0123456789012345678901234567890123456789012345678", &m2), LW_EOBJNAME);
	expect("bytes", lw_region_bytes(r, "data", 100, &b), 0);
	expect("bytes of another size", lw_region_bytes(r, "data", 101, &b), LW_EOBJBOUNDS);
	expect("bytes of 0", lw_region_bytes(r, "zero", 0, &b), LW_EOBJBOUNDS);
	expect("unlock of a free lock", lw_mutex_unlock(m), LW_EPERM);
	expect("consistent of a free lock", lw_mutex_consistent(m), LW_EPERM);
	expect("lock", lw_mutex_lock(m), 0);
	expect("close while holding", lw_region_close(r), LW_EREGIONBUSY);
	expect("trylock of a held lock", lw_mutex_trylock(m), LW_EBUSY);
	expect("timedlock of a held lock", lw_mutex_timedlock(m, 20000000), LW_ETIMEDOUT);
	pthread_t th;
	pthread_create(&th, NULL, api_other_thread, m);
	pthread_join(th, NULL);
	expect("free after the other thread's unlock", lw_mutex_trylock(m), 0);
	expect("consistent of a consistent lock", lw_mutex_consistent(m), 0);
	expect("unlock", lw_mutex_unlock(m), 0);
	/* A second handle of this process is another owner: it sees our
	 * hold as another process's, and may not unlock it. */
	expect("second handle", lw_region_open(argv[2], &r2), 0);
	expect("second handle's mutex", lw_region_mutex(r2, "m", &m2), 0);
	expect("lock through the first", lw_mutex_lock(m), 0);
	expect("unlock through the second", lw_mutex_unlock(m2), LW_EPERM);
	expect("timedlock through the second", lw_mutex_timedlock(m2, 0), LW_ETIMEDOUT);
	expect("unlock through the first", lw_mutex_unlock(m), 0);
	expect("second closes", lw_region_close(r2), 0);
	/* Rings. */
	expect("ring capacity not a power of two", lw_region_ring_producer(r, "q", 100, &p), LW_EOBJBOUNDS);
	expect("producer", lw_region_ring_producer(r, "q", 256, &p), 0);
	expect("second producer", lw_region_ring_producer(r, "q", 256, &p2), LW_ERINGBUSY);
	expect("other capacity", lw_region_ring_consumer(r, "q", 512, &c), LW_EOBJBOUNDS);
	expect("consumer", lw_region_ring_consumer(r, "q", 256, &c), 0);
	char msg[300] = "x";
	size_t n;
	expect("message too large", lw_ring_send(p, msg, 249, 0), LW_EMSGSIZE);
	expect("largest message", lw_ring_send(p, msg, 248, 0), 0);
	expect("full", lw_ring_send(p, msg, 1, 10000000), LW_ETIMEDOUT);
	expect("receive into a small buffer", lw_ring_receive(c, msg, 10, &n, 0), LW_EMSGSIZE);
	expect("needed", (int)n, 248);
	expect("receive", lw_ring_receive(c, msg, sizeof msg, &n, 0), 0);
	expect("empty", lw_ring_receive(c, msg, sizeof msg, &n, 10000000), LW_ETIMEDOUT);
	expect("send on a consumer", lw_ring_send(c, msg, 1, 0), EINVAL);
	expect("send", lw_ring_send(p, "abc", 3, 0), 0);
	lw_ring_close(p);
	expect("send after close", lw_ring_send(p, msg, 1, 0), LW_ERINGCLOSED);
	expect("drain after close", lw_ring_receive(c, msg, sizeof msg, &n, 0), 0);
	expect("closed", lw_ring_receive(c, msg, sizeof msg, &n, 0), LW_ERINGCLOSED);
	lw_ring_free(p);
	lw_ring_free(c);
	/* lw_region_open_fd attaches under a flock of its own: while the
	 * description of fd holds the region's flock, an open from fd waits
	 * for it (on a dup of fd it would share that lock and attach at once,
	 * as two processes given one inherited fd did, into one slot).
	 * Assumption: a broken open returns within 300 ms. */
	int fd = open(argv[2], O_RDWR | O_CLOEXEC);
	expect("open the region's file", fd >= 0, 1);
	expect("flock it", flock(fd, LOCK_EX), 0);
	struct api_open_fd_arg oa = {.fd = fd};
	pthread_create(&th, NULL, api_open_fd, &oa);
	usleep(300000);
	expect("open_fd waits while fd's description holds the flock", atomic_load(&oa.done), 0);
	flock(fd, LOCK_UN);
	pthread_join(th, NULL);
	expect("open_fd after the flock is released", oa.err, 0);
	close(fd);
	if (oa.err == 0)
		expect("close the handle opened by fd", lw_region_close(oa.r), 0);
	/* A read-only descriptor is refused: the reopen would make it a
	 * writable region. */
	int rofd = open(argv[2], O_RDONLY | O_CLOEXEC);
	lw_region *ro = NULL;
	expect("open_fd of a read-only descriptor", lw_region_open_fd(rofd, "read-only", &ro), EACCES);
	close(rofd);
	/* Close after the file was truncated under the mapping, holding a
	 * lock: LW_ETRUNCATED, not SIGBUS (it read the held lock's word). */
	char tpath[4096];
	snprintf(tpath, sizeof tpath, "%s.truncated", argv[2]);
	lw_region *tr;
	lw_mutex *tm;
	expect("create a region to truncate", lw_region_create(tpath, 0, &tr), 0);
	expect("its mutex", lw_region_mutex(tr, "m", &tm), 0);
	expect("lock it", lw_mutex_lock(tm), 0);
	expect("truncate the file", truncate(tpath, 0), 0);
	expect("close after the truncation", lw_region_close(tr), LW_ETRUNCATED);
	unlink(tpath);
	/* A forked child's lw_region_close releases its copy only: the
	 * parent stays attached, so a waiter does not take the parent's lock
	 * for a dead holder's (it did: the child cleared the parent's slot). */
	pid_t kid = fork();
	if (kid == 0)
		_exit(lw_region_close(r) == 0 ? 0 : 1);
	int kidStatus = 0;
	waitpid(kid, &kidStatus, 0);
	expect("a forked child closes its copy", WIFEXITED(kidStatus) && WEXITSTATUS(kidStatus) == 0, 1);
	expect("second handle again", lw_region_open(argv[2], &r2), 0);
	expect("its mutex again", lw_region_mutex(r2, "m", &m2), 0);
	expect("lock after the child's close", lw_mutex_lock(m), 0);
	expect("the parent is still alive to a waiter", lw_mutex_timedlock(m2, 50000000), LW_ETIMEDOUT);
	expect("unlock after the child's close", lw_mutex_unlock(m), 0);
	expect("second closes again", lw_region_close(r2), 0);
	expect("close", lw_region_close(r), 0);
	unlink(argv[2]);
	/* Options: a group-writable region, created and opened by opt-in
	 * only (Go's Options.Mode and AllowUnsafePermissions). */
	char gpath[4096];
	snprintf(gpath, sizeof gpath, "%s.group", argv[2]);
	lw_region_options grp = {.mode = 0660};
	expect("create 0660 without the opt-in", lw_region_create_options(gpath, 0, &grp, &r), LW_EUNSAFEPERMS);
	expect("create with a mode past 0777", lw_region_create_options(gpath, 0, &(lw_region_options){.mode = 01777}, &r), LW_EINVAL);
	grp.allow_unsafe_permissions = 1;
	expect("create 0660 with the opt-in", lw_region_create_options(gpath, 0, &grp, &r), 0);
	struct stat gst;
	expect("the created file's mode", stat(gpath, &gst) == 0 ? (int)(gst.st_mode & 0777) : -1, 0660);
	expect("open it without the opt-in", lw_region_open(gpath, &r2), LW_EUNSAFEPERMS);
	expect("open it with the opt-in", lw_region_open_options(gpath, &grp, &r2), 0);
	expect("close the opened", lw_region_close(r2), 0);
	expect("open_or_create it with the opt-in", lw_region_open_or_create_options(gpath, 0, &grp, &r2), 0);
	expect("close that", lw_region_close(r2), 0);
	expect("close the created", lw_region_close(r), 0);
	unlink(gpath);
	/* The POSIX codes mean what lockword.h says, not their libc text:
	 * ETIMEDOUT is a deadline, not "Connection timed out". */
	const int posix[] = {LW_EPERM, LW_EBUSY, LW_EINVAL, LW_ETIMEDOUT, LW_EOWNERDEAD, LW_ENOTRECOVERABLE};
	for (size_t i = 0; i < sizeof posix / sizeof posix[0]; i++)
		if (strncmp(lw_strerror(posix[i]), "lockword: ", 10) != 0) {
			printf("FAIL lw_strerror(%d) = \"%s\", want lockword's meaning\n", posix[i], lw_strerror(posix[i]));
			api_failures++;
		}
	/* LW_EBUSY is also the MPSC queue's try calls' answer: its text must
	 * not say only "the lock is held" to a caller that holds no lock. */
	const char *busy = lw_strerror(LW_EBUSY);
	if (!strstr(busy, "no room") || !strstr(busy, "no message")) {
		printf("FAIL lw_strerror(LW_EBUSY) = \"%s\", want it to name a try call's no room or no message\n", busy);
		api_failures++;
	}
	/* LW_EINVAL is also a bad semaphore weight or permit count: its text
	 * must cover bad arguments, not only NULLs and paths. */
	const char *inval = lw_strerror(LW_EINVAL);
	if (!strstr(inval, "out of range") || !strstr(inval, "semaphore weight")) {
		printf("FAIL lw_strerror(LW_EINVAL) = \"%s\", want it to cover a value out of range (a semaphore weight)\n", inval);
		api_failures++;
	}
	if (api_failures == 0)
		printf("ok\n");
	return api_failures != 0;
}
