//go:build linux

package torture

import (
	"strings"
	"testing"
)

// TestTortureEtcdRW: readers and writers on etcdlock.RWMutex, exact and
// without a reader seeing a writer inside; with readers that take no
// lock (etcd-rw-broken) the run must FAIL. A broken run whose readers
// happened to miss every writer proves nothing and is made again, up to
// 3 times.
func TestTortureEtcdRW(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runEtcd(t, "-lock", "etcd-rw", "-workers", "4", "-iters", "6")
	wantPass(t, stdout, stderr, status, "Lock: etcd-rw", "Expected: 120", "Actual:   120", "Hangs: 0")
	if !strings.Contains(stdout, " (0 saw a writer inside)\n") {
		t.Fatalf("a reader saw a writer:\n%s", stdout)
	}
	wantCaughtIn3(t, runEtcd, "reads saw a writer inside", "readers without the lock", "them", "-lock", "etcd-rw-broken", "-workers", "4", "-iters", "6")
}
