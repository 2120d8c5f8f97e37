/* cworker_mpsc.c: the MPSC queue commands of the C worker (included by
 * cworker.c), the C side of c/ctest/mpsc_test.go.
 *
 *   mpsc-send REGION NAME CAP ID THREADS COUNT [claiming|claimed]
 *       THREADS producer threads, producer ids ID+0 .. ID+THREADS-1, each
 *       sends COUNT messages; then, with a step named, one more message
 *       by producer ID from a handle that stops itself (SIGSTOP) at that
 *       step (LOCKWORD_MPSC_TEST_STOP, c/mpscqueue.c), for the test to
 *       SIGKILL or continue
 *   mpsc-recv REGION NAME CAP IDS COUNT
 *       the consumer: COUNT messages from each producer id 0..IDS-1,
 *       checked (order per producer, every byte); "received N lost L"
 *   mpsc-stress THREADS COUNT [broken]
 *       in process, a fresh region: THREADS producer threads into one
 *       consumer thread, checked as mpsc-recv; broken: producer 0 sends
 *       its message 1 twice (the check must FAIL)
 *
 * Message SEQ of producer ID (mpscMessage in mpsc_test.go): 16 to 215
 * bytes: ID and SEQ as little-endian uint64s, then byte k = ID*131 +
 * SEQ*31 + k. */

static size_t mpsc_msg(unsigned char *b, uint64_t id, uint64_t seq) {
	size_t n = 16 + (size_t)((seq * 2654435761u >> 7) + id) % 200;
	memcpy(b, &id, 8);
	memcpy(b + 8, &seq, 8);
	for (size_t k = 16; k < n; k++)
		b[k] = (unsigned char)(id * 131 + seq * 31 + k);
	return n;
}

struct mpsc_prod {
	lw_region *r;
	const char *name;
	size_t cap;
	uint64_t id, count;
	bool dup; /* send message 1 twice: a queue that duplicates */
	int err;
};

static void *mpsc_prod_thread(void *p) {
	struct mpsc_prod *a = p;
	lw_mpsc *q;
	unsigned char buf[256];
	if ((a->err = lw_region_mpsc_producer(a->r, a->name, a->cap, &q)) != 0)
		return NULL;
	for (uint64_t s = 0; s < a->count && !a->err; s++) {
		if (s % 64 == 63) { /* attach again: attaching while the queue moves is checked too */
			lw_mpsc_free(q);
			if ((a->err = lw_region_mpsc_producer(a->r, a->name, a->cap, &q)) != 0) {
				printf("FAIL producer %llu attach: %d %s\n", (unsigned long long)a->id, a->err, lw_strerror(a->err));
				return NULL;
			}
		}
		size_t n = mpsc_msg(buf, a->id, a->dup && s == 2 ? 1 : s);
		a->err = s % 4 == 3 ? lw_mpsc_try_send(q, buf, n) : lw_mpsc_send(q, buf, n, 60000000000);
		if (a->err == LW_EBUSY) /* no room now: send it blocking */
			a->err = lw_mpsc_send(q, buf, n, 60000000000);
		if (a->err) /* now: the consumer waits for this producer's rest */
			printf("FAIL producer %llu message %llu: %d %s\n", (unsigned long long)a->id, (unsigned long long)s,
			       a->err, lw_strerror(a->err));
	}
	lw_mpsc_free(q);
	return NULL;
}

/* mpsc_producers runs threads producer threads, ids id.., to completion. */
static int mpsc_producers(lw_region *r, const char *name, size_t cap, uint64_t id, int threads, uint64_t count, bool dup) {
	pthread_t th[64];
	struct mpsc_prod a[64];
	if (threads > 64)
		threads = 64;
	for (int i = 0; i < threads; i++) {
		a[i] = (struct mpsc_prod){r, name, cap, id + (uint64_t)i, count, dup && i == 0, 0};
		pthread_create(&th[i], NULL, mpsc_prod_thread, &a[i]);
	}
	int err = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		if (a[i].err && !err)
			err = a[i].err;
	}
	return err;
}

/* mpsc_consume receives ids*count messages and checks each; returns the
 * number of failures (printed). */
