package bench

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestParseSection(t *testing.T) {
	for in, want := range map[string]Section{
		"empty": {}, "0": {}, "100ns/1us": {Inside: 100 * time.Nanosecond, Outside: time.Microsecond},
		"0/1ms": {Outside: time.Millisecond},
	} {
		got, err := ParseSection(in)
		if err != nil || got != want {
			t.Errorf("ParseSection(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := ParseSection(got.String()); err != nil || back != got {
			t.Errorf("%q does not read back: %v, %v", got.String(), back, err)
		}
	}
	for _, in := range []string{"", "100ns", "x/1us", "1us/x", "-1ns/0", "2ms/0"} {
		if _, err := ParseSection(in); err == nil {
			t.Errorf("ParseSection(%q): no error", in)
		}
	}
}

// TestDefaultGrid: the counts always, and past 4 CPUs the CPU
// count and four times it.
func TestDefaultGrid(t *testing.T) {
	grid := DefaultGrid()
	for _, n := range []int{1, 2, 4, 16, 64} {
		if !slices.Contains(grid, n) {
			t.Errorf("grid %v lacks %d", grid, n)
		}
	}
	if n := runtime.NumCPU(); n > 4 && (!slices.Contains(grid, n) || !slices.Contains(grid, 4*n)) {
		t.Errorf("grid %v on %d CPUs lacks %d or %d", grid, n, n, 4*n)
	}
	if !slices.IsSorted(grid) || len(slices.Compact(slices.Clone(grid))) != len(grid) {
		t.Errorf("grid %v not sorted and distinct", grid)
	}
}

// TestParseKinds: all is every in-process kind but etcd, plus shared with
// -procs.
func TestParseKinds(t *testing.T) {
	all, _ := ParseKinds("all", false)
	if slices.Contains(all, "shared") || slices.Contains(all, "shared-queue") || slices.Contains(all, "etcd") || len(all) != len(Kinds)-3 {
		t.Errorf("all: %v", all)
	}
	if runtime.GOOS == "linux" {
		withProcs, _ := ParseKinds("mutex", true)
		if !slices.Equal(withProcs, []string{"mutex", "shared"}) {
			t.Errorf("mutex with -procs: %v", withProcs)
		}
	}
}
