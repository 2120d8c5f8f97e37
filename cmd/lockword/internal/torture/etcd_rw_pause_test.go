//go:build linux

package torture

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTortureEtcdRWPauseReader: -pause on etcd-rw across processes stops
// a process whose reader holds with its write of what it read still to
// come, until its read keys have expired: that write must be refused by
// the read hold's fence, and counted. The twin whose readers write
// unguarded (etcd-rw-unfenced) must FAIL: its paused reader's write
// lands. Each run makes one pause (TTL 2 s), in parallel: about 5 s under
// -race on 2 loaded cores. Timing assumption: none beyond the TTL; the
// supervisor retries the pause until it stops a reader with its write to
// come, so both outcomes are certain once it has.
func TestTortureEtcdRWPauseReader(t *testing.T) {
	t.Parallel()
	args := []string{"-procs", "2", "-workers", "4", "-pause", "-pauses", "1"}
	paused := regexp.MustCompile(`(?m)^Readers paused holding: 1, with (\d+) writes to come; readers' late writes refused: (\d+), landed: (\d+)$`)
	t.Run("fenced", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, status := runEtcd(t, append([]string{"-lock", "etcd-rw"}, args...)...)
		wantPass(t, stdout, stderr, status, "Hangs: 0")
		m := paused.FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("no paused reader reported:\n%s", stdout)
		}
		pending, _ := strconv.Atoi(m[1])
		refused, _ := strconv.Atoi(m[2])
		if pending < 1 || refused < pending || m[3] != "0" {
			t.Fatalf("a paused reader's late write was not refused (%s):\n%s", m[0], stdout)
		}
	})
	t.Run("unfenced", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, status := runEtcd(t, append([]string{"-lock", "etcd-rw-unfenced"}, args...)...)
		if status != exitFail || !strings.Contains(stdout, "writes landed after their read hold had ended") || paused.FindString(stdout) == "" {
			t.Fatalf("readers writing unguarded passed -pause; the checker does not see a late write land: status %d\n%s\n%s", status, stdout, stderr)
		}
	})
}
