//go:build linux

package shm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword"
)

// TestSharedSemaphoreHousekeeping: a process killed holding 3 of 4
// permits; with no acquirer at all, another attach's Open (or, if it had
// opened before the death, its Close) gives the 3 back, once. The check
// is structural (the words after the call), not a latency.
func TestSharedSemaphoreHousekeeping(t *testing.T) {
	for _, step := range []string{"open", "close"} {
		t.Run(step, func(t *testing.T) {
			if n := semHousekeeping(t, step); n != 3 {
				t.Fatalf("%s after a holder of 3 died: %d permits recovered, want 3", step, n)
			}
		})
	}
}

// TestSharedSemaphoreHousekeepingCheckerFails: with housekeeping turned
// off, the same steps must leave the permits held by the dead.
func TestSharedSemaphoreHousekeepingCheckerFails(t *testing.T) {
	testSemHousekeepingOff = true
	defer func() { testSemHousekeepingOff = false }()
	if n := semHousekeeping(t, "open"); n != 0 {
		t.Fatalf("housekeeping off: %d permits recovered, want 0", n)
	}
}

// semHousekeeping kills a holder of 3 permits and opens and closes another
// handle on the region (opened after the death for step "open", before it
// for "close"); it checks the words and returns the permits recovered.
func semHousekeeping(t *testing.T, step string) uint64 {
	defer watchdog("shared semaphore housekeeping", 2*time.Minute)()
	path, s := semRegion(t)
	var other *Region
	if step == "close" {
		other = must(Open(path, nil))
	}
	killSemHolder(t, path, 3)
	if step == "open" {
		other = must(Open(path, nil))
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	n := word64(s.obj, semObjRecovered).Load()
	if inUse := word32(s.obj, semObjInUse).Load(); uint64(inUse) != 3-n {
		t.Fatalf("%d permits in use after %d were recovered from a holder of 3", inUse, n)
	}
	return n
}

// TestSharedSemaphoreHousekeepingRace: opens and closes racing an
// acquirer of all 4 permits over a dead holder of 3: the 3 come back once
// (the recovered count is 3, one dead holder), whoever took them.
func TestSharedSemaphoreHousekeepingRace(t *testing.T) {
	defer watchdog("shared semaphore housekeeping race", 2*time.Minute)()
	path, s := semRegion(t)
	killSemHolder(t, path, 3)
	var wg sync.WaitGroup
	var stop atomic.Bool
	for range 2 {
		wg.Go(func() {
			for !stop.Load() { // each Open and Close reaps
				if o, err := Open(path, nil); err != nil {
					t.Error(err)
					return
				} else if err := o.Close(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadReaderBound)
	defer cancel()
	err := s.Acquire(ctx, 4)
	stop.Store(true)
	wg.Wait()
	if err != nil && !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("Acquire(4) racing housekeeping: %v", err)
	}
	s.Release(4)
	if n, d := word64(s.obj, semObjRecovered).Load(), word32(s.obj, semObjDeadHolders).Load(); n != 3 || d != 1 {
		t.Fatalf("%d permits recovered from %d dead entries, want 3 from 1", n, d)
	}
}
