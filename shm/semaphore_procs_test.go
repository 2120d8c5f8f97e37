//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Cross-process tests of Semaphore: children (TestSharedChild modes)
// that hold, wait, die, or hammer it with a checked critical section.

// The stress children's shared counters, in a Bytes object "check".
const (
	semChkInUse      = 0  // uint64: permits held, counted under them
	semChkAcquired   = 8  // uint64: acquisitions
	semChkPermits    = 16 // uint64: permits acquired in all
	semChkViolations = 24 // uint64: checks failed
	semChkOwners     = 64 // uint32 per permit: the holder's PID while held
	semChkSize       = semChkOwners + 4*64
)

func init() {
	childModes["sem-hold"] = func(args []string) error {
		// Acquire k permits and hold them until killed. args: path,
		// name, permits, k.
		s, err := openSemChild(args)
		if err != nil {
			return err
		}
		k, _ := strconv.ParseInt(args[3], 10, 64)
		fmt.Println("slot", s.r.slot)
		if err := s.Acquire(context.Background(), k); err != nil {
			return err
		}
		fmt.Println("held")
		time.Sleep(time.Hour)
		return nil
	}
	childModes["sem-stress"] = func(args []string) error {
		// goroutines × iterations checked acquisitions. args: path,
		// name, permits, iterations, goroutines.
		s, err := openSemChild(args)
		if err != nil {
			return err
		}
		chk, err := s.r.Bytes("check", semChkSize)
		if err != nil {
			return err
		}
		iters, _ := strconv.Atoi(args[3])
		workers, _ := strconv.Atoi(args[4])
		var wg sync.WaitGroup
		var failed atomic.Value
		for g := range workers {
			wg.Go(func() {
				for i := range iters {
					k := int64(1 + (i*7+g*3+os.Getpid())%int(s.Capacity()))
					if err := s.Acquire(context.Background(), k); err != nil {
						failed.Store(err)
						return
					}
					semSection(chk, k, s.Capacity())
					s.Release(k)
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			return err
		}
		fmt.Println("done")
		return nil
	}
}

func openSemChild(args []string) (*Semaphore, error) {
	r, err := Open(args[0], nil)
	if err != nil {
		return nil, err
	}
	permits, _ := strconv.ParseInt(args[2], 10, 64)
	return r.Semaphore(args[1], permits)
}

// semSection is the checked critical section of k permits of capacity c:
// the separate in-use counter must stay within c, and k free owner slots
// (one per permit) must be there to claim, on entry; on exit, they still
// name us.
func semSection(chk []byte, k, c int64) {
	me := uint32(os.Getpid())
	bad := word64(chk, semChkViolations)
	if n := word64(chk, semChkInUse).Add(uint64(k)); n > uint64(c) {
		bad.Add(1)
	}
	var mine []uint64
	for i := uint64(0); i < uint64(c) && len(mine) < int(k); i++ {
		if word32(chk, semChkOwners+4*i).CompareAndSwap(0, me) {
			mine = append(mine, i)
		}
	}
	if len(mine) != int(k) {
		bad.Add(1) // fewer free permits than the semaphore granted
	}
	for _, i := range mine {
		if !word32(chk, semChkOwners+4*i).CompareAndSwap(me, 0) {
			bad.Add(1)
		}
	}
	word64(chk, semChkInUse).Add(^uint64(k - 1))
	word64(chk, semChkAcquired).Add(1)
	word64(chk, semChkPermits).Add(uint64(k))
}

// TestSharedSemaphoreProcs: four processes (more than the CI's two cores)
// of two goroutines each take weighted permits of a 3-permit semaphore;
// the checked section never sees more than 3 in use, and the totals are
// exact.
func TestSharedSemaphoreProcs(t *testing.T) {
	defer watchdog("shared semaphore procs", 3*time.Minute)()
	const procs, workers, permits = 4, 2, 3
	iters := 300
	if testing.Short() {
		iters = 50
	}
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	s, err := r.Semaphore("sem", permits)
	if err != nil {
		t.Fatal(err)
	}
	chk, err := r.Bytes("check", semChkSize)
	if err != nil {
		t.Fatal(err)
	}
	var children []*child
	for range procs {
		children = append(children, startChild(t, "sem-stress", path, "sem", fmt.Sprint(permits), fmt.Sprint(iters), fmt.Sprint(workers)))
	}
	var want uint64
	for _, c := range children {
		c.expect(t, "done")
		c.wait(t)
		for g := range workers {
			for i := range iters {
				want += uint64(1 + (i*7+g*3+c.pid())%permits)
			}
		}
	}
	if v := word64(chk, semChkViolations).Load(); v != 0 {
		t.Fatalf("%d violations of the permit count", v)
	}
	if n, p := word64(chk, semChkAcquired).Load(), word64(chk, semChkPermits).Load(); n != procs*workers*uint64(iters) || p != want {
		t.Fatalf("%d acquisitions of %d permits, want %d of %d", n, p, procs*workers*iters, want)
	}
	if n := word32(s.obj, semObjInUse).Load(); n != 0 || !s.TryAcquire(permits) {
		t.Fatalf("%d permits in use after every process released", n)
	}
	s.Release(permits)
}

// TestSharedSemaphoreDeadHolder: a process killed holding 3 of 4
// permits; the next Acquire of all 4 takes them back and says so
// (lockword.ErrOwnerDead with the PID and the count), once. Bound: deadReaderBound
// (a loaded 2-core host); the check is structural (the error's PID and
// count, the object's recovered count), not a latency.
func TestSharedSemaphoreDeadHolder(t *testing.T) {
	defer watchdog("shared semaphore dead holder", 2*time.Minute)()
	path, s := semRegion(t)
	pid := killSemHolder(t, path, 3)
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if o := info.Objects[0]; o.State != "owner-dead" || o.Semaphore.InUse != 3 || o.Semaphore.DeadHolders != 1 ||
		len(o.Semaphore.Processes) != 1 || o.Semaphore.Processes[0].PID != pid || o.Semaphore.Processes[0].Held != 3 {
		t.Fatalf("inspect with a dead holder of 3: %+v %+v", o, o.Semaphore)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadReaderBound)
	defer cancel()
	start := time.Now()
	err = s.Acquire(ctx, 4)
	var de *SemaphoreOwnerDeadError
	if !errors.As(err, &de) || !errors.Is(err, lockword.ErrOwnerDead) || de.PID != pid || de.Permits != 3 || de.Holders != 1 {
		t.Fatalf("Acquire(4) after a holder of 3 died: %v, want a SemaphoreOwnerDeadError for PID %d, 3 permits", err, pid)
	}
	t.Logf("%v after %v", err, time.Since(start))
	if s.Held() != 4 {
		t.Fatalf("holds %d after the recovery, want 4", s.Held())
	}
	s.Release(4)
	if err := s.Acquire(ctx, 4); err != nil {
		t.Fatalf("second Acquire(4): %v, want nil (recovered once)", err)
	}
	s.Release(4)
	if n := word64(s.obj, semObjRecovered).Load(); n != 3 {
		t.Fatalf("%d permits recovered in all, want 3", n)
	}
}

// TestSharedSemaphoreDeadHolderCheckerFails: with every process taken for
// alive, the same Acquire must wait until its context ends, so the test
// above can fail.
func TestSharedSemaphoreDeadHolderCheckerFails(t *testing.T) {
	path, s := semRegion(t)
	killSemHolder(t, path, 3)
	processAliveFunc = func(procIdentity) bool { return true }
	defer func() { processAliveFunc = processAlive }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Acquire(ctx, 4); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a broken liveness check: %v, want DeadlineExceeded", err)
	}
}

// TestSharedSemaphoreDeadWaiter: a process killed while first in the queue
// is dropped from it, so the waiter behind gets its permit.
func TestSharedSemaphoreDeadWaiter(t *testing.T) {
	defer watchdog("shared semaphore dead waiter", 2*time.Minute)()
	path, sems := semHandles(t, 2, 2)
	holder, behind := sems[0], sems[1]
	if err := holder.Acquire(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "sem-hold", path, "sem", "2", "2")
	c.expect(t, "slot ")
	semWaiting(t, holder, 1)
	c.cmd.Process.Kill()
	c.exit()
	done := make(chan error)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadReaderBound)
		defer cancel()
		done <- behind.Acquire(ctx, 1)
	}()
	for word32(behind.me, semSlotTicket).Load() == 0 { // queued, behind the dead waiter or after reaping it
		time.Sleep(time.Millisecond)
	}
	holder.Release(1)
	if err := <-done; err != nil {
		t.Fatalf("Acquire(1) behind a dead waiter: %v", err)
	}
	if n := word32(holder.obj, semObjDeadHolders).Load(); n != 1 {
		t.Fatalf("%d dead entries cleared, want 1", n)
	}
	behind.Release(1)
	holder.Release(1)
}

// killSemHolder starts a child that holds k permits of "sem" (4 permits)
// in path, kills and reaps it, and returns its PID.
// semRegion creates a region with a Semaphore "sem" of 4 permits, the
// one that killSemHolder's child holds.
func semRegion(t *testing.T) (path string, s *Semaphore) {
	t.Helper()
	path = tempRegionPath(t)
	s, err := mustCreate(t, path, 0).Semaphore("sem", 4)
	if err != nil {
		t.Fatal(err)
	}
	return path, s
}

func killSemHolder(t *testing.T, path string, k int) int {
	t.Helper()
	c := startChild(t, "sem-hold", path, "sem", "4", fmt.Sprint(k))
	c.expect(t, "held")
	c.cmd.Process.Kill()
	c.exit()
	return c.pid()
}
