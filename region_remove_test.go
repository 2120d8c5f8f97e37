//go:build linux

package lockword

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoveRegion: a region is removed only once no live process is
// attached to it (a killed one does not count), or when forced; a file
// that is not a region is removed only when forced, and a link never.
func TestRemoveRegion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "region")
	r, err := CreateRegion(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := RemoveRegion(path, nil); !errors.Is(err, ErrRegionInUse) || !strings.Contains(err.Error(), "remove region") {
		t.Fatalf("remove while this process is attached: %v, want ErrRegionInUse", err)
	}
	c := startChild(t, "hold", path, "m")
	c.expect(t, "locked")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := RemoveRegion(path, nil); !errors.Is(err, ErrRegionInUse) {
		t.Fatalf("remove while a child is attached: %v, want ErrRegionInUse", err)
	}
	// Killed holding a lock: dead, so the region is removable.
	c.cmd.Process.Kill()
	c.exit()
	if err := RemoveRegion(path, nil); err != nil {
		t.Fatalf("remove after the last process died: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file still there: %v", err)
	}
	if err := RemoveRegion(path, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove of a missing region: %v", err)
	}

	// Forced: removed even while attached.
	r, err = CreateRegion(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := RemoveRegion(path, &RemoveOptions{Force: true}); err != nil {
		t.Fatalf("forced remove: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close after the file was removed: %v", err)
	}

	// Not a region: refused, unless forced.
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not a region, but long enough to read a header from"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveRegion(junk, nil); err == nil {
		t.Fatal("removed a file that is not a region without Force")
	}
	if err := RemoveRegion(junk, &RemoveOptions{Force: true}); err != nil {
		t.Fatalf("forced remove of a non-region: %v", err)
	}
	// A link: never, and its target stays.
	target := filepath.Join(dir, "target")
	os.WriteFile(target, nil, 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := RemoveRegion(link, &RemoveOptions{Force: true}); !errors.Is(err, ErrNotRegularFile) {
		t.Fatalf("forced remove of a link: %v, want ErrNotRegularFile", err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("link removed: %v", err)
	}
}
