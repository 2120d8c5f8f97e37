//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword"
)

// Cross-process deadlock detection: children that lock in a cycle, found
// by Inspect from the waits-for records and the holders' tokens.

func init() {
	childModes["cycle"] = childCycle
	childModes["wait-then-hold"] = childWaitThenHold
}

// childCycle locks args[1], prints "locked", waits until another process
// holds args[2], then locks it: with its peers it deadlocks. args[3]
// "broken" leaves its waits-for records set; args[4], if there, is the
// stuck threshold in ms of its wait.
func childCycle(args []string) error {
	r, hold, want, err := openTwoMutexes(args)
	if err != nil {
		return err
	}
	if len(args) > 4 {
		ms, err := strconv.Atoi(args[4])
		if err != nil {
			return err
		}
		want.SetStuckThreshold(time.Duration(ms) * time.Millisecond)
	}
	hold.Lock()
	fmt.Println("locked")
	for o := want.word.Load() & ownerMask; o == 0 || o == r.token; o = want.word.Load() & ownerMask {
		time.Sleep(time.Millisecond)
	}
	return want.LockContext(context.Background())
}

// openTwoMutexes opens the region args[0] and its Mutexes args[1] and
// args[2]; args[3] "broken" leaves this process's waits-for records set.
func openTwoMutexes(args []string) (r *Region, m1, m2 *Mutex, err error) {
	if r, err = Open(args[0], nil); err != nil {
		return nil, nil, nil, err
	}
	clearWaitsForBroken = len(args) > 3 && args[3] == "broken"
	if m1, err = r.Mutex(args[1]); err == nil {
		m2, err = r.Mutex(args[2])
	}
	return r, m1, m2, err
}

// childWaitThenHold locks args[1] (which the parent holds, so it sleeps
// and records the wait), unlocks it, locks args[2] and holds it, printing
// "holding". args[3] "broken": the record of the first wait stays.
func childWaitThenHold(args []string) error {
	_, first, second, err := openTwoMutexes(args)
	if err != nil {
		return err
	}
	first.Lock()
	first.Unlock()
	second.Lock()
	fmt.Println("holding")
	time.Sleep(time.Hour)
	return nil
}

// awaitDeadlock polls r's inspection until it reports a deadlock, for as
// long as the test binary's deadline allows (how soon children get there
// on a loaded machine is no property of the detector), and returns it.
func awaitDeadlock(t *testing.T, r *Region) Deadlock {
	t.Helper()
	for {
		info, err := r.Inspect()
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Deadlocks) > 0 {
			return info.Deadlocks[0]
		}
		if d, ok := t.Deadline(); ok && time.Until(d) < testDeadlineMargin {
			t.Fatal("no deadlock reported")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeadlockCycleProcs: two and three processes, each holding one lock
// and waiting for the next one's, are reported as one deadlock naming
// every member's PID, the lock it holds and the lock it waits for. A
// detector that stops at two members misses the three-process cycle.
func TestDeadlockCycleProcs(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			path := tempRegionPath(t)
			r := mustCreate(t, path, 0)
			locks := []string{"a", "b", "c"}[:n]
			var pids []int
			var children []*child
			for i := range n {
				c := startChild(t, "cycle", path, locks[i], locks[(i+1)%n], "", "100")
				c.expect(t, "locked")
				pids = append(pids, c.pid())
				children = append(children, c)
			}
			d := awaitDeadlock(t, r)
			if len(d.Members) != n {
				t.Fatalf("deadlock %v: want %d members", d, n)
			}
			var got []int
			for _, m := range d.Members {
				got = append(got, m.PID)
				i := slices.Index(pids, m.PID)
				if i < 0 || m.Holds != locks[i] || m.WaitsFor != locks[(i+1)%n] {
					t.Errorf("member %+v: children %v hold %v, each waits for the next", m, pids, locks)
				}
			}
			slices.Sort(got)
			slices.Sort(pids)
			if !slices.Equal(got, pids) {
				t.Errorf("deadlock names PIDs %v, the cycle is %v", got, pids)
			}
			// The stuck report of the last child to wait (100 ms in) finds
			// the others waiting already: it names the cycle.
			awaitStuckDeadlock(t, children, d.String())
			if s := d.String(); !strings.Contains(s, fmt.Sprintf("PID %d holds", pids[0])) || !strings.Contains(s, "; PID ") {
				t.Errorf("deadlock text %q", s)
			}
			// The checker fails a broken detector: one that gives up on
			// cycles longer than two misses the three-process one.
			defer func(m int) { deadlockMaxMembers = m }(deadlockMaxMembers)
			deadlockMaxMembers = 2
			if got := r.deadlocks(); (len(got) == 0) != (n == 3) {
				t.Errorf("detector stopping at 2 members: %v for a %d-process cycle", got, n)
			}
		})
	}
}

