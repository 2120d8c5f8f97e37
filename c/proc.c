//go:build ignore

/*
 * proc.c: Process identity from /proc: PID, start time, boot ID and PID namespace,
 * and whether a recorded identity is still the same live process. A
 * reused PID never makes a dead holder look alive.
 *
 * Go twin: shm/proc_linux.go.
 */
#include "internal.h"

/* read_file reads up to n-1 bytes of path into buf, NUL-terminated. */
static int read_file(const char *path, char *buf, size_t n, size_t *got) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t total = 0;
	while (total < n - 1) {
		ssize_t k = read(fd, buf + total, n - 1 - total);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return e;
		}
		if (k == 0)
			break;
		total += (size_t)k;
	}
	close(fd);
	buf[total] = 0;
	*got = total;
	return 0;
}

#define ERR_NO_PROCESS (-1)

/* read_proc_stat is readProcStat: the state letter and start time (field
 * 22) of /proc/PID/stat, counting fields from the last ')'. */
static int read_proc_stat(uint32_t pid, char *state, uint64_t *start) {
	char path[64], buf[4096];
	size_t n;
	snprintf(path, sizeof path, "/proc/%u/stat", pid);
	int err = read_file(path, buf, sizeof buf, &n);
	if (err == ENOENT || err == ESRCH)
		return ERR_NO_PROCESS;
	if (err)
		return err;
	char *p = strrchr(buf, ')');
	if (!p)
		return EINVAL;
	p++;
	char *fields[20];
	int nf = 0;
	while (nf < 20) {
		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		if (!*p)
			break;
		fields[nf++] = p;
		while (*p && *p != ' ' && *p != '\n' && *p != '\t')
			p++;
	}
	if (nf < 20 || fields[0][1] != ' ')
		return EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(fields[19], &end, 10);
	if (errno || end == fields[19] || (*end != ' ' && *end != '\n' && *end != 0))
		return EINVAL;
	*state = fields[0][0];
	*start = v;
	return 0;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* boot_id is bootID: /proc/sys/kernel/random/boot_id as 16 bytes. */
static int boot_id(unsigned char id[16]) {
	char buf[128], hex[64];
	size_t n, h = 0;
	int err = read_file("/proc/sys/kernel/random/boot_id", buf, sizeof buf, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == '-' || c == ' ' || c == '\n' || c == '\t' || c == '\r')
			continue;
		if (h == sizeof hex)
			return EINVAL;
		hex[h++] = c;
	}
	if (h != 32)
		return EINVAL;
	for (int i = 0; i < 16; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return EINVAL;
		id[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* self_identity is selfIdentity (read per region open: a forked child is
 * another process). */
static int self_identity(lw_ident *me) {
	memset(me, 0, sizeof *me);
	me->pid = (uint32_t)getpid();
	char state;
	int err = read_proc_stat(me->pid, &state, &me->start);
	if (err)
		return err == ERR_NO_PROCESS ? ESRCH : err;
	struct stat st;
	if (stat("/proc/self/ns/pid", &st) == 0)
		me->pidns = (uint64_t)st.st_ino;
	return boot_id(me->boot);
}

/* process_alive is processAlive: errs towards alive. Built with
 * -DLW_TEST_BROKEN_ALIVE it declares every other process dead, a broken
 * check that the tests must catch (TestBrokenLivenessIsCaught). */
static bool process_alive(const lw_ident *me, const lw_ident *id) {
#ifdef LW_TEST_BROKEN_ALIVE
	if (id->pid != me->pid)
		return false;
#endif
	if (memcmp(id->boot, me->boot, 16) != 0)
		return false; /* registered during an earlier boot */
	if (id->pidns == 0 || id->pidns != me->pidns)
		return true; /* cannot check the PID here: never rob */
	if (id->pid == me->pid)
		return id->start == me->start;
	if (id->pid == 0 || id->pid > (1u << 22))
		return false;
	if (kill((pid_t)id->pid, 0) != 0 && errno == ESRCH)
		return false;
	char state;
	uint64_t start;
	int err = read_proc_stat(id->pid, &state, &start);
	if (err == ERR_NO_PROCESS)
		return !(kill((pid_t)id->pid, 0) != 0 && errno == ESRCH);
	if (err)
		return true;
	if (state == 'Z' || state == 'X')
		return false;
	return start == id->start;
}
