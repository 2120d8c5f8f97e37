package torture

// The readers of torture -lock shared-rw (-procs): on about half of its
// iterations a worker first reads, under shm.RWMutex's read lock, then
// writes as every -procs worker does. A reader checks, inside, that no
// writer is inside (the owner slot, which only writers set, is free) and
// that the counter does not change while it reads it twice with busy work
// between; it marks itself in the reader area while inside, so that the
// -kill supervisor can aim at read holders too (catchReader), and commits
// its read count there after RUnlock: a replacement process continues
// from it. Reads add no acquisitions to the write side's accounting, so
// the counter's exact total is the same check as for the other kinds; a
// killed reader needs no recovery (readers write nothing the lock
// guards), and the supervisor times how long the next write takes to
// complete after it (a writer blocked by a dead reader is the bug).

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/lockword/lockword/shm"
)

const (
	// readersName is the reader area, a Bytes object of its own so that
	// the shared state's layout, which the C and Python workers share,
	// stays as it is: per worker id 0..workers, reads[id] (committed
	// reads), readViolations[id] and reading[id] (1 while inside).
	readersName = "torture-readers"
	// breakReadersEnv: tests only: readers take no read lock, so that
	// their checks must see writers inside.
	breakReadersEnv = "LOCKWORD_TORTURE_BREAK_READERS"
)

func readersSize(workers int) int { return 3 * 8 * (workers + 1) }

func readsOff(id int) int { return 8 * id }

func readViolOff(workers, id int) int { return 8*(workers+1) + 8*id }

func readingOff(workers, id int) int { return 16*(workers+1) + 8*id }

// hasReaders reports whether the -procs kind's workers also read.
func hasReaders(kind string) bool { return kind == "shared-rw" }

// fastReads reports whether a run of kind leaves the lock's statistics
// off: with -kill, for a kind with readers, since a shm.RWMutex with
// statistics sends every RLock down its slow path (to count it), and the
// kills are to hit readers on the fast path too. Runs without -kill keep
// them, and check that the acquisitions counted are the writes plus the
// reads.
func fastReads(cfg *config, kind string) bool { return cfg.kill && hasReaders(kind) }

// openReaders returns the reader area of r's run, nil for kinds without
// readers.
func openReaders(r *shm.Region, kind string, workers int) ([]byte, error) {
	if !hasReaders(kind) {
		return nil, nil
	}
	return r.Bytes(readersName, readersSize(workers))
}

// A procRLock is the read side of a -procs kind with readers.
type procRLock interface {
	RLockContext(ctx context.Context) error
	RUnlock()
}

// procRead is one read of worker id: lock for reading (with the harness's
// hangTimeout: a reader that cannot get in that long is hung), check that
// no writer is inside and that the counter stands still, unlock, commit.
func procRead(spec *workerSpec, rl procRLock, st, rd []byte, id, steps int, sink *uint64) error {
	if !spec.BreakReaders {
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		err := rl.RLockContext(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("worker %d: RLockContext: %w", id, err)
		}
	}
	put(rd, readingOff(spec.Workers, id), 1)
	var viol uint64
	if get(st, stOwner) != 0 {
		viol++ // a writer is inside
	}
	c := get(st, stCounter)
	*sink = busyWork(*sink, steps)
	if spec.Kill {
		*sink = busyWork(*sink, killWindowSteps) // a window for the aimed kills
	}
	if get(st, stCounter) != c || get(st, stOwner) != 0 {
		viol++ // a writer came in while we read
	}
	put(rd, readingOff(spec.Workers, id), 0)
	if !spec.BreakReaders {
		rl.RUnlock()
	}
	put(rd, readViolOff(spec.Workers, id), get(rd, readViolOff(spec.Workers, id))+viol)
	put(rd, readsOff(id), get(rd, readsOff(id))+1)
	return nil
}

// readsThisTime decides whether a worker reads before this iteration's
// write: about half the time.
func readsThisTime(rng *rand.Rand) bool { return rng.IntN(2) == 0 }

// readTotals sums the reader area: committed reads and reader violations.
func readTotals(rd []byte, workers int) (reads, violations int64) {
	for id := 1; id <= workers; id++ {
		reads += int64(get(rd, readsOff(id)))
		violations += int64(get(rd, readViolOff(workers, id)))
	}
	return reads, violations
}

// readingAmong reports whether a worker of ids is marked inside a read.
func readingAmong(rd []byte, workers int, ids []int) bool {
	for _, id := range ids {
		if get(rd, readingOff(workers, id)) != 0 {
			return true
		}
	}
	return false
}

// clearReading drops the reading marks of ids, the workers of a process
// that the supervisor killed and has judged: nobody else writes them, and
// a stale mark would aim a later kill at a replacement that holds nothing.
func clearReading(rd []byte, workers int, ids []int) {
	for _, id := range ids {
		put(rd, readingOff(workers, id), 0)
	}
}
