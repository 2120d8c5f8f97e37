//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// Dead readers (issue 12, item 4): a reader process killed while it holds
// read locks must not block writers beyond the death-detection bound.
//
// Timing assumption of these tests: a writer waiting for readers checks
// every ownerCheckInterval (10 ms) whether their processes live, so it
// gets the lock about 10 ms after the dead reader's process is gone (the
// tests reap it first: a zombie counts as dead too). deadReaderBound
// allows for a loaded 2-core host, scheduled late by seconds; the tests
// also check structurally that the lock was taken because the reader was
// found dead (the object's dead-reader count and PID), so that a pass
// cannot come from the bound alone.
const deadReaderBound = 10 * time.Second

func init() {
	childModes["rlock-many"] = func(args []string) error {
		// Take n read locks from n goroutines and hold them until
		// killed. args: path, name, n.
		r, rw, err := openRWChild(args[0], args[1])
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(args[2])
		for range n {
			rw.RLock()
		}
		fmt.Println("slot", r.slot)
		fmt.Println("locked")
		time.Sleep(time.Hour)
		return nil
	}
	childModes["rw-idle"] = func(args []string) error {
		// Open the lock and idle until killed. args: path, name, mode
		// (ok, or broken: testBrokenKeepDeadCounts).
		testBrokenKeepDeadCounts = args[2] == "broken"
		r, err := Open(args[0], nil)
		if err != nil {
			return err
		}
		if _, err := r.RWMutex(args[1]); err != nil {
			return err
		}
		fmt.Println("slot", r.slot)
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return nil
	}
}

// rwWithDeadReader creates a region whose RWMutex "m" a child process
// read-locks n times; it kills and reaps the child, and returns the region,
// the lock, and the dead reader's PID and slot.
func rwWithDeadReader(t *testing.T, n int) (r *Region, rw *RWMutex, pid int, slot uint32) {
	t.Helper()
	r = mustCreate(t, tempRegionPath(t), 0)
	rw, _ = r.RWMutex("m")
	c := startChild(t, "rlock-many", r.path, "m", strconv.Itoa(n))
	s, _ := strconv.Atoi(c.expect(t, "slot "))
	c.expect(t, "locked")
	c.cmd.Process.Kill()
	c.exit()
	return r, rw, c.pid(), uint32(s)
}

// deadReaderNoted checks that rw's object counts want dead reader slots
// dropped, the last one of process pid.
func deadReaderNoted(t *testing.T, rw *RWMutex, want uint32, pid int) {
	t.Helper()
	if n, p := word32(rw.q.obj, rwObjDeadReaders).Load(), word32(rw.q.obj, rwObjDeadReaderPID).Load(); n != want || int(p) != pid {
		t.Fatalf("dead reader slots dropped %d (last PID %d), want %d (PID %d)", n, p, want, pid)
	}
}

// TestSharedRWMutexDeadReaderReleased is the regression test: a reader
// process holding three read locks is SIGKILLed; a writer (this process)
// gets the lock within the bound, without ErrOwnerDead (a reader cannot
// have left the data inconsistent), the drop is recorded, and readers and
// writers go on. Before per-process reader counts the writer waited for
// the dead reader until its context ended (DeadlineExceeded).
func TestSharedRWMutexDeadReaderReleased(t *testing.T) {
	defer watchdog("shared rw dead reader", 2*time.Minute)()
	r, rw, pid, slot := rwWithDeadReader(t, 3)
	if c := word32(rw.q.obj, rwCountOff(0, slot)).Load(); c != 3 {
		t.Fatalf("the dead reader's slot %d counts %d read holds, want 3", slot, c)
	}
	if !rw.TryRLock() {
		t.Fatal("readers blocked by a dead reader")
	}
	rw.RUnlock()
	info, err := Inspect(r.path)
	if err != nil {
		t.Fatal(err)
	}
	if o := info.Objects[0]; o.State != "free" || o.Readers != 0 || o.DeadReaders != 3 {
		t.Fatalf("inspect with a dead reader's three holds: %+v", o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadReaderBound)
	defer cancel()
	start := time.Now()
	err = rw.LockContext(ctx)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("writer behind a dead reader: %v after %v, want the lock within %v", err, took, deadReaderBound)
	}
	t.Logf("the writer got the lock %v after the dead reader was reaped", took)
	deadReaderNoted(t, rw, 1, pid)
	info, err = Inspect(r.path)
	if err != nil {
		t.Fatal(err)
	}
	if o := info.Objects[0]; o.State != "held" || o.Readers != 0 || o.DeadReaders != 0 {
		t.Fatalf("inspect while the writer holds: %+v", o)
	}
	rw.Unlock()
	rw.RLock()
	rw.RUnlock()
	if err := rwAtRest(rw); err != nil {
		t.Fatal(err)
	}
	// Dropped once: the next writer does not look at the dead slot again.
	rw.Lock()
	rw.Unlock()
	deadReaderNoted(t, rw, 1, pid)
}

