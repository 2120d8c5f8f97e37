package cbuild

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestSourceDirOutsideModule: with no c directory above the working
// directory and no LOCKWORD_C_DIR, as for an installed lockword, the
// sources come from the binary: SourceDir gives a directory holding every
// file a build reads, byte for byte the module's.
func TestSourceDirOutsideModule(t *testing.T) {
	want := map[string][]byte{}
	for _, f := range sourceFiles {
		b, err := os.ReadFile(filepath.Join("..", "..", "c", f))
		if err != nil {
			t.Fatal(err)
		}
		want[f] = b
	}
	t.Setenv("LOCKWORD_C_DIR", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Chdir(t.TempDir())
	for range 2 { // the second call finds the first one's copy
		dir, err := SourceDir()
		if err != nil {
			t.Fatalf("SourceDir outside the module: %v", err)
		}
		for f, w := range want {
			if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !bytes.Equal(got, w) {
				t.Errorf("%s in %s: %v, %d bytes; want the module's %d bytes", f, dir, err, len(got), len(w))
			}
		}
	}
}

// TestSourceDirOverride: LOCKWORD_C_DIR names the sources to build instead.
func TestSourceDirOverride(t *testing.T) {
	d := t.TempDir()
	t.Setenv("LOCKWORD_C_DIR", d)
	if got, err := SourceDir(); err != nil || got != d {
		t.Errorf("SourceDir = %q, %v; want %q", got, err, d)
	}
}
