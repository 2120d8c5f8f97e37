package torture

import (
	"strings"
	"testing"
	"time"
)

// TestTortureEtcdUnreachable: an -etcd endpoint that does not answer is a
// set-up error (exit status 2, as the help says), reported with the
// endpoint before any kind runs, even one listed before the etcd kind, not
// a failed check (1). It takes etcdOpTimeout (3 s), the time the client is
// given to answer (-lock etcd alone: TestTortureEtcdUsage).
func TestTortureEtcdUnreachable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	for _, lock := range []string{"mutex,etcd-rw"} {
		out, stderr, status := runCLI(t, "torture", "-lock", lock, "-etcd", "127.0.0.1:1", "-workers", "2", "-iters", "2")
		if status != exitUsage || !strings.Contains(stderr, "127.0.0.1:1") || !strings.Contains(stderr, "unreachable") || out != "" {
			t.Errorf("-lock %s -etcd 127.0.0.1:1: status %d, want %d, an unreachable error naming the endpoint and nothing run\nstdout:\n%s\nstderr:\n%s",
				lock, status, exitUsage, out, stderr)
		}
	}
	t.Logf("took %v", time.Since(start))
}