static int mpsc_consume(lw_mpsc *q, uint64_t ids, uint64_t count) {
	uint64_t *next = calloc(ids, sizeof *next), got = 0;
	unsigned char buf[256], want[256];
	int bad = 0;
	while (got < ids * count && bad == 0) {
		size_t n;
		int err = lw_mpsc_receive(q, buf, sizeof buf, &n, 60000000000);
		if (err) {
			printf("FAIL receive after %llu: %d %s\n", (unsigned long long)got, err, lw_strerror(err));
			bad++;
			break;
		}
		uint64_t id, seq;
		memcpy(&id, buf, 8);
		memcpy(&seq, buf + 8, 8);
		if (n < 16 || id >= ids || seq != next[id]) {
			printf("FAIL message %llu: %zu bytes from producer %llu seq %llu\n", (unsigned long long)got, n,
			       (unsigned long long)id, (unsigned long long)seq);
			bad++;
			break;
		}
		if (mpsc_msg(want, id, seq) != n || memcmp(buf, want, n) != 0) {
			printf("FAIL message %llu of producer %llu: bytes differ\n", (unsigned long long)seq, (unsigned long long)id);
			bad++;
		}
		next[id] = seq + 1;
		got++;
	}
	uint64_t lost = 0;
	int err = lw_mpsc_lost(q, &lost);
	printf("received %llu lost %llu\n", (unsigned long long)got, (unsigned long long)lost);
	if (err) {
		printf("FAIL lost: %d %s\n", err, lw_strerror(err));
		bad = 1;
	}
	free(next);
	return bad;
}

static int cmd_mpsc_send(int argc, char **argv) {
	if (argc != 8 && argc != 9)
		return 2;
	lw_region *r;
	int err = lw_region_open(argv[2], &r);
	if (err)
		die("open", err);
	size_t cap = strtoull(argv[4], NULL, 10);
	uint64_t id = strtoull(argv[5], NULL, 10), count = strtoull(argv[7], NULL, 10);
	if ((err = mpsc_producers(r, argv[3], cap, id, atoi(argv[6]), count, false)) != 0)
		die("send", err);
	printf("sent\n");
	fflush(stdout);
	if (argc == 9) { /* one more message, from a handle that stops at the step */
		lw_mpsc *q;
		unsigned char buf[256];
		setenv("LOCKWORD_MPSC_TEST_STOP", argv[8], 1);
		if ((err = lw_region_mpsc_producer(r, argv[3], cap, &q)) != 0)
			die("producer", err);
		size_t n = mpsc_msg(buf, id, count);
		if ((err = lw_mpsc_send(q, buf, n, -1)) != 0)
			die("send at the step", err);
		return 0; /* continued, not killed */
	}
	return lw_region_close(r) ? 1 : 0;
}

static int cmd_mpsc_recv(int argc, char **argv) {
	if (argc != 7)
		return 2;
	lw_region *r;
	lw_mpsc *q;
	int err = lw_region_open(argv[2], &r);
	if (err || (err = lw_region_mpsc_consumer(r, argv[3], strtoull(argv[4], NULL, 10), &q)) != 0)
		die("consumer", err);
	printf("attached\n");
	fflush(stdout);
	int bad = mpsc_consume(q, strtoull(argv[5], NULL, 10), strtoull(argv[6], NULL, 10));
	lw_mpsc_close(q);
	lw_mpsc_free(q);
	return bad || lw_region_close(r) ? 1 : 0;
}

struct mpsc_stress_prod {
	lw_region *r;
	int threads;
	uint64_t count;
	bool broken;
	int err;
};

static void *mpsc_stress_producers(void *p) {
	struct mpsc_stress_prod *a = p;
	a->err = mpsc_producers(a->r, "mq", 1024, 0, a->threads, a->count, a->broken);
	return NULL;
}

static int cmd_mpsc_stress(int argc, char **argv) {
	if (argc != 4 && argc != 5)
		return 2;
	bool broken = argc == 5 && !strcmp(argv[4], "broken");
	char path[128];
	snprintf(path, sizeof path, "lockword-cmpsc-%d", (int)getpid());
	lw_region *r;
	lw_mpsc *q;
	int err = lw_region_create(path, 0, &r);
	if (err || (err = lw_region_mpsc_consumer(r, "mq", 1024, &q)) != 0)
		die("create", err);
	/* A small queue (1 KiB, 5 to 14 messages) keeps producers waiting on
	 * one another and on the consumer: claims, padding and sleeps. */
	struct mpsc_stress_prod a = {r, atoi(argv[2]), strtoull(argv[3], NULL, 10), broken, 0};
	pthread_t th;
	pthread_create(&th, NULL, mpsc_stress_producers, &a);
	int bad = mpsc_consume(q, (uint64_t)a.threads, a.count);
	if (bad)
		lw_mpsc_close(q); /* producers blocked on a full queue return */
	pthread_join(th, NULL);
	if (a.err && !bad) {
		printf("FAIL producers: %d %s\n", a.err, lw_strerror(a.err));
		bad++;
	}
	lw_mpsc_free(q);
	if ((err = lw_region_close(r)) != 0)
		die("close", err);
	char full[160];
	snprintf(full, sizeof full, "/dev/shm/%s", path);
	unlink(full);
	return bad != 0;
}
