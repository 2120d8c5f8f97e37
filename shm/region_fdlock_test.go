//go:build linux

package shm

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A Region opened from a descriptor (OpenFile) must take the
// region's file lock through an open file description of its own: flock
// locks belong to the description, and a descriptor that a child
// inherits, or that dup made, shares its creator's, so locks through them
// never exclude each other. On a shared description two processes attach
// at once into one process-table slot, with one owner token between them.
// torture -kill (whose replacement workers open the run's memfd region
// from the descriptor they inherit) saw that, on a loaded host, as a live
// holder's death recovered ("N+1 recoveries for N kills of a holder"), a
// RWMutex reader count gone negative ("RUnlock of unlocked
// RWMutex": a slot's second process had zeroed it) and writers that
// waited forever for a reader count that never fell.

// flockNB tries to take the file lock of fd without blocking: nil if it
// did, unix.EWOULDBLOCK if another open file description holds it.
func flockNB(fd uintptr, how int) error {
	for {
		if err := unix.Flock(int(fd), how|unix.LOCK_NB); err != unix.EINTR {
			return err
		}
	}
}

// fdlockRegion is a fresh memfd region, closed when t ends.
func fdlockRegion(t *testing.T) *Region {
	t.Helper()
	r, err := CreateMemfd("lockword-fdlock", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestOpenRegionFileLocksOnItsOwn: two Regions opened from one descriptor,
// and the creator's Region, exclude each other under the file lock. It
// fails on a dup'd descriptor: every flock then succeeds.
func TestOpenRegionFileLocksOnItsOwn(t *testing.T) {
	r := fdlockRegion(t)
	a, err := OpenFile(r.File(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenFile(r.File(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.slot == b.slot || a.slot == r.slot || b.slot == r.slot {
		t.Fatalf("slots %d, %d, %d: not one each", r.slot, a.slot, b.slot)
	}
	handles := map[string]*Region{"creator": r, "first OpenRegionFile": a, "second OpenRegionFile": b}
	for holder, h := range handles {
		if err := flockNB(h.file.Fd(), unix.LOCK_EX); err != nil {
			t.Fatalf("%s: exclusive file lock: %v", holder, err)
		}
		for other, o := range handles {
			if o == h {
				continue
			}
			if err := flockNB(o.file.Fd(), unix.LOCK_SH); err != unix.EWOULDBLOCK {
				t.Errorf("%s holds the region's file lock, and %s took it too (%v): they share an open file description, so attaches are not excluded", holder, other, err)
				flockNB(o.file.Fd(), unix.LOCK_UN)
			}
		}
		if err := flockNB(h.file.Fd(), unix.LOCK_UN); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenRegionFileChildWaitsForTheLock: a child process that opens the
// memfd region it inherited waits, to attach, until the creator releases
// the file lock. Assumption: a child that attached at once (the broken
// lock) would print "attached" within 300 ms of printing "opening", which
// it does immediately before OpenFile, on any host that runs it at
// all; the fixed child cannot attach in that window whatever the load.
func TestOpenRegionFileChildWaitsForTheLock(t *testing.T) {
	r := fdlockRegion(t)
	if err := flock(int(r.file.Fd()), lockExclusive); err != nil {
		t.Fatal(err)
	}
	locked := true
	defer func() {
		if locked {
			flock(int(r.file.Fd()), lockUnlock)
		}
	}()
	c := startChildFiles(t, nil, []*os.File{r.File()}, "memfd-attach")
	c.expect(t, "opening")
	select {
	case line := <-c.lines:
		t.Fatalf("the child went on (%q) while the creator held the region's file lock: it attached without it\n%s", line, c.output())
	case <-time.After(300 * time.Millisecond):
	}
	flock(int(r.file.Fd()), lockUnlock)
	locked = false
	slot := c.expect(t, "attached in slot ")
	if slot == fmt.Sprint(r.slot) {
		t.Fatalf("the child attached into the creator's slot %s", slot)
	}
	c.cmd.Process.Kill()
	c.exit()
}

func init() {
	childModes["memfd-attach"] = func([]string) error {
		fmt.Println("opening")
		r, err := OpenFile(os.NewFile(3, "memfd"), nil)
		if err != nil {
			return err
		}
		fmt.Println("attached in slot", r.slot)
		time.Sleep(time.Hour) // killed by the test
		return nil
	}
}

// TestOpenRegionFileRefusesNarrowDescriptors: the reopen asks for read and
// write whatever the descriptor allows, so OpenFile refuses one that
// is read-only or O_PATH (the reopen made such a descriptor of a memfd,
// whose mode is 0777, a writable region for anyone holding it), and a nil
// file.
func TestOpenRegionFileRefusesNarrowDescriptors(t *testing.T) {
	r := fdlockRegion(t)
	for _, c := range []struct {
		name  string
		flags int
	}{{"read-only", unix.O_RDONLY}, {"O_PATH", unix.O_PATH}} {
		fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", r.File().Fd()), c.flags|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := os.NewFile(uintptr(fd), c.name)
		if h, err := OpenFile(f, nil); !errors.Is(err, os.ErrPermission) {
			if err == nil {
				h.Close()
			}
			t.Errorf("OpenRegionFile of a %s descriptor: %v, want an error wrapping os.ErrPermission", c.name, err)
		}
		f.Close()
	}
	if _, err := OpenFile(nil, nil); !errors.Is(err, os.ErrInvalid) {
		t.Errorf("OpenRegionFile(nil): %v, want os.ErrInvalid", err)
	}
}
