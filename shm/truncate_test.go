//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword"
	"os"
	"sync"
	"testing"
	"time"
)

// TestInspectSurvivesTruncation is issue 12's second finding: Inspect
// (the path behind lockword inspect) in a loop while another goroutine
// truncates the file and restores it died with SIGBUS ("unexpected fault
// address"). Every call must return: the region, or an error.
//
// Not under the race detector: there every atomic load of a mapped word is
// made by the race runtime's C code, and a fault in C code cannot become a
// Go panic (the runtime aborts with "unexpected return pc for
// runtime.sigpanic"), whatever SetPanicOnFault says. Builds without -race,
// the ones users run, are checked: .ci/run runs this test without -race.
func TestInspectSurvivesTruncation(t *testing.T) {
	if raceEnabled {
		t.Skip("a fault inside the race runtime's atomics cannot be recovered; .ci/run runs this test without -race")
	}
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, err := r.Mutex("m")
	if err != nil {
		t.Fatal(err)
	}
	m.Lock()
	defer m.Unlock()
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for {
			select {
			case <-stop:
				f.WriteAt(saved, 0) // restore, for the holder's Unlock
				return
			default:
			}
			f.Truncate(0)
			time.Sleep(50 * time.Microsecond)
			f.WriteAt(saved, 0)
			time.Sleep(50 * time.Microsecond)
		}
	})
	var ok, truncated, other int
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		_, err := Inspect(path)
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrTruncated):
			truncated++
		default:
			other++
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d inspections read the region, %d saw it truncated under them, %d found it bad at open", ok, truncated, other)
}

// raceFaultNote: under the race detector an atomic load is a call into
// its C runtime, where a fault cannot be turned into a panic: the process
// dies. Documented on Region ("Truncation").
const raceFaultNote = "a fault inside the race detector's runtime (atomic operations under -race) cannot be recovered: the fault cases run without -race"

// TestRegionTruncatedReported: a file shorter than its header says is
// reported at open (ErrTruncated, and ErrBadSize as every size mismatch);
// shrunk under an open Region, it is reported by Check and by an object
// lookup, which look at the file's size before touching pages; and a read
// of the mapping past the new end, which faults, is turned into
// ErrTruncated by the guard that Inspect and opens use.
func TestRegionTruncatedReported(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	if _, err := r.Mutex("m"); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err != nil {
		t.Fatalf("Check of a sound region: %v", err)
	}
	size := r.Size()
	if err := os.Truncate(path, size/2); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Check after truncation: %v, want ErrTruncated", err)
	}
	if _, err := r.Mutex("new"); !errors.Is(err, ErrTruncated) {
		t.Fatalf("object lookup after truncation: %v, want ErrTruncated", err)
	}
	if _, err := Open(path, &Options{InitTimeout: -1}); !errors.Is(err, ErrTruncated) || !errors.Is(err, ErrBadSize) {
		t.Fatalf("OpenRegion of a truncated file: %v, want ErrTruncated and ErrBadSize", err)
	}
	if _, err := Inspect(path); !errors.Is(err, ErrTruncated) {
		t.Fatalf("InspectRegion of a truncated file: %v, want ErrTruncated", err)
	}
	if raceEnabled {
		t.Log(raceFaultNote)
		return
	}
	err := guardFault(r.faultCause, func() error {
		_ = word32(r.data, uint64(size-64)).Load() // past the new end: SIGBUS
		return nil
	})
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("a read past the new end under guardFault: %v, want ErrTruncated", err)
	}
	if err := os.Truncate(path, size); err != nil { // zeros: the header's tail is gone, the lock is free
		t.Fatal(err)
	}
}

// TestCloseAfterTruncation: Close of a Region whose file was truncated
// under it, even one holding a lock there, unmaps and closes without
// touching the lost pages and reports ErrTruncated; it used to read the
// held lock's word and die of SIGBUS. A second Close says closed.
func TestCloseAfterTruncation(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, err := r.Mutex("m")
	if err != nil {
		t.Fatal(err)
	}
	m.Lock()
	if err := r.Close(); !errors.Is(err, ErrRegionBusy) {
		t.Fatalf("Close while holding, file intact: %v, want ErrRegionBusy", err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Check after truncation: %v, want ErrTruncated", err)
	}
	if err := r.Close(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Close after truncation: %v, want ErrTruncated", err)
	}
	if err := r.Close(); !errors.Is(err, ErrRegionClosed) {
		t.Fatalf("second Close: %v, want ErrRegionClosed", err)
	}
}

// TestRegionPermissions: a region file that group or others may write, or
// that another user owns, is refused unless the caller opts in; creating
// one with such a mode likewise. Inspect, which only observes,
// reads it either way.
func TestRegionPermissions(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	r.Close()
	for _, mode := range []os.FileMode{0o620, 0o602, 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(path, nil); !errors.Is(err, ErrUnsafePermissions) {
			t.Fatalf("OpenRegion of a file of mode %#o: %v, want ErrUnsafePermissions", mode, err)
		}
		r, err := Open(path, &Options{AllowUnsafePermissions: true})
		if err != nil {
			t.Fatalf("OpenRegion of mode %#o with AllowUnsafePermissions: %v", mode, err)
		}
		r.Close()
		if _, err := Inspect(path); err != nil {
			t.Fatalf("InspectRegion of mode %#o: %v", mode, err)
		}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 { // only root can give a file away
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(path, nil); !errors.Is(err, ErrUnsafePermissions) {
			t.Fatalf("OpenRegion of another user's file: %v, want ErrUnsafePermissions", err)
		}
		if err := os.Chown(path, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := Open(path, nil); err != nil {
		t.Fatalf("OpenRegion of our own 0600 file: %v", err)
	} else {
		r.Close()
	}
	other := tempRegionPath(t)
	if _, err := Create(other, 0, &Options{Mode: 0o666}); !errors.Is(err, ErrUnsafePermissions) {
		t.Fatalf("CreateRegion with mode 0666: %v, want ErrUnsafePermissions", err)
	}
	if r, err := Create(other, 0, &Options{Mode: 0o660, AllowUnsafePermissions: true}); err != nil {
		t.Fatalf("CreateRegion with mode 0660 and AllowUnsafePermissions: %v", err)
	} else {
		r.Close()
	}
}

// TestMemfdRegion: a memfd region cannot be truncated (the seal refuses),
// and a child process given its file (ExtraFiles) opens it with
// OpenFile and shares its locks, owner death included.
func TestMemfdRegion(t *testing.T) {
	r, err := CreateMemfd("lockword-test", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.File().Truncate(0); err == nil {
		t.Fatal("a memfd region's file could be truncated: the seal is missing")
	}
	m, err := r.Mutex("m")
	if err != nil {
		t.Fatal(err)
	}
	c := startChildFiles(t, nil, []*os.File{r.File()}, "memfd-hold")
	c.expect(t, "locked")
	if m.TryLock() {
		t.Fatal("TryLock succeeded while the child holds the lock")
	}
	c.cmd.Process.Kill()
	c.exit()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.LockContext(ctx); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("LockContext after the child died holding: %v, want lockword.ErrOwnerDead", err)
	}
	m.MarkConsistent()
	m.Unlock()
}

func init() {
	childModes["memfd-hold"] = func([]string) error {
		r, err := OpenFile(os.NewFile(3, "memfd"), nil)
		if err != nil {
			return err
		}
		m, err := r.Mutex("m")
		if err != nil {
			return err
		}
		m.Lock()
		fmt.Println("locked")
		select {}
	}
}
