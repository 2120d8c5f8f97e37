//go:build !linux

package shm

import (
	"errors"
	"testing"
)

// TestRegionUnsupported: elsewhere than Linux every constructor says so.
func TestRegionUnsupported(t *testing.T) {
	if _, err := Create("x", 0, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("CreateRegion = %v, want ErrUnsupported", err)
	}
	if _, err := Open("x", nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("OpenRegion = %v", err)
	}
	if _, err := OpenOrCreate("x", 0, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("OpenOrCreateRegion = %v", err)
	}
	if _, err := Inspect("x"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("InspectRegion = %v", err)
	}
}
