package main

import (
	"os"
	"testing"
)

// TestProcState: a running process has no state to notice; a missing one
// has none to read.
func TestProcState(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if got := procState(os.Getpid()); got != "" {
		t.Errorf("procState(self) = %q, want \"\"", got)
	}
	if got := procState(-1); got != "" {
		t.Errorf("procState(-1) = %q", got)
	}
}
