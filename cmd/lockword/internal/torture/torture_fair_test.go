package torture

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	"testing"
	"time"
)

// TestTortureFairKindsPass runs the fair kinds through the command line:
// exact totals, PASS, and the fairness block.
func TestTortureFairKindsPass(t *testing.T) {
	workers, iters := testScale()
	for _, name := range []string{"ticket", "rw", "rw-read-mostly", "cond"} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, status := runCLI(t, "torture", "-lock", name,
				"-workers", fmt.Sprint(workers), "-iters", fmt.Sprint(iters), "-value", "3", "-work", "20")
			wantExitOK(t, stdout, stderr, status)
			want := int64(workers) * int64(iters) * 3
			clitest.WantLines(t, stdout, []string{
				"Lock: " + name,
				fmt.Sprintf("Expected: %d", want),
				fmt.Sprintf("Actual:   %d", want),
				"Owner-slot violations: 0",
				"Result: PASS",
			})
			// (The shares line, "Fairness:", appears only when the window
			// held enough to judge: TestFairnessText.)
			for _, prefix := range []string{"Wait latency (1 in 16", "Starvation check ("} {
				if !strings.Contains(stdout, "\n"+prefix) {
					t.Errorf("report lacks a %q line:\n%s", prefix, stdout)
				}
			}
			switch name {
			case "ticket":
				if !strings.Contains(stdout, "(limit 10ms)") {
					t.Errorf("ticket's starvation check has no 10ms limit:\n%s", stdout)
				}
			case "rw", "rw-read-mostly":
				if !strings.Contains(stdout, "reader-writer overlaps seen: 0") {
					t.Errorf("no reader-writer line:\n%s", stdout)
				}
			case "cond":
				if !strings.Contains(stdout, fmt.Sprintf("Items: %d,", workers*iters)) {
					t.Errorf("no items line:\n%s", stdout)
				}
			}
		})
	}
}

// TestTortureFairnessForEveryKind: the core kinds report fairness too (as
// information), and none, which excludes nothing, does not.
func TestTortureFairnessForEveryKind(t *testing.T) {
	stdout, _, _ := runCLI(t, "torture", "-lock", "mutex,spin,sync,none", "-workers", "4", "-iters", "2000")
	for _, block := range strings.Split(stdout, "\n\n") {
		has := strings.Contains(block, "\nWait latency (") && strings.Contains(block, "\nStarvation check (")
		if none := strings.HasPrefix(block, "Lock: none"); has == none {
			t.Errorf("fairness block present %t in:\n%s", has, block)
		}
	}
}

func TestTortureAllIncludesFairKinds(t *testing.T) {
	all, err := parseKinds("all")
	if err != nil {
		t.Fatal(err)
	}
	got := names(all)
	for _, want := range []string{"ticket", "rw", "rw-read-mostly", "cond"} {
		if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+want+" ") {
			t.Errorf("all = %v lacks %s", got, want)
		}
	}
}

