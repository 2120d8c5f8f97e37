package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

// lockfreeScale is the number of items (ring) or reads (seqlock) for
// in-process tests: enough that the broken twins fail every time, small
// enough for -race on two cores.
func lockfreeScale() int {
	if testing.Short() {
		return 50_000
	}
	return 300_000
}

func TestTortureRingPasses(t *testing.T) {
	n := lockfreeScale()
	stdout, stderr, status := runCLI(t, "torture", "-lock", "ring", "-items", fmt.Sprint(n))
	wantExitOK(t, stdout, stderr, status)
	clitest.WantLines(t, stdout, []string{
		"Lock: ring",
		fmt.Sprintf("Items: %d", n),
		fmt.Sprintf("Received: %d", n),
		"Out of order: 0",
		"Duplicates: 0",
		"Lost: 0",
		"Result: PASS",
	})
	for _, prefix := range []string{"Throughput: ", "Sleeps: producer "} {
		if !strings.Contains(stdout, "\n"+prefix) {
			t.Errorf("report lacks %q:\n%s", prefix, stdout)
		}
	}
}

func TestTortureSeqLockPasses(t *testing.T) {
	n := lockfreeScale()
	stdout, stderr, status := runCLI(t, "torture", "-lock", "seqlock", "-workers", "4", "-items", fmt.Sprint(n))
	wantExitOK(t, stdout, stderr, status)
	clitest.WantLines(t, stdout, []string{"Lock: seqlock", "Readers: 4", fmt.Sprintf("Reads: %d", n),
		"Torn reads: 0", "Backwards: 0", "Result: PASS"})
}

// TestTortureBrokenTwinsFail: the broken ring and seqlock must fail, so
// that the checks of the real kinds are known to be able to.
func TestTortureBrokenTwinsFail(t *testing.T) {
	n := lockfreeScale()
	for _, c := range []struct {
		kind string
		want []string // substrings of the FAIL line
	}{
		{"ring-broken", []string{"out of order", "duplicated", "lost"}},
		{"seqlock-broken", []string{"torn reads"}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			stdout, _, status := runCLI(t, "torture", "-lock", c.kind, "-workers", "4", "-items", fmt.Sprint(n))
			if status != exitFail {
				t.Fatalf("exit status %d, want 1:\n%s", status, stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(stdout, "Result: FAIL") || !strings.Contains(stdout, w) {
					t.Errorf("report lacks FAIL with %q:\n%s", w, stdout)
				}
			}
		})
	}
}

// stuckQueue delivers nothing: every blocking call waits for its context,
// like a ring whose consumer slept through a lost wake-up.
type stuckQueue struct{ closed atomic.Bool }

func (q *stuckQueue) Push(ctx context.Context, _ uint64) error {
	<-ctx.Done()
	return ctx.Err()
}
func (q *stuckQueue) Pop(ctx context.Context) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}
func (q *stuckQueue) PushSlice(ctx context.Context, _ []uint64) (int, error) {
	return 0, q.Push(ctx, 0)
}
func (q *stuckQueue) PopSlice(ctx context.Context, _ []uint64) (int, error) {
	_, err := q.Pop(ctx)
	return 0, err
}
func (q *stuckQueue) Close() { q.closed.Store(true) }

// TestTortureRingStallFails: a ring that stops moving items is reported as
// stalled instead of hanging the run.
func TestTortureRingStallFails(t *testing.T) {
	saved := stallTimeout
	stallTimeout = 200 * time.Millisecond
	defer func() { stallTimeout = saved }()
	r := tortureRing(&config{items: 1000}, "stuck", new(stuckQueue))
	if r.passed() {
		t.Fatal("a ring that moved nothing passed")
	}
	why := strings.Join(r.failures(), "; ")
	if !strings.Contains(why, "stalled") {
		t.Fatalf("failures %q, want stalled", why)
	}
}

func TestTortureLockfreeDuration(t *testing.T) {
	stdout, stderr, status := runCLI(t, "torture", "-lock", "ring,seqlock", "-workers", "2", "-duration", "150ms")
	if status != exitOK {
		t.Fatalf("exit status %d\n%s\n%s", status, stdout, stderr)
	}
	if strings.Count(stdout, "Duration: 150ms") != 2 || strings.Count(stdout, "Result: PASS") != 2 {
		t.Fatalf("timed report:\n%s", stdout)
	}
}

func TestTortureLockfreeJSON(t *testing.T) {
	n := lockfreeScale()
	stdout, stderr, status := runCLI(t, "torture", "-json", "-lock", "ring,seqlock-broken", "-workers", "2", "-items", fmt.Sprint(n))
	if status != exitFail {
		t.Fatalf("exit status %d, want 1 (seqlock-broken fails)\n%s", status, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %d:\n%s", len(lines), stdout)
	}
	var ring map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ring); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lock", "items", "received", "out_of_order", "duplicates", "lost", "capacity",
		"throughput_mitems_s", "producer_sleeps", "consumer_sleeps", "wake_calls", "duration_s", "result"} {
		if _, ok := ring[f]; !ok {
			t.Errorf("ring JSON lacks %q: %s", f, lines[0])
		}
	}
	if ring["result"] != "PASS" || ring["received"] != float64(n) {
		t.Errorf("ring JSON: %s", lines[0])
	}
	var seq map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &seq); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lock", "readers", "reads", "stores", "torn_reads", "backwards",
		"throughput_mreads_s", "throughput_mstores_s", "duration_s", "result", "failures"} {
		if _, ok := seq[f]; !ok {
			t.Errorf("seqlock JSON lacks %q: %s", f, lines[1])
		}
	}
	if seq["result"] != "FAIL" {
		t.Errorf("seqlock-broken JSON: %s", lines[1])
	}
}

func TestTortureItemsUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-items", "-1"}, "-items must not be negative, got -1"},
		{[]string{"-items", "10", "-duration", "1s"}, "-items and -duration cannot be combined"},
	} {
		_, stderr, status := runCLI(t, append([]string{"torture", "-lock", "ring"}, c.args...)...)
		if status != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: status %d, stderr %q; want 2 and %q", c.args, status, stderr, c.want)
		}
	}
}

func TestTortureLockfreeHelp(t *testing.T) {
	stdout, _, _ := runCLI(t, "torture", "-help")
	for _, want := range []string{"  ring            ", "  ring-broken     ", "  seqlock         ",
		"  seqlock-broken  ", "-items N", "Rings and seqlocks", "b == a+1000"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
