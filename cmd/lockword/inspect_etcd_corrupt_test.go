//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
)

// TestInspectEtcdCorrupt: inspect -etcd exits 1 (as inspect of a region
// does) whenever it reports records no valid history writes, for each kind
// of etcd lock, in text and in JSON, and names the key on standard error;
// a corrupt election leader record is shown, not an inspect error (2).
func TestInspectEtcdCorrupt(t *testing.T) {
	t.Parallel()
	ep, cli := startInspectEtcd(t)
	for _, c := range []struct{ what, prefix, key, val string }{
		{"mutex hold record", "/c/mutex", "/c/mutex/owner", "x"},
		{"rwmutex queue key", "/c/rw", "/c/rw/queue/zz", "x"},
		{"election leader", "/c/election", "/c/election/leader", "{"},
		{"semaphore permits", "/c/sem", "/c/sem/permits", "x"},
	} {
		if _, err := cli.Put(context.Background(), c.key, c.val); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"inspect", "-etcd", ep, c.prefix}, {"inspect", "-etcd", ep, "-json", c.prefix}} {
			out, stderr, status := runCLI(t, args...)
			if status != exitFail || !strings.Contains(out, c.key) || !strings.Contains(stderr, c.key) {
				t.Errorf("%s: %q: status %d, want %d naming %s on stdout and stderr\nstdout:\n%s\nstderr:\n%s", c.what, args, status, exitFail, c.key, out, stderr)
			}
			if strings.Contains(out, "0 of 0") {
				t.Errorf("%s: %q shows a count of permits:\n%s", c.what, args, out)
			}
		}
	}
}
