//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword"
	"os"
	"syscall"
	"testing"
	"time"
)

// Regression tests for the interleavings that models/sharedrw.pml found.

func init() {
	childModes["lock-give-up-die"] = func(args []string) error {
		// A writer that gives up behind a reader and is killed between
		// abandoning its arrival and finishing its ticket. args: path, name.
		_, rw, err := openRWChild(args[0], args[1])
		if err != nil {
			return err
		}
		testHookArriveGaveUp = func() {
			fmt.Println("dying")
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		fmt.Println("locking")
		return fmt.Errorf("LockContext returned %v instead of the hook killing us", rw.LockContext(ctx))
	}
}

// TestSharedRWMutexWriterDiesGivingUp stages the interleaving SPIN found
// (models/sharedrw.pml, -DBROKEN_HOLD_FIRST): writer 2 gives up behind a
// reader and its process dies before it has finished its ticket. Its
// ticket must be retired as a waiter's, not a holder's: were it marked
// held, the next writer would be told of an owner death and take the
// abandoned writer bits for a dead holder's, entering while the reader
// is still inside.
func TestSharedRWMutexWriterDiesGivingUp(t *testing.T) {
	defer watchdog("shared rw writer dies giving up", time.Minute)()
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	rw, _ := r.RWMutex("m")
	rw.RLock() // the reader writer 2 counts
	c := startChild(t, "lock-give-up-die", path, "m")
	c.expect(t, "dying")
	c.cmd.Wait() // killed by its hook

	// Writer 3 retires the dead writer's ticket and must then wait for
	// the reader, not take the lock.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := rw.LockContext(ctx)
	cancel()
	if err == nil || errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("writer 3 took the lock (%v) while a reader holds it; in %#x", err, rw.in.Load())
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("writer 3 behind a reader: %v, want DeadlineExceeded", err)
	}
	rw.RUnlock()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rw.LockContext(ctx); err != nil {
		t.Fatalf("writer 4 once the reader left: %v, want the lock", err)
	}
	rw.Unlock()
	if err := queueAtRest(&rw.q); err != nil {
		t.Fatal(err)
	}
	if err := rwAtRest(rw); err != nil {
		t.Fatalf("at rest: %v", err)
	}
}