// TestSharedRWMutexDeadReaderCheckerFails: the same, with a liveness
// check that takes every process for alive (processAliveFunc): the writer
// must then wait until its context ends, so the test above can fail.
func TestSharedRWMutexDeadReaderCheckerFails(t *testing.T) {
	_, rw, _, _ := rwWithDeadReader(t, 1)
	old := processAliveFunc
	processAliveFunc = func(procIdentity) bool { return true }
	defer func() { processAliveFunc = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := rw.LockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("writer behind a dead reader taken for alive: %v, want DeadlineExceeded", err)
	}
}

// TestSharedRWMutexDeadReaderBehindAbandonedWriter: a writer gives up
// behind a dead reader before it checked it (its bits stay, abandoned:
// new readers wait); a reader waiting behind it finds the dead reader and
// releases the arrival, within the bound.
func TestSharedRWMutexDeadReaderBehindAbandonedWriter(t *testing.T) {
	defer watchdog("shared rw dead reader behind an abandoned writer", 2*time.Minute)()
	r, rw, pid, _ := rwWithDeadReader(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	err := rw.LockContext(ctx) // gives up before its first liveness check
	cancel()
	if err == nil {
		// Scheduled late past its first check: it found the reader dead.
		t.Log("the writer found the dead reader before giving up")
		rw.Unlock()
		deadReaderNoted(t, rw, 1, pid)
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if s := rw.in.Load(); s&(srwWriter|srwAbandoned) != srwWriter|srwAbandoned {
		t.Fatalf("state after the writer gave up behind a dead reader: %#x, want writer|abandoned", s)
	}
	reader, _ := openHandles(t, r.path, 1)[0].RWMutex("m")
	rctx, rcancel := context.WithTimeout(context.Background(), deadReaderBound)
	defer rcancel()
	if err := reader.RLockContext(rctx); err != nil {
		t.Fatalf("reader behind an abandoned writer whose reader died: %v", err)
	}
	reader.RUnlock()
	deadReaderNoted(t, rw, 1, pid)
	if err := rwAtRest(rw); err != nil {
		t.Fatal(err)
	}
}

// TestSharedRWMutexDeadReaderSlotReused: the slot of a reader that died
// holding is taken by a new process before any writer came; the new
// process's counts must start from zero (it zeroes them before it stamps
// the slot), so a writer gets the lock at once. With the zeroing skipped
// (testBrokenKeepDeadCounts, the broken variant) the dead reader's counts
// pass for the live process's, and the writer waits until its context
// ends.
func TestSharedRWMutexDeadReaderSlotReused(t *testing.T) {
	for _, mode := range []string{"ok", "broken"} {
		t.Run(mode, func(t *testing.T) {
			r, rw, _, slot := rwWithDeadReader(t, 2)
			// A dead process's slot is reused when attach finds no free
			// one (it takes dead ones then); to have the next attach
			// take this one, mark it not live, as attach itself does
			// first when it reclaims a slot, and start the search there.
			state := word32(r.slotWord(slot), procState)
			state.Store(state.Load() &^ procLive)
			word32(r.data, hdrSlotHint).Store(slot)
			c := startChild(t, "rw-idle", r.path, "m", mode)
			if s, _ := strconv.Atoi(c.expect(t, "slot ")); uint32(s) != slot {
				t.Fatalf("the new process took slot %d, not the dead reader's %d", s, slot)
			}
			c.expect(t, "ready")
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := rw.LockContext(ctx)
			switch {
			case mode == "ok" && err != nil:
				t.Fatalf("writer after the dead reader's slot was reused: %v", err)
			case mode == "broken" && !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("with the dead counts kept, the writer got %v, want DeadlineExceeded: the test cannot fail", err)
			}
			if err == nil {
				rw.Unlock()
				deadReaderNoted(t, rw, 0, 0) // nothing was dead: the counts were zeroed
			}
		})
	}
}
