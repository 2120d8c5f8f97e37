package locktest

import (
	"fmt"
	"strings"
	"testing"
)

// WantPanic calls f, misuse that must fail loudly, and fails t unless f
// panics with a value whose text contains substr (the message naming the
// primitive). what names the misuse in the failure.
func WantPanic(t *testing.T, what, substr string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), substr) {
			t.Fatalf("%s: panic %v, want one containing %q", what, r, substr)
		}
	}()
	f()
}
