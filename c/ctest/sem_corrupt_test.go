//go:build linux

package ctest

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// semWriteEntry writes v into field (byte offset) of slot's entry of the
// semaphore object at off, through the file, as a stray write would.
func semWriteEntry(t *testing.T, path string, off, slot, field int64, v []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// docs/abi.md: the entries start at 128, 16 bytes each.
	if _, err := f.WriteAt(v, off+128+16*slot+field); err != nil {
		t.Fatal(err)
	}
}

// startCHoldingTwo starts a C worker (sem-release-after) that holds 2 of
// the 4 permits of semaphore "sem" in a new region at path, and returns
// the object's offset and the worker's slot; a line on in makes it
// release and close.
func startCHoldingTwo(t *testing.T) (path string, w *proc, in io.WriteCloser, off, slot int64) {
	t.Helper()
	b := cBuild(t, "plain")
	path, r := goRegion(t)
	if _, err := r.Semaphore("sem", 4); err != nil {
		t.Fatal(err)
	}
	w, in = startCAttached(t, b.Worker, "held", "sem-release-after", path, "sem", "4", "2")
	info, err := r.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range info.Objects {
		if o.Name == "sem" && o.Semaphore != nil && len(o.Semaphore.Processes) == 1 {
			return path, w, in, o.Offset, int64(o.Semaphore.Processes[0].Slot)
		}
	}
	t.Fatalf("Inspect: %+v, want the C holder of \"sem\"", info)
	return
}

// TestCSemaphoreCorruptEntry: C validates the words as Go does. An entry
// of another slot holding impossibly many permits makes lw_region_sem
// LW_ECORRUPT; an entry with a ticket and no process (checked under the
// guard only) makes an acquire LW_ECORRUPT (1023) holding nothing; a handle
// with another permit count gets LW_EPERMITS, named as such.
func TestCSemaphoreCorruptEntry(t *testing.T) {
	b := cBuild(t, "plain")
	path, r := goRegion(t)
	for _, name := range []string{"held", "ticket"} {
		if _, err := r.Semaphore(name, 4); err != nil {
			t.Fatal(err)
		}
	}
	info, err := r.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	off := map[string]int64{}
	for _, o := range info.Objects {
		off[o.Name] = o.Offset
	}
	semWriteEntry(t, path, off["held"], 9, 0, []byte{0xa5, 0xa5, 0xa5, 0xa5})
	h := startC(t, b.Worker, "sem-acquire", path, "held", "4", "1", "2000")
	if _, err := h.wait(10 * time.Second); err == nil || !strings.Contains(err.Error(), "sem: lockword: corrupt shared object") {
		t.Errorf("C handle on an entry holding 0xa5a5a5a5 of 4 permits: %v, want LW_ECORRUPT", err)
	}

	semWriteEntry(t, path, off["ticket"], 9, 8, []byte{7, 0, 0, 0})
	w := startC(t, b.Worker, "sem-acquire", path, "ticket", "4", "1", "2000")
	if l := w.line(15 * time.Second); l != "1023 0 0 0 0" {
		t.Errorf("C acquire over an entry queued for no process printed %q, want %q (code holders permits pid held)", l, "1023 0 0 0 0")
	}
	w.wait(10 * time.Second)

	m := startC(t, b.Worker, "sem-acquire", path, "ticket", "5", "1", "2000")
	if _, err := m.wait(10 * time.Second); err == nil || !strings.Contains(err.Error(), "another number of permits") {
		t.Errorf("C handle with 5 permits on a semaphore of 4: %v, want the permit count named", err)
	}
}

// TestCSemaphoreReleaseCorruptEntry: a C process holding 2 permits whose
// entry is overwritten (its held zeroed) gets LW_ECORRUPT from its release,
// not LW_EPERM, which says it released more than it took: it did not. Its
// own count says what it holds (0 after the release), and its close
// finishes, as Go's Release and Close do.
func TestCSemaphoreReleaseCorruptEntry(t *testing.T) {
	path, w, in, off, slot := startCHoldingTwo(t)
	semWriteEntry(t, path, off, slot, 0, []byte{0, 0, 0, 0})
	io.WriteString(in, "go\n")
	rest, err := w.wait(10 * time.Second)
	if want := []string{"release 1023 0", "close 0"}; err != nil || !slices.Equal(rest, want) {
		t.Errorf("C release and close over a zeroed entry: %q %v, want %q (LW_ECORRUPT, held 0; closed)", rest, err, want)
	}
}

// TestCSemaphoreGuardNamesThisProcess: a stray write of a C process's own
// owner token into its semaphore's guard word, while no thread of it holds
// the guard, is corruption: its release returns LW_ECORRUPT (its count
// says the permits are given back) and its close finishes, promptly,
// instead of waiting for ever for a holder that does not exist. 10 s is
// far above what the check costs on a loaded host; the old code waited
// past it.
func TestCSemaphoreGuardNamesThisProcess(t *testing.T) {
	path, w, in, off, slot := startCHoldingTwo(t)
	// The holder's entry's token (docs/abi.md: entries at 128, 16 bytes
	// each, the token at 4) into the guard word (0).
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok := make([]byte, 4)
	if _, err := f.ReadAt(tok, off+128+16*slot+4); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(tok, off); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "go\n")
	rest, err := w.wait(10 * time.Second)
	if want := []string{"release 1023 0", "close 0"}; err != nil || !slices.Equal(rest, want) {
		t.Errorf("C release and close over a guard naming the C process: %q %v, want %q (LW_ECORRUPT, held 0; closed)", rest, err, want)
	}
}
