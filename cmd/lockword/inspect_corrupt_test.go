//go:build linux

package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockword/lockword/shm"
)

// TestInspectShowsCorrupt: a ticket mutex whose serving word was written
// ahead of next (no valid history does that) is shown as corrupt, with the
// reason; inspect prints the whole report (the header is intact) and exits
// 1, naming the corrupt object on stderr, so that a check script does not
// take the region for healthy.
func TestInspectShowsCorrupt(t *testing.T) {
	path := regionWithCorruptWord(t, func(r *shm.Region) error { _, err := r.TicketMutex("t"); return err },
		4, binary.NativeEndian.AppendUint32(nil, 10)) // serving
	stdout, stderr, status := runCLI(t, "inspect", path)
	if status != exitFail || !strings.Contains(stdout, "corrupt (serving 10 is ahead of next 0)") ||
		!strings.Contains(stderr, "1 corrupt object: t (serving 10 is ahead of next 0)") {
		t.Fatalf("status %d, stdout %q, stderr %q; want 1, the object shown corrupt with its reason, and named on stderr", status, stdout, stderr)
	}
	stdout, stderr, status = runCLI(t, "inspect", "-json", path)
	if status != exitFail || !strings.Contains(stdout, `"state":"corrupt"`) || !strings.Contains(stderr, "1 corrupt object") {
		t.Fatalf("-json: status %d, stdout %q, stderr %q; want 1, the JSON report and the object named on stderr", status, stdout, stderr)
	}
}

// TestInspectCorruptRingFails: a ring whose tail no valid history produces
// (not a multiple of 8) makes inspect exit 1 too, naming the ring; it
// exited 0, since a ring has no lock STATE, and its row read "corrupt
// indices full".
func TestInspectCorruptRingFails(t *testing.T) {
	path := regionWithCorruptWord(t, func(r *shm.Region) error {
		p, err := r.RingProducer("q", 256)
		if err == nil {
			p.Close()
		}
		return err
	}, 128, binary.NativeEndian.AppendUint64(nil, 3)) // tail
	stdout, stderr, status := runCLI(t, "inspect", path)
	if status != exitFail || !strings.Contains(stderr, "1 corrupt object: q (ring indices impossible") ||
		!strings.Contains(stdout, "corrupt indices, see Rings") {
		t.Fatalf("status %d, stdout %q, stderr %q; want 1, the ring named on stderr, and its row reading corrupt", status, stdout, stderr)
	}
}

// TestInspectCorruptSemaphoreEntry: a semaphore entry that names no
// process but holds a ticket (every call of the API returns ErrCorrupt for
// it) is shown corrupt and inspect exits 1; it was shown free, status 0.
func TestInspectCorruptSemaphoreEntry(t *testing.T) {
	const slot, entries, entrySize, ticketOff = 635, 128, 16, 8 // docs/abi.md's Semaphore layout
	path := regionWithCorruptWord(t, func(r *shm.Region) error { _, err := r.Semaphore("s", 4); return err },
		entries+slot*entrySize+ticketOff, binary.NativeEndian.AppendUint32(nil, 43))
	stdout, stderr, status := runCLI(t, "inspect", path)
	const reason = "entry of slot 635 holds 0 permits (ticket 43) for no process"
	if status != exitFail || !strings.Contains(stdout, "corrupt ("+reason+")") || !strings.Contains(stderr, "1 corrupt object: s ("+reason+")") {
		t.Fatalf("status %d, stdout %q, stderr %q; want 1, the semaphore shown corrupt with its reason, and named on stderr", status, stdout, stderr)
	}
}

// regionWithCorruptWord creates a region file whose one object make
// creates, closes it, and writes word at offset off of that object, as a
// process outside lockword would; it returns the file's path.
func regionWithCorruptWord(t *testing.T, make func(*shm.Region) error, off int64, word []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "region")
	r, err := shm.Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := make(r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	info, err := shm.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(word, info.Objects[0].Offset+off); err != nil {
		t.Fatal(err)
	}
	return path
}
