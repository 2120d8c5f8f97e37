//go:build ignore

/*
 * errors.c: lw_strerror: one message per LW_ code.
 *
 * Go twin: corrupt.go, shm/regionopen.go (the sentinel errors).
 */
#include "internal.h"

/* ---- Errors ---- */

const char *lw_strerror(int code) {
	switch (code) {
	case 0:
		return "success";
	case LW_ENOTREGULAR:
		return "lockword: region path is not a regular file";
	case LW_ENOTINIT:
		return "lockword: region header was never initialized";
	case LW_EBADMAGIC:
		return "lockword: not a lockword region (bad magic)";
	case LW_EBADVERSION:
		return "lockword: unsupported region ABI version";
	case LW_EBADSIZE:
		return "lockword: region size does not match the file";
	case LW_EBADCHECKSUM:
		return "lockword: region header checksum mismatch";
	case LW_EOBJNAME:
		return "lockword: bad region object name";
	case LW_EOBJKIND:
		return "lockword: bad region object kind";
	case LW_EOBJBOUNDS:
		return "lockword: region object out of bounds (or it exists with another size or capacity than asked)";
	case LW_EOBJALIGN:
		return "lockword: region object misaligned";
	case LW_EFOREIGNPIDNS:
		return "lockword: region is in use by processes of another PID namespace";
	case LW_EREGIONFULL:
		return "lockword: region full";
	case LW_ETOOMANYPROCS:
		return "lockword: region process table full";
	case LW_EREGIONBUSY:
		return "lockword: region in use";
	case LW_ETOOSMALL:
		return "lockword: requested region size is too small";
	case LW_ERINGCORRUPT:
		return "lockword: shared ring corrupt";
	case LW_EPEERDEAD:
		return "lockword: the other side of the shared ring died";
	case LW_ERINGBUSY:
		return "lockword: shared ring role already taken by a live process";
	case LW_ERINGCLOSED:
		return "lockword: ring closed";
	case LW_EMSGSIZE:
		return "lockword: message larger than the shared ring can hold (or the buffer)";
	case LW_EUNSAFEPERMS:
		return "lockword: region file is writable by other users";
	case LW_ETRUNCATED:
		return "lockword: region file truncated";
	case LW_ECORRUPT:
		return "lockword: corrupt shared object";
	case LW_EPERMITS:
		return "lockword: shared semaphore exists with another number of permits";
	/* The POSIX codes get lockword's meaning: strerror(ETIMEDOUT) says
	 * "Connection timed out", which misleads a lock's caller. */
	case LW_EPERM:
		return "lockword: operation not permitted (unlock by a non-holder, or a system call refused)";
	case LW_EBUSY:
		return "lockword: busy (a trylock found the lock held, or a try send or receive found no room or no message)";
	case LW_EINVAL:
		return "lockword: invalid argument (a NULL pointer, an empty path, a value out of range such as a semaphore weight, permit count or mode bits, or a ring or queue handle of the other role)";
	case LW_ETIMEDOUT:
		return "lockword: timed out (the deadline passed first)";
	case LW_EOWNERDEAD:
		return "lockword: previous holder of the shared lock died while holding it";
	case LW_ENOTRECOVERABLE:
		return "lockword: shared lock is not recoverable";
	}
	return code > 0 && code < LW_EBASE ? strerror(code) : "lockword: unknown error code";
}
