//go:build linux

package shm

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

func init() {
	// create-die PATH: create the region at PATH, stop before publishing
	// its header (holding the file lock, the file sized) and wait to be
	// killed.
	childModes["create-die"] = func(args []string) error {
		testHookBeforePublish = func() {
			fmt.Println("creating")
			time.Sleep(time.Hour)
		}
		_, err := Create(args[0], 0, nil)
		return err
	}
}

// killedCreator leaves at path the file of a creator SIGKILLed between
// creating the file and publishing the header.
func killedCreator(t *testing.T, path string) {
	t.Helper()
	c := startChild(t, "create-die", path)
	c.expect(t, "creating")
	c.cmd.Process.Kill()
	c.exit()
}

// TestOpenReclaimsAbandonedCreation: a creator killed between creating the
// file and publishing its header leaves a file that nobody holds the lock
// of, with a zero magic and empty tables: Open and OpenOrCreate initialize
// it themselves and work. While a live creator holds the lock, or when
// the tables show the region was in use, the file is left alone
// (ErrNotInitialized).
func TestOpenReclaimsAbandonedCreation(t *testing.T) {
	opts := &Options{InitTimeout: 50 * time.Millisecond}
	for _, open := range []func(string) (*Region, error){
		func(p string) (*Region, error) { return Open(p, opts) },
		func(p string) (*Region, error) { return OpenOrCreate(p, 0, opts) },
	} {
		path := tempRegionPath(t)
		killedCreator(t, path)
		r, err := open(path)
		if err != nil {
			t.Fatalf("open of an abandoned creation: %v", err)
		}
		m, err := r.Mutex("m")
		if err != nil {
			t.Fatal(err)
		}
		m.Lock()
		m.Unlock()
		if r.Size() != DefaultRegionSize {
			t.Errorf("reclaimed region of %d bytes, want the creator's %d", r.Size(), DefaultRegionSize)
		}
		r.Close()
		if _, err := Inspect(path); err != nil {
			t.Errorf("Inspect after the reclaim: %v", err)
		}
	}

	// A creator that is alive holds the lock: not abandoned.
	path := tempRegionPath(t)
	c := startChild(t, "create-die", path)
	c.expect(t, "creating")
	defer c.exit()
	defer c.cmd.Process.Kill()
	if _, err := Open(path, opts); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Open while the creator holds the lock: %v, want ErrNotInitialized", err)
	}

	// A region once in use whose magic was overwritten: not abandoned.
	path = tempRegionPath(t)
	b := validRegionBytes(t)
	ne.PutUint64(b[hdrMagic:], 0)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, opts); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Open of a used region with a zero magic: %v, want ErrNotInitialized", err)
	}
}
