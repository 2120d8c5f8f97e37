package lockword

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFastPathsInline asserts that the fast paths stay inlinable: a call
// frame on every Lock would cost more than the CAS it wraps. It asks the
// compiler (go build -gcflags=-m) rather than trusting a cost estimate.
func TestFastPathsInline(t *testing.T) {
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
	for _, fn := range fastPaths {
		if !inlinable[fn] {
			t.Errorf("%s is not inlinable any more", fn)
		}
	}
}

// fastPaths lists every fast path; later primitives append theirs.
var fastPaths = []string{
	"(*Mutex).Lock", "(*Mutex).Unlock", "(*Mutex).TryLock", "(*Mutex).LockContext",
	"(*SpinMutex).Lock", "(*SpinMutex).Unlock", "(*SpinMutex).TryLock", "(*SpinMutex).LockContext",
	// TicketMutex.Lock needs two atomics and a ticket passed to its slow
	// path, which does not fit the inliner's budget; Unlock does.
	"(*TicketMutex).Unlock",
	"(*RWMutex).RLock", "(*RWMutex).RUnlock",
	// Semaphore's Acquire, TryAcquire and Release load the word, check a
	// weight against it and CAS: a load, a compare and a call with a
	// weight already cost 81 against the inliner's budget of 80. They
	// stay one call each, with no lock and no allocation.
}
