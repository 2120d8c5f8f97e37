//go:build linux

package shm

import (
	"errors"
	"testing"
)

// TestRegionInspect: a region without a path (a memfd) is described
// through its handle, objects that another handle created since included,
// and a closed handle says so.
func TestRegionInspect(t *testing.T) {
	r, err := CreateMemfd("inspect-test", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := OpenFile(r.File(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := other.Mutex("made-by-other")
	if err != nil {
		t.Fatal(err)
	}
	m.Lock()
	info, err := r.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Objects) != 1 || info.Objects[0].Name != "made-by-other" || info.Objects[0].State != "held" || len(info.Processes) != 2 {
		t.Fatalf("Inspect: %+v", info)
	}
	m.Unlock()
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Inspect(); !errors.Is(err, ErrRegionClosed) {
		t.Fatalf("Inspect after Close: %v", err)
	}
}
