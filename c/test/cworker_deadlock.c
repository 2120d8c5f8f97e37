/* cworker_deadlock.c: the commands of the C worker that build deadlock
 * cycles across processes for c/ctest's detection tests (included by
 * cworker.c). */

/* cycle REGION HOLD WANT: lock HOLD, print "locked", wait until another
 * process holds WANT, then lock it: with its peers, a deadlock. */
static int cmd_cycle(int argc, char **argv) {
	if (argc != 5)
		return 2;
	lw_region *r;
	lw_mutex *hold = open_mutex(argv[2], argv[3], &r), *want;
	int err = lw_region_mutex(r, argv[4], &want);
	if (err || (err = lw_mutex_lock(hold)) != 0)
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
	lw_region *r;
	lw_mutex *first = open_mutex(argv[2], argv[3], &r), *second;
	int err = lw_region_mutex(r, argv[4], &second);
	if (err || (err = lw_mutex_lock(first)) != 0 || (err = lw_mutex_unlock(first)) != 0 ||
	    (err = lw_mutex_lock(second)) != 0)
		die("lock", err);
	printf("holding\n");
	fflush(stdout);
	for (;;)
		pause();
}