// TestTortureFairnessJSON checks the fairness object of -json.
func TestTortureFairnessJSON(t *testing.T) {
	stdout, stderr, status := runCLI(t, "torture", "-lock", "ticket,mutex", "-workers", "4", "-iters", "4000", "-json")
	if status != exitOK {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r struct {
			Lock     string
			Fairness *struct {
				Shares       string   `json:"shares"`
				MinShare     int64    `json:"min_share"`
				MaxShare     int64    `json:"max_share"`
				MaxMin       *float64 `json:"max_min"`
				SampledEvery int      `json:"wait_sampled_every"`
				Samples      int      `json:"wait_samples"`
				P50, P99     int64
				WaitMaxNs    int64 `json:"wait_max_ns"`
				Starvation   *struct {
					MaxWaitNs int64  `json:"max_wait_ns"`
					LimitNs   *int64 `json:"limit_ns"`
					Passed    bool   `json:"passed"`
				} `json:"starvation"`
			} `json:"fairness"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		f := r.Fairness
		if f == nil || f.Starvation == nil || f.SampledEvery != sampleEvery || f.Samples == 0 || f.WaitMaxNs <= 0 || f.MaxShare <= 0 {
			t.Fatalf("%s: fairness block missing or empty: %s", r.Lock, line)
		}
		if f.MaxMin != nil && math.Abs(*f.MaxMin-float64(f.MaxShare)/float64(f.MinShare)) > 1e-9 {
			t.Errorf("%s: max_min %v is not max_share/min_share", r.Lock, *f.MaxMin)
		}
		switch r.Lock {
		case "ticket":
			if f.Starvation.LimitNs == nil || *f.Starvation.LimitNs != int64(10*time.Millisecond) || !f.Starvation.Passed {
				t.Errorf("ticket starvation: %s", line)
			}
		case "mutex":
			if f.Starvation.LimitNs != nil || !f.Starvation.Passed {
				t.Errorf("mutex starvation must be information only: %s", line)
			}
		}
	}
}

// TestTortureCondTimedOddWorkers: a -duration run with an odd number of
// workers ends (producers stop, consumers drain) and passes.
func TestTortureCondTimedOddWorkers(t *testing.T) {
	stdout, stderr, status := runCLI(t, "torture", "-lock", "cond", "-workers", "3", "-duration", "200ms")
	if status != exitOK || !clitest.HasLine(stdout, "Result: PASS") {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
}

// starvingLock holds every third Lock call back for 15 ms while other
// goroutines take and release the lock past it: a lock that lets a waiter
// starve, for the starvation check to catch. (Every third, so that even a
// loaded host's few dozen attempts of the waiter are all but sure to
// include one in each of the check's three runs.)
type starvingLock struct {
	mu sync.Mutex
	n  atomic.Int64
}

func (l *starvingLock) Lock() {
	if l.n.Add(1)%3 == 0 {
		time.Sleep(15 * time.Millisecond)
	}
	l.mu.Lock()
}

func (l *starvingLock) Unlock() { l.mu.Unlock() }

// stallingLock, a FIFO lock, holds everyone up for 60 ms once, at its
// tenth acquisition, as a host that does not run the process does. The
// check subtracts the time both threads spent runnable without a CPU, up
// to about 15 ms at load 20 (a 15 ms stall then passed the first attempt:
// "passed true, earlier attempts [], last longest wait 24.306392ms"); a
// sleep is not runnable time, so 60 ms stays over the 10 ms limit.
type stallingLock struct {
	mu lockword.TicketMutex
	n  int
}

func (l *stallingLock) Lock() {
	l.mu.Lock()
	if l.n++; l.n == 10 {
		time.Sleep(60 * time.Millisecond)
	}
}

func (l *stallingLock) Unlock() { l.mu.Unlock() }

// TestStarvationCheckCatchesStarvingLock shows that the starvation check,
// and with it ticket's 10 ms limit, can fail.
func TestStarvationCheckCatchesStarvingLock(t *testing.T) {
	s := lockerStarvation(new(starvingLock), ticketStarvationLimit)
	if s.passed() || len(s.earlier) != starvationAttempts-1 {
		t.Fatalf("a lock that makes waiters wait 15 ms passed the 10 ms starvation check (longest wait %v)", s.maxWait)
	}
	f := &fairness{shares: []int64{1, 1}, starve: s}
	if len(f.allFailures()) == 0 {
		t.Fatal("a failed starvation check does not fail the run")
	}
}

// TestStarvationCheckStallIsNotStarvation: one stall that reaches the
// limit is run again and reported, not failed; a starving lock fails
// every attempt (TestStarvationCheckCatchesStarvingLock).
func TestStarvationCheckStallIsNotStarvation(t *testing.T) {
	s := lockerStarvation(new(stallingLock), ticketStarvationLimit)
	// The host may add stalls of its own (a second retried attempt), but
	// the lock stalls only once, so the last attempt passes.
	if !s.passed() || len(s.earlier) == 0 || s.earlier[0] < ticketStarvationLimit {
		t.Fatalf("one stall: passed %v, earlier attempts %v, last longest wait %v; want passed after a retried attempt", s.passed(), s.earlier, s.maxWait)
	}
	var b strings.Builder
	(&fairness{shares: []int64{1, 1}, starve: s}).writeText(&b)
	if !strings.Contains(b.String(), "attempt 1 of the check had reached the limit") {
		t.Fatalf("the retried attempt is not reported:\n%s", b.String())
	}
}

// TestFairnessFlag: the locktorture flag is raised exactly when the
// busiest worker made more than twice the least busy one's acquisitions,
// and only when the window held enough acquisitions to judge.
func TestFairnessFlag(t *testing.T) {
	for _, c := range []struct {
		shares []int64
		flag   bool
		ratio  float64
	}{
		{[]int64{100, 100, 100}, false, 1},
		{[]int64{100, 200}, false, 2},
		{[]int64{100, 201}, true, 2.01},
		{[]int64{0, 500}, true, math.Inf(1)},
		{[]int64{0, 5}, false, math.Inf(1)}, // too few to judge
		{[]int64{1, 99}, false, 99},         // 50 each on average: too few
		{[]int64{0, 1}, false, math.Inf(1)}, // the default run
	} {
		f := &fairness{shares: c.shares}
		if f.flagged() != c.flag || f.ratio() != c.ratio {
			t.Errorf("shares %v: flagged %t ratio %v, want %t %v", c.shares, f.flagged(), f.ratio(), c.flag, c.ratio)
		}
	}
}

// TestFairnessText: the shares line appears only when the window held
// enough acquisitions per worker to mean something, and never uses an
// alarming word (FLAGGED, inf, starved): an uneven share is information.
func TestFairnessText(t *testing.T) {
	for _, c := range []struct {
		shares []int64
		want   string // the shares line's tail; "" for no line
	}{
		{[]int64{0, 1}, ""},
		{[]int64{1, 99}, ""},
		{[]int64{0, 150, 150}, "min 0, max 150, a worker made none (uneven: the busiest worker made more than twice the least busy one's share; only ticket promises order)"},
		{[]int64{100, 100}, "min 100, max 100, max/min 1.00 (even)"},
		{[]int64{100, 300}, "min 100, max 300, max/min 3.00 (uneven: the busiest worker made more than twice the least busy one's share; only ticket promises order)"},
	} {
		f := &fairness{shares: c.shares, sharesWhat: "acquisitions per worker", sharesAt: "from the moment all contended to the end",
			starve: &starvation{what: "a re-locking goroutine"}}
		var b strings.Builder
		f.writeText(&b)
		out := b.String()
		line := ""
		for l := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(l, "Fairness: ") {
				line = l
			}
		}
		if c.want == "" && line != "" || c.want != "" && !strings.HasSuffix(line, "to the end: "+c.want) {
			t.Errorf("shares %v: shares line %q, want one ending %q", c.shares, line, c.want)
		}
		for _, scary := range []string{"FLAGGED", "inf", "starved"} {
			if strings.Contains(out, scary) {
				t.Errorf("shares %v: %q in %q", c.shares, scary, out)
			}
		}
	}
}

// TestTortureDefaultPassIsCalm: the default experiment's shape (16
// workers) on the locks that are unfair by design passes without an
// alarming word in its report.
func TestTortureDefaultPassIsCalm(t *testing.T) {
	workers, iters := testScale()
	stdout, _, status := runCLI(t, "torture", "-lock", "mutex,spin,sync", "-workers", fmt.Sprint(2*workers), "-iters", fmt.Sprint(iters))
	if status != exitOK {
		t.Fatalf("status %d:\n%s", status, stdout)
	}
	for _, scary := range []string{"FLAGGED", "inf", "starved"} {
		if strings.Contains(stdout, scary) {
			t.Errorf("a PASS says %q:\n%s", scary, stdout)
		}
	}
}
