//go:build linux

package ctest

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword/shm"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// SharedSemaphore across the two implementations: one queue, one count,
// one entry per process, whichever language the process is written in.

// The checked section's words, as c/test/cworker_sem.c lays them out.
const (
	semChkInUse      = 0
	semChkAcquired   = 8
	semChkPermits    = 16
	semChkViolations = 24
	semChkOwners     = 64
	semChkSize       = 64 + 4*64
)

func chk64(b []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[off])) }
func chk32(b []byte, off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&b[off])) }

// semSection is cworker_sem.c's checked section, in Go.
func semSection(c []byte, k, capacity int64, me uint32) {
	var bad uint64
	if chk64(c, semChkInUse).Add(uint64(k)) > uint64(capacity) {
		bad++
	}
	var mine []int
	for p := 0; p < int(capacity) && len(mine) < int(k); p++ {
		if chk32(c, semChkOwners+4*p).CompareAndSwap(0, me) {
			mine = append(mine, p)
		}
	}
	if len(mine) != int(k) {
		bad++
	}
	for _, p := range mine {
		if !chk32(c, semChkOwners+4*p).CompareAndSwap(me, 0) {
			bad++
		}
	}
	chk64(c, semChkInUse).Add(^uint64(k - 1))
	chk64(c, semChkAcquired).Add(1)
	chk64(c, semChkPermits).Add(uint64(k))
	chk64(c, semChkViolations).Add(bad)
}

// TestCSemaphoreMixed: two C processes and two Go handles (each attached
// on its own, so a process to the semaphore) take weighted permits of a
// 3-permit semaphore through the checked section: no over-grant, exact
// totals.
func TestCSemaphoreMixed(t *testing.T) {
	b := cBuild(t, "plain")
	path, r := goRegion(t)
	const permits, iters = 3, 100
	s, err := r.Semaphore("sem", permits)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Bytes("check", semChkSize)
	if err != nil {
		t.Fatal(err)
	}
	var cs []*proc
	for range 2 {
		cs = append(cs, startC(t, b.Worker, "sem-stress", path, "sem", fmt.Sprint(permits), fmt.Sprint(iters)))
	}
	var wg sync.WaitGroup
	for g := range 2 {
		o, err := shm.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		gs, err := o.Semaphore("sem", permits)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer o.Close()
			for i := range iters {
				k := int64(1 + (i+g)%permits)
				if err := gs.Acquire(context.Background(), k); err != nil {
					t.Error(err)
					return
				}
				semSection(c, k, permits, uint32(1000000+g))
				gs.Release(k)
			}
		})
	}
	wg.Wait()
	for _, p := range cs {
		if rest, err := p.wait(2 * time.Minute); err != nil || len(rest) == 0 || rest[len(rest)-1] != "done" {
			t.Fatalf("C worker: %v %q\n%s", err, rest, p.tail.String())
		}
	}
	if v := chk64(c, semChkViolations).Load(); v != 0 {
		t.Fatalf("%d over-grants between Go and C", v)
	}
	if n := chk64(c, semChkAcquired).Load(); n != 4*iters {
		t.Fatalf("%d acquisitions, want %d", n, 4*iters)
	}
	if !s.TryAcquire(permits) {
		t.Fatal("permits left held after every worker finished")
	}
	s.Release(permits)
}

