//go:build !linux

package lockword

import (
	"errors"
	"testing"
)

// TestRegionUnsupported: elsewhere than Linux every constructor says so.
func TestRegionUnsupported(t *testing.T) {
	if _, err := CreateRegion("x", 0, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("CreateRegion = %v, want ErrUnsupported", err)
	}
	if _, err := OpenRegion("x", nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("OpenRegion = %v", err)
	}
	if _, err := OpenOrCreateRegion("x", 0, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("OpenOrCreateRegion = %v", err)
	}
	if _, err := InspectRegion("x"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("InspectRegion = %v", err)
	}
}
