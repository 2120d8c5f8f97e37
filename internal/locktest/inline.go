package locktest

import (
	"os/exec"
	"strings"
	"testing"
)

// CheckInlinable fails t for each function of fns (as the compiler names
// them: "(*Mutex).Lock") that the package in the current directory no
// longer lets the compiler inline: a call frame on every Lock would cost
// more than the CAS it wraps. It asks the compiler (go build -gcflags=-m)
// rather than trusting a cost estimate, and skips under -short.
func CheckInlinable(t *testing.T, fns []string) {
	if testing.Short() {
		t.Skip("builds the package")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	inlinable := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if _, fn, ok := strings.Cut(line, ": can inline "); ok {
			inlinable[fn] = true
		}
	}
	for _, fn := range fns {
		if !inlinable[fn] {
			t.Errorf("%s is not inlinable any more", fn)
		}
	}
}