// TestCSemaphoreDeadHolderAcrossLanguages: a C process killed holding 2 of
// 3 permits is recovered by a Go Acquire (ErrOwnerDead naming it, 2
// permits), and a Go process killed holding 2 by a C acquire (LW_EOWNERDEAD
// with its PID and 2 permits).
func TestCSemaphoreDeadHolderAcrossLanguages(t *testing.T) {
	b := cBuild(t, "plain")
	path, r := goRegion(t)
	s, err := r.Semaphore("sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	hold := startC(t, b.Worker, "sem-hold", path, "sem", "3", "2")
	if l := hold.line(10 * time.Second); l != "held" {
		t.Fatalf("C holder: %q", l)
	}
	hold.cmd.Process.Kill()
	<-hold.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.Acquire(ctx, 3)
	var de *shm.SemaphoreOwnerDeadError
	if !errors.As(err, &de) || de.PID != hold.cmd.Process.Pid || de.Permits != 2 {
		t.Fatalf("Go Acquire(3) after a C holder of 2 died: %v, want ErrOwnerDead naming PID %d, 2 permits", err, hold.cmd.Process.Pid)
	}
	s.Release(3)

	ghold := startGo(t, "sem-hold", path, "sem", "3", "2")
	if l := ghold.line(10 * time.Second); l != "held" {
		t.Fatalf("Go holder: %q", l)
	}
	// The C acquirer attaches first: its open would otherwise take the
	// permits back itself, telling nobody.
	w, in := startCAttached(t, b.Worker, "open", "sem-acquire", path, "sem", "3", "3", "10000", "wait")
	ghold.cmd.Process.Kill()
	<-ghold.done
	io.WriteString(in, "go\n")
	f := strings.Fields(w.line(15 * time.Second))
	want := []string{"130", "1", "2", strconv.Itoa(ghold.cmd.Process.Pid), "3"}
	if strings.Join(f, " ") != strings.Join(want, " ") {
		t.Fatalf("C acquire of 3 after a Go holder of 2 died printed %q, want %q (code holders permits pid held)", f, want)
	}
	if _, err := w.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if info, err := r.Inspect(); err != nil || info.Objects[0].Semaphore.Recovered != 4 || info.Objects[0].Semaphore.InUse != 0 {
		t.Fatalf("after both recoveries: %v %+v", err, info.Objects[0].Semaphore)
	}
}

// TestCSemaphoreOpenCloseReap: a C process killed holding permits has them
// back from a C region open alone, and from a C close alone (the opener
// attached while the holder lived), with no acquirer; and, raced by C
// openers and a Go Open, a dead holder's permits are recovered exactly
// once. Inspect reads the counts without reaping.
func TestCSemaphoreOpenCloseReap(t *testing.T) {
	b := cBuild(t, "plain")
	path, r := goRegion(t)
	if _, err := r.Semaphore("sem", 3); err != nil {
		t.Fatal(err)
	}
	sem := func() shm.SemaphoreInfo {
		t.Helper()
		info, err := r.Inspect()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range info.Objects {
			if o.Name == "sem" && o.Semaphore != nil {
				return *o.Semaphore
			}
		}
		t.Fatalf("no semaphore in %+v", info)
		return shm.SemaphoreInfo{}
	}
	killHolder := func(k int) {
		t.Helper()
		hold := startC(t, b.Worker, "sem-hold", path, "sem", "3", strconv.Itoa(k))
		if l := hold.line(10 * time.Second); l != "held" {
			t.Fatalf("C holder: %q", l)
		}
		hold.cmd.Process.Kill()
		<-hold.done
	}
	opener := func() (*proc, io.WriteCloser) {
		t.Helper()
		return startCAttached(t, b.Worker, "open 0", "sem-open-close", path)
	}
	closeOpener := func(o *proc, in io.WriteCloser) {
		t.Helper()
		io.WriteString(in, "close\n")
		if rest, err := o.wait(10 * time.Second); err != nil || len(rest) != 1 || rest[0] != "close 0" {
			t.Fatalf("C close: %q %v", rest, err)
		}
	}

	// Open alone.
	killHolder(2)
	o, in := opener()
	if si := sem(); si.InUse != 0 || si.Recovered != 2 {
		t.Errorf("after a C open, a dead C holder of 2: in use %d, recovered %d; want 0, 2", si.InUse, si.Recovered)
	}
	closeOpener(o, in)

	// Close alone: the holder was alive when the opener attached.
	hold := startC(t, b.Worker, "sem-hold", path, "sem", "3", "3")
	if l := hold.line(10 * time.Second); l != "held" {
		t.Fatalf("C holder: %q", l)
	}
	o, in = opener()
	hold.cmd.Process.Kill()
	<-hold.done
	if si := sem(); si.InUse != 3 {
		t.Fatalf("before the C close: in use %d, want 3 (the dead holder's)", si.InUse)
	}
	closeOpener(o, in)
	if si := sem(); si.InUse != 0 || si.Recovered != 5 {
		t.Errorf("after a C close, a dead C holder of 3: in use %d, recovered %d; want 0, 5", si.InUse, si.Recovered)
	}

	// Raced: three C openers and a Go Open reap one dead holder of 2.
	killHolder(2)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(b.Worker, "sem-open-close", path)
			cmd.Stdin = strings.NewReader("close\n")
			if out, err := cmd.CombinedOutput(); err != nil || string(out) != "open 0\nclose 0\n" {
				t.Errorf("C open/close: %q %v", out, err)
			}
		}()
	}
	if g, err := shm.Open(path, nil); err != nil {
		t.Error(err)
	} else if err := g.Close(); err != nil {
		t.Error(err)
	}
	wg.Wait()
	if si := sem(); si.InUse != 0 || si.Recovered != 7 || si.Reclaims != 3 {
		t.Errorf("after racing openers: in use %d, recovered %d, reclaims %d; want 0, 7, 3", si.InUse, si.Recovered, si.Reclaims)
	}
}

// startCAttached starts the C worker with args, whose stdin the caller
// writes, and waits for its first line, which must be attached: the
// worker has opened the region and waits for a line on stdin.
func startCAttached(t *testing.T, worker, attached string, args ...string) (*proc, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(worker, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, cmd)
	if l := p.line(10 * time.Second); l != attached {
		t.Fatalf("C worker %s: %q, want %q", args[0], l, attached)
	}
	return p, in
}
