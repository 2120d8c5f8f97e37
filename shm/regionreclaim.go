package shm

import (
	"fmt"
	"io/fs"
	"os"
)

// An abandoned creation is a region file whose creator died (or failed
// without removing it) between creating the file and publishing the
// header's magic. It is recognised by three facts, checked in this order
// under the file lock (docs/shared-memory.md argues the rule):
//
//   - nobody holds the region's file lock: a creator holds it from just
//     after creating the file until it has published the header and
//     attached, so a running creator past that point is excluded, and the
//     kernel releases a dead creator's lock;
//   - the magic is zero: the header was never published;
//   - the object and process tables are all zero: objects are allocated
//     and processes attach only after the magic is published, so a region
//     that was ever in use (whose magic was later overwritten) is never
//     taken for an abandoned creation.
//
// A creator that is alive but has not yet taken the lock (it created the
// file a moment ago) is not excluded by the lock: it checks the magic once
// it holds the lock (initRegion), and if an opener has reclaimed and
// published the region meanwhile it leaves it alone (errPublishedMeanwhile).

// testHookBeforePublish, if set, runs in initRegion before the magic is
// published: a test's creator stops there to be killed mid-creation.
var testHookBeforePublish func()

// errPublishedMeanwhile: another process published the header of a file we
// were about to initialize: it is a region now, ours to open, not to
// write or remove.
var errPublishedMeanwhile = fmt.Errorf("%w (its header was published by another process meanwhile)", fs.ErrExist)

// reclaimAbandoned opens path anew and, if it is an abandoned creation,
// initializes it as its creator would have (size: the file's, if the
// creator had sized it, else size, else DefaultRegionSize) and attaches.
// It returns nil, nil if the file is not an abandoned creation (its lock
// is held, or its tables are in use), and the open's result if the header
// was published meanwhile.
func reclaimAbandoned(path string, size int64, lim openLimits, allowUnsafe bool) (*Region, error) {
	fd, err := sysOpen(path, false)
	if err != nil {
		return nil, sysOpenError(err)
	}
	owned := true
	defer func() {
		if owned {
			os.NewFile(uintptr(fd), path).Close()
		}
	}()
	st, err := sysFstat(fd)
	if err != nil || !st.regular {
		return nil, err
	}
	if !allowUnsafe {
		if err := checkPermissions(fd, st); err != nil {
			return nil, err
		}
	}
	if taken, err := sysFlockTry(fd, lockExclusive); err != nil || !taken {
		return nil, err
	}
	head := make([]byte, regionArenaOffset)
	if _, err := sysPread(fd, head, 0); err != nil { // short: the rest reads as zero
		return nil, err
	}
	if !allZero(head[hdrMagic : hdrMagic+8]) {
		flock(fd, lockUnlock)
		owned = false
		return openFD(path, fd, false, lim, modeOpen, allowUnsafe)
	}
	if !allZero(head[regionTableOffset:]) {
		return nil, nil
	}
	switch {
	case st.size >= regionMinSize:
		size = st.size
	case size == 0:
		size = DefaultRegionSize
	case size < regionMinSize:
		return nil, fmt.Errorf("%w: %d bytes requested, minimum %d", ErrRegionTooSmall, size, regionMinSize)
	}
	owned = false
	// initRegion takes the lock we hold (the same open file: at once),
	// finds the magic still zero, and on failure closes fd and leaves the
	// file as it found it, for the next opener.
	return initRegion(path, fd, size, lim, func() {})
}
