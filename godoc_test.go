package lockword

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestGoDocMutexReceivers: go doc shows every method of Mutex with one
// receiver name, m, including the diagnostics methods that Mutex would
// otherwise promote from its embedded diag (receiver d).
func TestGoDocMutexReceivers(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gotool, "doc", ".", "Mutex").Output()
	if err != nil {
		t.Fatalf("go doc: %v", err)
	}
	methods := regexp.MustCompile(`(?m)^func \((\w+) \*Mutex\) (\w+)`).FindAllStringSubmatch(string(out), -1)
	if len(methods) < 8 {
		t.Fatalf("go doc lists %d methods of Mutex:\n%s", len(methods), out)
	}
	for _, m := range methods {
		if m[1] != "m" {
			t.Errorf("go doc: Mutex.%s has receiver %s, want m", m[2], m[1])
		}
	}
}
