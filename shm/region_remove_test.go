//go:build linux

package shm

import (
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoveRegion: a region is removed only once no live process is
// attached to it (a killed one does not count), or when forced; a file
// that is not a region is not removed, and a link never.
func TestRemoveRegion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "region")
	r, err := Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(path, nil); !errors.Is(err, ErrRegionInUse) || !strings.Contains(err.Error(), "remove region") {
		t.Fatalf("remove while this process is attached: %v, want ErrRegionInUse", err)
	}
	c := startChild(t, "hold", path, "m")
	c.expect(t, "locked")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path, nil); !errors.Is(err, ErrRegionInUse) {
		t.Fatalf("remove while a child is attached: %v, want ErrRegionInUse", err)
	}
	// Killed holding a lock: dead, so the region is removable.
	c.cmd.Process.Kill()
	c.exit()
	if err := Remove(path, nil); err != nil {
		t.Fatalf("remove after the last process died: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file still there: %v", err)
	}
	if err := Remove(path, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove of a missing region: %v", err)
	}

	// Forced: removed even while attached.
	r, err = Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(path, &RemoveOptions{Force: true}); err != nil {
		t.Fatalf("forced remove: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close after the file was removed: %v", err)
	}

	// Not a region: refused even when forced (TestRemoveRegionForceOnlyOurs).
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not a region, but long enough to read a header from"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Remove(junk, nil); err == nil {
		t.Fatal("removed a file that is not a region without Force")
	}
	// A link: never, and its target stays.
	target := filepath.Join(dir, "target")
	os.WriteFile(target, nil, 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Remove(link, &RemoveOptions{Force: true}); !errors.Is(err, ErrNotRegularFile) {
		t.Fatalf("forced remove of a link: %v, want ErrNotRegularFile", err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("link removed: %v", err)
	}
}

// TestRemoveRegionForceOnlyOurs: Force overrides "processes are attached"
// and a damaged region, never "this is not a region". A file is ours only
// if it starts with a version-1 header's signature (the magic, then the
// version and the geometry it fixes, 24 bytes no other file has by
// chance): a region truncated, resized or with a damaged checksum or table
// keeps it and goes; random bytes, a text file that happens to start with
// "lockword", an empty or all-zero file (never initialized: nothing shows
// whose it is) and a header of another ABI version stay, with the open's
// error.
func TestRemoveRegionForceOnlyOurs(t *testing.T) {
	dir := t.TempDir()
	r, err := Create(filepath.Join(dir, "model"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Mutex("m"); err != nil {
		t.Fatal(err)
	}
	r.Close()
	region, err := os.ReadFile(filepath.Join(dir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), region...)) }
	random := make([]byte, 64<<10)
	rand.New(rand.NewSource(1)).Read(random)
	for _, c := range []struct {
		name    string
		content []byte
		want    error // the open's error, which Remove returns
		removed bool  // by a forced removal
	}{
		{"random bytes", random, ErrBadMagic, false},
		{"three bytes", []byte("abc"), ErrBadMagic, false},
		{"text starting with the magic", []byte("lockword rocks\n" + strings.Repeat("x", 50000)), ErrBadVersion, false},
		{"empty", nil, ErrNotInitialized, false},
		{"all zero", make([]byte, regionMinSize), ErrNotInitialized, false},
		{"another ABI version", edit(func(b []byte) []byte { ne.PutUint32(b[hdrVersion:], 2); return b }), ErrBadVersion, false},
		{"truncated to 100 bytes", region[:100], ErrTruncated, true},
		{"truncated inside the tables", region[:20000], ErrTruncated, true},
		{"extended", append(append([]byte(nil), region...), make([]byte, 4096)...), ErrBadSize, true},
		{"checksum damaged", edit(func(b []byte) []byte { b[hdrChecksum] ^= 1; return b }), ErrBadChecksum, true},
		{"table entry damaged", edit(func(b []byte) []byte {
			ne.PutUint32(b[regionTableOffset+entryKind:], 99)
			ne.PutUint32(b[hdrChecksum:], headerChecksum(b, 1))
			return b
		}), ErrObjectKind, true},
	} {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, c.content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Remove(path, nil); !errors.Is(err, c.want) {
			t.Errorf("%s: RemoveRegion: %v, want %v", c.name, err, c.want)
		}
		err := Remove(path, &RemoveOptions{Force: true})
		_, serr := os.Lstat(path)
		switch {
		case c.removed && (err != nil || serr == nil):
			t.Errorf("%s: forced RemoveRegion: %v, file there: %v; want it removed", c.name, err, serr == nil)
		case !c.removed && (!errors.Is(err, c.want) || serr != nil):
			t.Errorf("%s: forced RemoveRegion: %v (file: %v); want %v and the file kept", c.name, err, serr, c.want)
		}
		os.Remove(path)
	}
}
