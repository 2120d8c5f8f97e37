//go:build linux

package ctest

import (
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/cbuild"
)

// TestCStress runs the C library's in-process stress (16 threads on one
// shm.Mutex, lock, trylock and timed lock by turns, a plain counter and
// an owner slot checked inside) in the plain, ThreadSanitizer and
// AddressSanitizer+UBSan builds: exact total, no violation, no report.
// The same stress with a trylock that ignores the word must fail in each
// checker: ThreadSanitizer reports the race, the counter comes up short.
func TestCStress(t *testing.T) {
	for _, c := range []struct {
		v     cbuild.Variant
		iters string
	}{{cbuild.Plain, "50000"}, {cbuild.TSan, "5000"}, {cbuild.ASan, "20000"}} {
		b := cBuild(t, c.v)
		p := startC(t, b.Worker, "stress", "16", c.iters)
		out, err := p.wait(2 * time.Minute)
		if err != nil || len(out) != 1 {
			t.Fatalf("%s stress: %v %q", c.v, err, out)
		}
		f := strings.Fields(out[0]) // counter N want N violations V
		if len(f) != 6 || f[1] != f[3] || f[5] != "0" {
			t.Fatalf("%s stress: %q", c.v, out[0])
		}
		if s := p.tail.String(); strings.Contains(s, "WARNING") || strings.Contains(s, "ERROR") {
			t.Fatalf("%s stress: sanitizer report:\n%s", c.v, s)
		}
		t.Logf("%s: %s", c.v, out[0])
	}
	// The checkers fail on a broken lock.
	b := cBuild(t, cbuild.TSan)
	p := startC(t, b.Worker, "stress", "16", "2000", "broken")
	p.wait(2 * time.Minute) // TSan exits non-zero after a report
	if s := p.tail.String(); !strings.Contains(s, "ThreadSanitizer: data race") {
		t.Errorf("ThreadSanitizer did not report the broken lock's race:\n%s", s)
	}
	// The counter and owner checks catch it too. The threads must overlap
	// for that; on a loaded host a run may schedule them one at a time,
	// so up to three runs, one of which must fail.
	b = cBuild(t, cbuild.Plain)
	for run := 1; ; run++ {
		out, _ := startC(t, b.Worker, "stress", "16", "50000", "broken").wait(2 * time.Minute)
		if len(out) != 1 {
			t.Fatalf("broken stress: %q", out)
		}
		if f := strings.Fields(out[0]); len(f) != 6 || f[1] != f[3] || f[5] != "0" {
			t.Logf("broken trylock caught in run %d: %s", run, out[0])
			break
		}
		if run == 3 {
			t.Fatalf("the stress checks passed a trylock that ignores the word three times: %q", out[0])
		}
	}
}