// TestDeadlockStaleRecord: a process that waited for a, took it, let it
// go and now holds b is not waiting, so a second process that holds a and
// waits for b is in no cycle. With records never cleared (the broken
// variant) the first process's stale record closes a false cycle, which
// the check reports: the check can fail.
func TestDeadlockStaleRecord(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("broken=%v", broken), func(t *testing.T) {
			path := tempRegionPath(t)
			r := mustCreate(t, path, 0)
			a, _ := r.Mutex("a")
			r.Mutex("b")
			a.Lock()
			mode := ""
			if broken {
				mode = "broken"
			}
			p := startChild(t, "wait-then-hold", path, "a", "b", mode)
			awaitRecord(t, r, "a")
			a.Unlock()
			p.expect(t, "holding")
			q := startChild(t, "cycle", path, "a", "b")
			q.expect(t, "locked")
			awaitRecord(t, r, "b")
			got := r.deadlocks()
			switch {
			case !broken && len(got) > 0:
				t.Fatalf("false deadlock reported: %v", got)
			case broken && len(got) == 0:
				t.Fatal("records never cleared: the false cycle went unreported, so this check cannot fail")
			}
		})
	}
}

// awaitStuckDeadlock waits until some child's stuck report names the
// deadlock described as want.
func awaitStuckDeadlock(t *testing.T, children []*child, want string) {
	t.Helper()
	for {
		for _, c := range children {
			if strings.Contains(c.output(), fmt.Sprintf("deadlock=%q", want)) {
				return
			}
		}
		if d, ok := t.Deadline(); ok && time.Until(d) < testDeadlineMargin {
			t.Fatalf("no stuck report names the deadlock %q:\n%s", want, children[0].output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitRecord waits until some live slot's waits-for record names the
// object called name.
func awaitRecord(t *testing.T, r *Region, name string) {
	t.Helper()
	idx1 := r.tableIndex1(r.objects[name].offset)
	for {
		for s := range uint32(regionProcSlots) {
			if word32(r.slotWord(s), procState).Load()&procLive != 0 && uint32(r.waitsForRecord(s)&waitsForObjMask) == idx1 {
				return
			}
		}
		if d, ok := t.Deadline(); ok && time.Until(d) < testDeadlineMargin {
			t.Fatalf("no process recorded a wait for %s", name)
		}
		time.Sleep(time.Millisecond)
	}
}

func init() { childModes["hand-over-hand"] = childHandOverHand }

// childHandOverHand first takes args[3] ("a" or "b") alone and lets it go
// (so that its first wait, the one a broken build's record keeps, is for
// that lock), then locks a then b, unlocks a, holds b for up to args[1]
// ms, unlocks b, and again until killed: every process takes the locks in
// one order, so no deadlock can form. args[2] "broken" leaves its
// waits-for records set. A lock taken from a dead holder is marked
// consistent (the test kills children).
func childHandOverHand(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	clearWaitsForBroken = len(args) > 2 && args[2] == "broken"
	holdMs, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	a, _ := r.Mutex("a")
	b, _ := r.Mutex("b")
	lock := func(m *Mutex) error {
		err := m.LockContext(context.Background())
		if errors.Is(err, lockword.ErrOwnerDead) {
			err = m.MarkConsistent()
		}
		return err
	}
	fmt.Println("started")
	first := a
	if args[3] == "b" {
		first = b
	}
	if err := lock(first); err != nil {
		return err
	}
	first.Unlock()
	for {
		if err := lock(a); err != nil {
			return err
		}
		if err := lock(b); err != nil {
			return err
		}
		a.Unlock()
		time.Sleep(time.Duration(rand.IntN(holdMs+1)) * time.Millisecond)
		b.Unlock()
	}
}

// TestDeadlockNoFalseReport: four processes take two locks hand over hand
// in one order (no deadlock can form), holding the second for up to 150 ms,
// while one is killed and replaced every 200 ms (waiting, holding, or
// between: its record and its locks stay behind) and the region's
// deadlocks are read without pause: none may be reported, for 2 s
// (LOCKWORD_LONG=1: 20 s). With records never cleared (the broken
// variant), a stale record closes a cycle with a real waiter, and the
// same check reports it: it can fail. Holds of 150 ms outlast the
// detector's 50 ms confirmation, so the broken variant's false cycles
// stay still long enough to pass it; the timing assumption is only that.
func TestDeadlockNoFalseReport(t *testing.T) {
	run := 2 * time.Second
	if os.Getenv("LOCKWORD_LONG") != "" {
		run = 20 * time.Second
	}
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("broken=%v", broken), func(t *testing.T) {
			path := tempRegionPath(t)
			r := mustCreate(t, path, 0)
			r.Mutex("a")
			r.Mutex("b")
			mode := ""
			if broken {
				mode = "broken"
			}
			start := func(i int) *child {
				c := startChild(t, "hand-over-hand", path, "150", mode, []string{"a", "b"}[i%2])
				c.expect(t, "started")
				return c
			}
			children := []*child{start(0), start(1), start(2), start(3)}
			end := time.Now().Add(run)
			if broken {
				// The false cycle needs the holder of b to have first
				// waited for a and the waiter holding a to have first
				// waited for b, and a hold of 50 ms or more: seconds.
				end = time.Now().Add(time.Minute)
			}
			kill := time.Now()
			reports := 0
			for time.Now().Before(end) {
				if ds := r.deadlocks(); len(ds) > 0 {
					reports++
					if !broken {
						t.Errorf("false deadlock reported: %v", ds)
					}
					break
				}
				if time.Since(kill) > 200*time.Millisecond {
					i := rand.IntN(len(children))
					children[i].cmd.Process.Kill()
					children[i].exit()
					children[i] = start(i)
					kill = time.Now()
				}
			}
			if broken && reports == 0 {
				t.Error("records never cleared: no false cycle reported, so this check cannot fail")
			}
		})
	}
}

// TestWaitsForLayout: the records lie in the header's reserved bytes,
// after every header field, slot s's at 2048 + 2s (docs/abi.md), and a
// change of one leaves its neighbour's alone; a set advances the sequence
// and a clear keeps it.
func TestWaitsForLayout(t *testing.T) {
	if hdrWaitsFor < hdrPIDNamespace+8 || hdrWaitsFor+waitsForRecordLen*regionProcSlots > regionTableOffset {
		t.Fatalf("records [%d, %d) overlap the header fields or the table", hdrWaitsFor, hdrWaitsFor+waitsForRecordLen*regionProcSlots)
	}
	r := mustCreate(t, tempRegionPath(t), 0)
	for _, s := range []uint32{6, 7, 1023} {
		r.swapWaitsFor(s, 0, 0x1234+uint16(s))
	}
	for _, s := range []uint32{6, 7, 1023} {
		if got := ne.Uint16(r.data[hdrWaitsFor+2*s:]); got != 0x1234+uint16(s) {
			t.Errorf("slot %d's record at %d: %#x", s, hdrWaitsFor+2*s, got)
		}
	}
	slot := r.slot
	rec := r.setWaitsFor(3)
	if rec != 1<<waitsForSeqShift|3 || r.setWaitsFor(4) != 0 {
		t.Fatalf("set: %#x, and a second sleeper's set must record nothing", rec)
	}
	r.clearWaitsFor(rec)
	if got := r.waitsForRecord(slot); got != 1<<waitsForSeqShift {
		t.Fatalf("cleared: %#x, want the sequence kept", got)
	}
	if rec := r.setWaitsFor(5); rec != 2<<waitsForSeqShift|5 {
		t.Fatalf("second set: %#x", rec)
	}
}
