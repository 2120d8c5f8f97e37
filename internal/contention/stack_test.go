package contention

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// funcs expands pcs as lockprof does (each PC alone, inlined calls
// included) and returns the function names from the first one named
// from on, without runtime.goexit.
func funcs(pcs []uintptr, from string) []string {
	var names []string
	for _, pc := range pcs {
		frames := runtime.CallersFrames([]uintptr{pc})
		for {
			f, more := frames.Next()
			if f.Function != "runtime.goexit" {
				names = append(names, f.Function)
			}
			if !more {
				break
			}
		}
	}
	for i, n := range names {
		if strings.HasSuffix(n, from) {
			return names[i:]
		}
	}
	return nil
}

//go:noinline
func captureBoth() (fp, byRuntime []uintptr) {
	var stk [depth]uintptr
	profile.mu.Lock()
	n := callers(&stk)
	profile.mu.Unlock()
	byRuntime = make([]uintptr, depth)
	return stk[:n], byRuntime[:runtime.Callers(1, byRuntime)]
}

// inlinedCapture is inlined into outerCapture: its frame exists only in
// the inline tree of outerCapture's return address.
func inlinedCapture() ([]uintptr, []uintptr) { return captureBoth() }

//go:noinline
func outerCapture() ([]uintptr, []uintptr) { return inlinedCapture() }

// TestCallersMatchesRuntimeCallers: the stack a record takes (frame
// pointers where there are some) names the same functions, inlined ones
// included, as runtime.Callers does, so the profile's attribution does not
// depend on how the stack was read.
func TestCallersMatchesRuntimeCallers(t *testing.T) {
	fp, byRuntime := outerCapture()
	got, want := funcs(logical(fp), ".captureBoth"), funcs(byRuntime, ".captureBoth")
	if len(want) < 4 || !slices.Equal(got, want) {
		t.Fatalf("stack read by callers:\n  %s\nruntime.Callers:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if !slices.ContainsFunc(got, func(n string) bool { return strings.HasSuffix(n, ".inlinedCapture") }) {
		t.Fatalf("the inlined frame is missing: %v", got)
	}
}

// TestRecordStack: a recorded wait's stack leads to its caller's caller.
func TestRecordStack(t *testing.T) {
	defer SetRate(SetRate(1))
	recordHere()
	for _, r := range Records() {
		if r.View == Waiter && slices.ContainsFunc(funcs(r.Stack, ".End"), func(n string) bool { return strings.HasSuffix(n, ".recordHere") }) {
			return
		}
	}
	t.Fatalf("no waiter record names recordHere: %v", Records())
}

//go:noinline
func recordHere() { End(Begin()) }

type capturer interface{ capture() ([]uintptr, []uintptr) }

type inner struct{}

//go:noinline
func (*inner) capture() ([]uintptr, []uintptr) { return captureBoth() }

// outer's capture, called through capturer, is a method wrapper the
// compiler generates (runtime.Callers leaves it out).
type outer struct{ inner }

// TestCallersLeavesOutWrappers: the wrapper between an interface call and
// a promoted method is left out, as runtime.Callers leaves it out, so it
// cannot stand in a profile for the function that called Lock.
func TestCallersLeavesOutWrappers(t *testing.T) {
	var c capturer = &outer{}
	fp, byRuntime := c.capture()
	got, want := funcs(logical(fp), ".captureBoth"), funcs(byRuntime, ".captureBoth")
	if len(want) < 3 || !slices.Equal(got, want) {
		t.Fatalf("stack read by callers:\n  %s\nruntime.Callers:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestCallersStopsAtCgoCallback runs testdata/cgocallback: a sampled wait
// inside a Go function called back from C, whose frame pointer register
// the C code left pointing at nothing. The walk must stop at the
// runtime's cgo callback entry (a walk that went on faults: checked by
// making atBoundary always false) and still name the waiting function.
// It builds a cgo program (about 10 s on the loaded 2-core host), so it
// runs only with LOCKWORD_LONG=1, and needs a C compiler.
func TestCallersStopsAtCgoCallback(t *testing.T) {
	if os.Getenv("LOCKWORD_LONG") == "" {
		t.Skip("builds a cgo program; set LOCKWORD_LONG=1")
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no frame pointers walked on " + runtime.GOARCH)
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler")
	}
	bin := filepath.Join(t.TempDir(), "cgocallback")
	build := exec.Command("go", "build", "-o", bin, "./testdata/cgocallback")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("cgocallback: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "main.waitInGo\n") {
		t.Fatalf("the recorded stack does not name main.waitInGo:\n%s", out)
	}
}
