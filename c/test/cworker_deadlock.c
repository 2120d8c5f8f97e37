/* cworker_deadlock.c: the commands of the C worker that build deadlock
 * cycles across processes for c/ctest's detection tests (included by
 * cworker.c). */

/* open_two_mutexes opens argv[2]'s mutexes argv[3] and argv[4], or dies. */
static void open_two_mutexes(char **argv, lw_mutex **m1, lw_mutex **m2) {
	lw_region *r;
	*m1 = open_mutex(argv[2], argv[3], &r);
	int err = lw_region_mutex(r, argv[4], m2);
	if (err)
		die("mutex", err);
}

/* cycle REGION HOLD WANT: lock HOLD, print "locked", wait until another
 * process holds WANT, then lock it: with its peers, a deadlock. */
static int cmd_cycle(int argc, char **argv) {
	if (argc != 5)
		return 2;
	lw_mutex *hold, *want;
	open_two_mutexes(argv, &hold, &want);
	int err = lw_mutex_lock(hold);
	if (err)
		die("lock", err);
	printf("locked\n");
	fflush(stdout);
	while (!(lw_mutex_word(want) & LW_OWNER_MASK))
		usleep(1000);
	die("lock returned", lw_mutex_lock(want));
	return 1;
}

/* wait-then-hold REGION FIRST SECOND: lock FIRST (held by the test, so this
 * sleeps and records the wait), unlock it, lock SECOND, print "holding"
 * and sleep: a process that no longer waits. */
static int cmd_wait_then_hold(int argc, char **argv) {
	if (argc != 5)
		return 2;
	lw_mutex *first, *second;
	open_two_mutexes(argv, &first, &second);
	int err;
	if ((err = lw_mutex_lock(first)) != 0 || (err = lw_mutex_unlock(first)) != 0 || (err = lw_mutex_lock(second)) != 0)
		die("lock", err);
	printf("holding\n");
	fflush(stdout);
	for (;;)
		pause();
}
