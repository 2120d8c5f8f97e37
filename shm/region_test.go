//go:build linux

package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/wait"
	"golang.org/x/sys/unix"
)

func tempRegionPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "region")
}

func mustCreate(t *testing.T, path string, size int64) *Region {
	t.Helper()
	r, err := Create(path, size, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRegionCreateOpenClose(t *testing.T) {
	path := tempRegionPath(t)
	old := syscall.Umask(0o077 | 0o022)
	r, err := Create(path, 0, &Options{Mode: 0o640})
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 || st.Size() != DefaultRegionSize {
		t.Fatalf("mode %v size %d, want 0640 (umask ignored) and %d", st.Mode(), st.Size(), DefaultRegionSize)
	}
	if _, err := Create(path, 0, nil); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second CreateRegion = %v, want ErrExist", err)
	}
	m, err := r.Mutex("orders")
	if err != nil {
		t.Fatal(err)
	}
	if m2, _ := r.Mutex("orders"); m2 != m {
		t.Fatal("lockword.Mutex returned a second handle for the same name")
	}
	data, err := r.Bytes("orders-data", 100)
	if err != nil {
		t.Fatal(err)
	}
	data[99] = 42
	if _, err := r.Bytes("orders", 100); !errors.Is(err, ErrObjectKind) {
		t.Fatalf("Bytes on a mutex name = %v, want ErrObjectKind", err)
	}
	if _, err := r.Mutex("orders-data"); !errors.Is(err, ErrObjectKind) {
		t.Fatalf("lockword.Mutex on a bytes name = %v, want ErrObjectKind", err)
	}
	if _, err := r.Bytes("orders-data", 50); !errors.Is(err, ErrObjectBounds) {
		t.Fatalf("Bytes with another size = %v, want ErrObjectBounds", err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 49), "a\x00b", "a\nb", "\xff\xfe", "red\x1b[31m", "tab\there"} {
		if _, err := r.Mutex(bad); !errors.Is(err, ErrObjectName) {
			t.Fatalf("Mutex(%q) = %v, want ErrObjectName", bad, err)
		}
		if _, err := r.Bytes(bad, 8); !errors.Is(err, ErrObjectName) {
			t.Fatalf("Bytes(%q) = %v, want ErrObjectName", bad, err)
		}
	}
	for _, good := range []string{"commandes-été", "日本語", "with space"} {
		if _, err := r.Mutex(good); err != nil {
			t.Fatalf("Mutex(%q) = %v", good, err)
		}
	}
	// A huge name is not echoed whole.
	if _, err := r.Mutex(strings.Repeat("x", 10000)); !errors.Is(err, ErrObjectName) || len(err.Error()) > 300 {
		t.Fatalf("lockword.Mutex of a 10000-byte name: %d-byte error %.400v", len(err.Error()), err)
	}

	// A second process (here a second handle) sees the same objects.
	r2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := r2.Mutex("orders")
	if err != nil {
		t.Fatal(err)
	}
	if &m2.obj[0] == &m.obj[0] || m2.word.Load() != 0 {
		t.Fatal("second handle should map the same object at another address")
	}
	m.Lock()
	if m2.TryLock() {
		t.Fatal("TryLock through another handle succeeded on a held lock")
	}
	if err := r.Close(); !errors.Is(err, ErrRegionBusy) {
		t.Fatalf("Close while holding = %v, want ErrRegionBusy", err)
	}
	m.Unlock()
	d2, err := r2.Bytes("orders-data", 100)
	if err != nil || d2[99] != 42 {
		t.Fatalf("data not shared: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); !errors.Is(err, ErrRegionClosed) {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := r.Mutex("orders"); !errors.Is(err, ErrRegionClosed) {
		t.Fatalf("lockword.Mutex after Close = %v", err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRegionCloseRefusedWhileWaiting(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	other, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	mo, _ := other.Mutex("m")
	m, _ := r.Mutex("m")
	mo.Lock()
	done := make(chan struct{})
	go func() { m.Lock(); m.Unlock(); close(done) }()
	for r.waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := r.Close(); !errors.Is(err, ErrRegionBusy) {
		t.Fatalf("Close with a waiter = %v, want ErrRegionBusy", err)
	}
	mo.Unlock()
	<-done
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRegionPathRule(t *testing.T) {
	if got := regionPath("orders"); got != "/dev/shm/orders" {
		t.Fatalf("regionPath(orders) = %q", got)
	}
	if got := regionPath("./orders"); got != "./orders" {
		t.Fatalf("regionPath(./orders) = %q", got)
	}
}

func TestRegionRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	mustCreate(t, good, 0)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, fifo, dir} {
		if _, err := Open(p, nil); !errors.Is(err, ErrNotRegularFile) {
			t.Errorf("OpenRegion(%s) = %v, want ErrNotRegularFile", p, err)
		}
	}
	// O_EXCL|O_NOFOLLOW: creating over a dangling link fails too.
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "nowhere"), dangling)
	if _, err := Create(dangling, 0, nil); err == nil {
		t.Fatal("CreateRegion followed a dangling symbolic link")
	}
	if _, err := os.Stat(filepath.Join(dir, "nowhere")); err == nil {
		t.Fatal("CreateRegion created the target of a symbolic link")
	}
}

// validRegionBytes returns the bytes of a freshly created region with a
// mutex and a bytes object.
func validRegionBytes(t testing.TB) []byte {
	return seedRegionBytes(t, nil)
}

// seedRegionBytes returns the bytes of a freshly created region with a
// mutex "m", a bytes object "data", and what more adds (when not nil).
func seedRegionBytes(t testing.TB, more func(r *Region) error) []byte {
	path := filepath.Join(t.TempDir(), "seed")
	r, err := Create(path, regionMinSize+4096, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Mutex("m"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Bytes("data", 100); err != nil {
		t.Fatal(err)
	}
	if more != nil {
		if err := more(r); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reseal recomputes the checksum, so that a corruption reaches the checks
// after it.
func reseal(b []byte) {
	count := ne.Uint32(b[hdrObjectCount:])
	ne.PutUint32(b[hdrChecksum:], headerChecksum(b, count))
}

func openBytes(t *testing.T, b []byte) error {
	path := filepath.Join(t.TempDir(), "r")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, &Options{InitTimeout: -1})
	if err == nil {
		r.Close()
	}
	return err
}

// TestRegionOpenChecksInOrder corrupts one thing at a time and checks that
// Open names it, and that the documented order holds when several things
// are wrong.
func TestRegionOpenChecksInOrder(t *testing.T) {
	valid := validRegionBytes(t)
	entry := func(i int) []byte { return valid[regionTableOffset+i*tableEntrySize:][:tableEntrySize] }
	_ = entry
	for _, c := range []struct {
		name    string
		corrupt func(b []byte) []byte
		want    error
	}{
		{"valid", func(b []byte) []byte { return b }, nil},
		// An empty file that nobody locks is an abandoned creation:
		// Open initializes it (TestOpenReclaimsAbandonedCreation).
		{"empty file", func(b []byte) []byte { return nil }, nil},
		{"zero magic", func(b []byte) []byte { ne.PutUint64(b, 0); return b }, ErrNotInitialized},
		{"foreign file", func(b []byte) []byte { return []byte("#!/bin/sh\necho hello\n") }, ErrBadMagic},
		{"bad magic", func(b []byte) []byte { b[3] ^= 1; return b }, ErrBadMagic},
		{"bad magic and version", func(b []byte) []byte { b[3] ^= 1; b[hdrVersion]++; return b }, ErrBadMagic},
		{"bad version", func(b []byte) []byte { b[hdrVersion]++; reseal(b); return b }, ErrBadVersion},
		{"bad version and size", func(b []byte) []byte { b[hdrVersion]++; return b[:len(b)-1] }, ErrBadVersion},
		{"bad geometry", func(b []byte) []byte { ne.PutUint32(b[hdrTableCap:], 64); reseal(b); return b }, ErrBadVersion},
		{"truncated", func(b []byte) []byte { return b[:len(b)-4096] }, ErrBadSize},
		{"truncated below header", func(b []byte) []byte { return b[:100] }, ErrBadSize},
		{"extended", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }, ErrBadSize},
		{"size and checksum", func(b []byte) []byte { b[hdrCreatedNs] ^= 1; return b[:len(b)-4096] }, ErrBadSize},
		{"checksum", func(b []byte) []byte { b[hdrCreatedNs] ^= 1; return b }, ErrBadChecksum},
		{"entry changed", func(b []byte) []byte { b[regionTableOffset+entryOffset] ^= 64; return b }, ErrBadChecksum},
		{"count", func(b []byte) []byte { ne.PutUint32(b[hdrObjectCount:], 3); return b }, ErrBadChecksum},
		{"count over capacity", func(b []byte) []byte { ne.PutUint32(b[hdrObjectCount:], 500); reseal(b); return b }, ErrObjectBounds},
		{"empty name", func(b []byte) []byte {
			clear(b[regionTableOffset : regionTableOffset+entryNameMax])
			reseal(b)
			return b
		}, ErrObjectName},
		{"name not NUL-padded", func(b []byte) []byte { b[regionTableOffset+10] = 'x'; reseal(b); return b }, ErrObjectName},
		{"duplicate name", func(b []byte) []byte {
			copy(b[regionTableOffset+tableEntrySize:][:entryNameMax], b[regionTableOffset:][:entryNameMax])
			reseal(b)
			return b
		}, ErrObjectName},
		{"unknown kind", func(b []byte) []byte { ne.PutUint32(b[regionTableOffset+entryKind:], 99); reseal(b); return b }, ErrObjectKind},
		{"out of bounds", func(b []byte) []byte {
			ne.PutUint64(b[regionTableOffset+entryOffset:], uint64(len(b)))
			reseal(b)
			return b
		}, ErrObjectBounds},
		{"offset overflow", func(b []byte) []byte {
			ne.PutUint64(b[regionTableOffset+tableEntrySize+entryOffset:], math.MaxUint64-32)
			reseal(b)
			return b
		}, ErrObjectBounds},
		{"inside the header", func(b []byte) []byte { ne.PutUint64(b[regionTableOffset+entryOffset:], 64); reseal(b); return b }, ErrObjectBounds},
		{"wrong mutex size", func(b []byte) []byte { ne.PutUint32(b[regionTableOffset+entrySize:], 32); reseal(b); return b }, ErrObjectBounds},
		{"overlap", func(b []byte) []byte {
			ne.PutUint64(b[regionTableOffset+tableEntrySize+entryOffset:], regionArenaOffset)
			reseal(b)
			return b
		}, ErrObjectBounds},
		{"misaligned", func(b []byte) []byte {
			ne.PutUint64(b[regionTableOffset+entryOffset:], regionArenaOffset+8)
			ne.PutUint64(b[regionTableOffset+tableEntrySize+entryOffset:], regionArenaOffset+128)
			reseal(b)
			return b
		}, ErrObjectAlignment},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.corrupt(append([]byte(nil), valid...))
			err := openBytes(t, b)
			if c.want == nil {
				if err != nil {
					t.Fatalf("valid region: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Open = %v, want %v", err, c.want)
			}
			t.Log(err)
		})
	}
}

// TestRegionCutInsideSignature: a region file cut short after its magic
// number, inside the version and layout fields, is ErrBadVersion (as in C,
// and Remove refuses it even when forced), and the error names the file's
// size instead of a version 0 or a zero layout that the file never held.
func TestRegionCutInsideSignature(t *testing.T) {
	valid := validRegionBytes(t)
	for _, n := range []int{8, 12, 16, 24, hdrFlags - 1} {
		err := openBytes(t, valid[:n])
		if !errors.Is(err, ErrBadVersion) {
			t.Fatalf("%d bytes: Open = %v, want %v", n, err, ErrBadVersion)
		}
		if want := fmt.Sprintf("only %d bytes", n); !strings.Contains(err.Error(), want) {
			t.Errorf("%d bytes: Open = %q, want it to say %q", n, err, want)
		}
	}
}

// TestRegionCreateRace: processes and goroutines race through
// OpenOrCreate on one path. Exactly one initializes (everyone sees
// the same creation stamp and the same object offsets), nobody fails.
func TestRegionCreateRace(t *testing.T) {
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for round := range rounds {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("race%d", round))
		var children []*child
		for range 3 {
			children = append(children, startChild(t, "create", path))
		}
		var wg sync.WaitGroup
		stamps := make([]string, 4)
		for i := range stamps {
			wg.Go(func() {
				r, err := OpenOrCreate(path, 0, nil)
				if err != nil {
					t.Error(err)
					return
				}
				defer r.Close()
				stamps[i] = regionStamp(r)
			})
		}
		wg.Wait()
		for _, c := range children {
			stamps = append(stamps, c.expect(t, "stamp "))
			c.wait(t)
		}
		for _, s := range stamps {
			if s != stamps[0] {
				t.Fatalf("round %d: openers saw different regions: %q", round, stamps)
			}
		}
	}
}

// regionStamp identifies one initialization of a region: its creation
// time and where its first objects went.
func regionStamp(r *Region) string {
	m, err := r.Mutex("first")
	if err != nil {
		return err.Error()
	}
	d, err := r.Bytes("second", 8)
	if err != nil {
		return err.Error()
	}
	_ = d
	return fmt.Sprintf("%d/%d/%d", ne.Uint64(r.data[hdrCreatedNs:]), r.objects["first"].offset, r.objects["second"].offset) + fmt.Sprint(m.word != nil)
}

// TestRegionOpenWaitsForPublication: an opener that finds a sized file
// whose magic is still zero sleeps on the magic and wakes when the creator
// publishes it (release store, then FutexWake); with no creator it gives up
// with ErrNotInitialized.
func TestRegionOpenWaitsForPublication(t *testing.T) {
	valid := validRegionBytes(t)
	path := tempRegionPath(t)
	unpublished := append([]byte(nil), valid...)
	ne.PutUint64(unpublished[hdrMagic:], 0)
	if err := os.WriteFile(path, unpublished, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := Open(path, &Options{InitTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Open of an unpublished region = %v, want ErrNotInitialized", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before InitTimeout", d)
	}
	type result struct {
		r   *Region
		err error
	}
	got := make(chan result, 1)
	go func() {
		r, err := Open(path, &Options{InitTimeout: 10 * time.Second})
		got <- result{r, err}
	}()
	time.Sleep(30 * time.Millisecond)
	// Publish as the creator does, through a mapping of our own.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, len(valid), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	word64(data, hdrMagic).Store(regionMagic)
	wait.FutexWake(word32(data, hdrMagic), 1<<30, wait.Shared)
	unix.Munmap(data)
	f.Close()
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatal(res.err)
		}
		if _, ok := res.r.objects["m"]; !ok {
			t.Fatal("opener did not see the published object table")
		}
		res.r.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("opener did not wake when the header was published")
	}
}

// TestRegionTornObjectAdd: a process killed while adding an object has
// written the entry past the count but not committed count and checksum:
// the region stays valid, and the entry's slot is reused.
func TestRegionTornObjectAdd(t *testing.T) {
	b := validRegionBytes(t)
	e := b[regionTableOffset+2*tableEntrySize:][:tableEntrySize]
	copy(e, "half-written")
	ne.PutUint32(e[entryKind:], uint32(kindMutex))
	ne.PutUint64(e[entryOffset:], 12345)
	path := tempRegionPath(t)
	os.WriteFile(path, b, 0o600)
	r, err := Open(path, nil)
	if err != nil {
		t.Fatalf("torn add broke the region: %v", err)
	}
	defer r.Close()
	if _, ok := r.objects["half-written"]; ok {
		t.Fatal("uncommitted entry is visible")
	}
	if _, err := r.Mutex("next"); err != nil {
		t.Fatal(err)
	}
	if o := r.objects["next"]; o.offset%64 != 0 || o.offset < regionArenaOffset {
		t.Fatalf("bad placement %+v", o)
	}
}

func TestRegionFull(t *testing.T) {
	r := mustCreate(t, tempRegionPath(t), regionMinSize+64*3)
	for i := range 3 {
		if _, err := r.Mutex(fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Mutex("one-too-many"); !errors.Is(err, ErrRegionFull) {
		t.Fatalf("lockword.Mutex in a full region = %v, want ErrRegionFull", err)
	}
	big := mustCreate(t, tempRegionPath(t), 0)
	for i := range regionTableCap {
		if _, err := big.Bytes(fmt.Sprint("b", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := big.Bytes("table-full", 1); !errors.Is(err, ErrRegionFull) {
		t.Fatalf("Bytes with a full table = %v, want ErrRegionFull", err)
	}
}

// TestRegionTooSmall: a size argument below the minimum is a bad argument,
// reported as such (ErrRegionTooSmall), not as a file whose header
// disagrees with its size (ErrBadSize); no file is left behind.
func TestRegionTooSmall(t *testing.T) {
	for _, size := range []int64{1000, regionMinSize - 1, -1} {
		path := tempRegionPath(t)
		for _, create := range []func() (*Region, error){
			func() (*Region, error) { return Create(path, size, nil) },
			func() (*Region, error) { return OpenOrCreate(path, size, nil) },
		} {
			_, err := create()
			if !errors.Is(err, ErrRegionTooSmall) || errors.Is(err, ErrBadSize) {
				t.Fatalf("size %d: %v, want ErrRegionTooSmall (and not ErrBadSize)", size, err)
			}
			if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("%d bytes requested, minimum %d", size, regionMinSize)) || strings.Contains(msg, "does not match the file") {
				t.Errorf("size %d: message %q", size, msg)
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("size %d: a file was left at %s (%v)", size, path, err)
			}
		}
	}
}

// TestRegionLayout pins the ABI of docs/abi.md.
func TestRegionLayout(t *testing.T) {
	checkABI(t, []abiField[int64]{
		{"magic", hdrMagic, 0}, {"version", hdrVersion, 8}, {"header size", hdrHeaderSize, 12},
		{"size", hdrSize, 16}, {"table capacity", hdrTableCap, 24}, {"process slots", hdrProcSlots, 28},
		{"flags", hdrFlags, 32}, {"created", hdrCreatedNs, 40}, {"object count", hdrObjectCount, 48},
		{"checksum", hdrChecksum, 52}, {"slot hint", hdrSlotHint, 56},
		{"pid namespace", hdrPIDNamespace, 64},
		{"table offset", regionTableOffset, 4096}, {"entry size", tableEntrySize, 64}, {"table capacity value", regionTableCap, 128},
		{"entry name", entryName, 0}, {"entry name max", entryNameMax, 48}, {"entry kind", entryKind, 48},
		{"entry size field", entrySize, 52}, {"entry offset", entryOffset, 56},
		{"process table", regionProcOffset, 12288}, {"slot size", procSlotSize, 32}, {"slots", regionProcSlots, 1024},
		{"slot state", procState, 0}, {"slot pid", procPID, 4}, {"slot start", procStart, 8}, {"slot boot", procBoot, 16},
		{"object area", regionArenaOffset, 45056},
		{"mutex size", mutexObjSize, 64}, {"mutex word", mutexObjWord, 0}, {"mutex held since", mutexObjHeldSince, 8},
		{"mutex acquisitions", mutexObjAcquired, 16}, {"mutex slow", mutexObjSlow, 24}, {"mutex parks", mutexObjParks, 32},
		{"mutex wait total", mutexObjWaitNs, 40}, {"mutex wait max", mutexObjWaitMaxNs, 48},
		{"kind mutex", int64(kindMutex), 1}, {"kind bytes", int64(kindBytes), 2},
		{"stats bit", sharedStats, 1 << 28}, {"inconsistent bit", sharedInconsistent, 1 << 29},
		{"waiters bit", sharedWaiters, 1 << 30}, {"timed bit", sharedTimed, 1 << 31},
		{"not recoverable", ownerNotRecoverable, 0x0FFFFFFF},
	})
	if regionMagic != 0x64726f776b636f6c || string(func() []byte { b := make([]byte, 8); ne.PutUint64(b, regionMagic); return b }()) != "lockword" {
		t.Error("magic is not the bytes \"lockword\"")
	}
	// The creator's header checks out field by field.
	b := validRegionBytes(t)
	if ne.Uint32(b[hdrHeaderSize:]) != regionArenaOffset || ne.Uint64(b[hdrSize:]) != uint64(len(b)) || ne.Uint32(b[hdrObjectCount:]) != 2 {
		t.Error("created header does not match the layout")
	}
	if e := b[regionTableOffset:][:tableEntrySize]; string(e[:2]) != "m\x00" || ne.Uint32(e[entryKind:]) != 1 || ne.Uint64(e[entryOffset:]) != regionArenaOffset {
		t.Errorf("first entry %q", e)
	}
}

// TestRegionErrorMessages: every failure reads "lockword: WHAT: WHY" with
// the package named once, however many layers wrapped it, and the causes
// stay visible to errors.Is.
func TestRegionErrorMessages(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	r := mustCreate(t, good, 0)
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	corrupt := validRegionBytes(t)
	corrupt[hdrCreatedNs] ^= 1
	badEntry := validRegionBytes(t)
	badEntry[regionTableOffset+entryKind] = 99
	reseal(badEntry)
	closed := mustCreate(t, filepath.Join(dir, "closed"), 0)
	closed.Close()
	errOf := func(_ any, err error) error { return err }
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"missing file", errOf(Open(filepath.Join(dir, "missing"), nil)), fs.ErrNotExist},
		{"empty path", errOf(Open("", nil)), fs.ErrInvalid},
		{"existing file", errOf(Create(good, 0, nil)), fs.ErrExist},
		{"too small", errOf(Create(filepath.Join(dir, "small"), 1, nil)), ErrRegionTooSmall},
		{"symbolic link", errOf(Open(link, nil)), ErrNotRegularFile},
		{"directory", errOf(Open(dir, nil)), ErrNotRegularFile},
		{"checksum", openBytes(t, corrupt), ErrBadChecksum},
		{"table entry", openBytes(t, badEntry), ErrObjectKind},
		{"inspect", errOf(Inspect(filepath.Join(dir, "missing"))), fs.ErrNotExist},
		{"closed", errOf(closed.Mutex("m")), ErrRegionClosed},
		{"kind", errOf(r.Bytes(func() string { r.Mutex("m"); return "m" }(), 8)), ErrObjectKind},
	} {
		msg := fmt.Sprint(c.err)
		t.Logf("%s: %s", c.name, msg)
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want errors.Is %v", c.name, c.err, c.want)
		}
		if !strings.HasPrefix(msg, "lockword: ") || strings.Count(msg, "lockword: ") != 1 {
			t.Errorf("%s: %q: want one \"lockword: \" prefix and no other", c.name, msg)
		}
	}
}

// TestRegionDamagedSizeNotTruncated: garbage in the header's size field
// is a damaged header (ErrBadSize, and the checksum named), not a
// truncated file; a file cut short under an intact header stays
// ErrTruncated (TestRegionTruncatedReported and the open tests).
func TestRegionDamagedSizeNotTruncated(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var garbage [8]byte
	ne.PutUint64(garbage[:], 6365935209750747224)
	if _, err := f.WriteAt(garbage[:], hdrSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = Open(path, nil)
	if !errors.Is(err, ErrBadSize) || errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("open with a damaged size field: %v; want ErrBadSize naming the checksum, not ErrTruncated", err)
	}
}
