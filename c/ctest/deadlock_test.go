//go:build linux

package ctest

import (
	"slices"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/cbuild"
	"github.com/lockword/lockword/shm"
)

// The C library keeps the waits-for records as Go does (docs/abi.md,
// "Waits-for records"): cycles through C processes, and through C and Go
// processes together, are found by the Go inspector.

// awaitDeadlocks polls shm.Inspect of path until it reports a deadlock or
// patience runs out, and returns what it reported last.
func awaitDeadlocks(t *testing.T, path string, patience time.Duration) []shm.Deadlock {
	t.Helper()
	end := time.Now().Add(patience)
	for {
		info, err := shm.Inspect(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Deadlocks) > 0 || time.Now().After(end) {
			return info.Deadlocks
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantOneCycle fails t unless ds is one deadlock whose members are the
// processes pids.
func wantOneCycle(t *testing.T, ds []shm.Deadlock, pids []int) {
	t.Helper()
	if len(ds) != 1 {
		t.Fatalf("deadlocks %v, want one cycle of %v", ds, pids)
	}
	var got []int
	for _, m := range ds[0].Members {
		got = append(got, m.PID)
	}
	slices.Sort(got)
	slices.Sort(pids)
	if !slices.Equal(got, pids) {
		t.Fatalf("deadlock %v names PIDs %v, want %v", ds[0], got, pids)
	}
}

// TestCDeadlockCycle: two C processes that each hold one Mutex and wait for
// the other's, and a cycle of three through C, C and Go, are each reported
// as one deadlock naming every member's PID.
func TestCDeadlockCycle(t *testing.T) {
	b := cBuild(t, cbuild.Plain)
	for _, tc := range []struct {
		name  string
		langs []string
	}{{"C-C", []string{"c", "c"}}, {"C-C-Go", []string{"c", "c", "go"}}} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := goRegion(t)
			locks := []string{"a", "b", "c"}[:len(tc.langs)]
			var pids []int
			for i, lang := range tc.langs {
				// The Go member starts last: its lock's holder exists already.
				args := []string{"cycle", path, locks[i], locks[(i+1)%len(locks)]}
				var p *proc
				if lang == "go" {
					p = startGo(t, args...)
				} else {
					p = startC(t, b.Worker, args...)
				}
				if l := p.line(time.Minute); l != "locked" {
					t.Fatalf("%s member: %q", lang, l)
				}
				pids = append(pids, p.cmd.Process.Pid)
			}
			// A loaded machine may take long to put them to sleep: the
			// patience is no property of the detector.
			wantOneCycle(t, awaitDeadlocks(t, path, time.Minute), pids)
		})
	}
}

// TestCDeadlockCycleKinds: a cycle through a C process waiting on a
// Mutex and Go processes waiting on a TicketMutex and on an RWMutex (as a
// writer, and as a reader behind a writer) is reported, naming every PID.
func TestCDeadlockCycleKinds(t *testing.T) {
	b := cBuild(t, cbuild.Plain)
	for _, tc := range []struct {
		name string
		// The C member holds Mutex a and waits for Mutex b; the first Go
		// member holds the lock goWant names and waits for a; the
		// second holds b and waits for goWant.
		goHold, goWant string
	}{{"ticket", "ticket:c", "ticket:c"}, {"rw-writer", "rw:c", "rw:c"}, {"rw-reader", "rw:c", "rwread:c"}} {
		t.Run(tc.name, func(t *testing.T) {
			path, r := goRegion(t)
			r.Mutex("a")
			r.Mutex("b")
			// Started in the order that has each member's wanted lock
			// held before it waits (the C member polls for its own).
			c := startC(t, b.Worker, "cycle", path, "a", "b")
			first := startGo(t, "cycle-kinds", path, tc.goHold, "mutex:a")
			var pids []int
			for _, p := range []*proc{c, first} {
				if l := p.line(time.Minute); l != "locked" {
					t.Fatalf("member: %q", l)
				}
				pids = append(pids, p.cmd.Process.Pid)
			}
			second := startGo(t, "cycle-kinds", path, "mutex:b", tc.goWant)
			if l := second.line(time.Minute); l != "locked" {
				t.Fatalf("member: %q", l)
			}
			pids = append(pids, second.cmd.Process.Pid)
			wantOneCycle(t, awaitDeadlocks(t, path, time.Minute), pids)
		})
	}
}

// TestCStaleWaitsForRecord: a C process that waited for a, took it, let it
// go and now holds b waits for nothing, so a Go process holding a and
// waiting for b is in no cycle. A C library that never clears its records
// (cbuild.BrokenWaitsFor) makes that false cycle, and the check reports
// it: the check can fail.
func TestCStaleWaitsForRecord(t *testing.T) {
	for _, v := range []cbuild.Variant{cbuild.Plain, cbuild.BrokenWaitsFor} {
		t.Run(string(v), func(t *testing.T) {
			b := cBuild(t, v)
			path, r := goRegion(t)
			a, _ := r.Mutex("a")
			r.Mutex("b")
			a.Lock()
			p := startC(t, b.Worker, "wait-then-hold", path, "a", "b")
			awaitState(t, path, "a", "contended") // asleep: its record is set
			a.Unlock()
			if l := p.line(time.Minute); l != "holding" {
				t.Fatalf("C: %q", l)
			}
			q := startGo(t, "cycle", path, "a", "b")
			if l := q.line(time.Minute); l != "locked" {
				t.Fatalf("Go: %q", l)
			}
			awaitState(t, path, "b", "contended")
			// Q's record follows its waiters bit within microseconds;
			// a second of inspections gives it time on a loaded machine.
			ds := awaitDeadlocks(t, path, time.Second)
			switch {
			case v == cbuild.Plain && len(ds) > 0:
				t.Fatalf("false deadlock reported: %v", ds)
			case v == cbuild.BrokenWaitsFor && len(ds) == 0:
				t.Fatal("records never cleared: the false cycle went unreported, so this check cannot fail")
			}
		})
	}
}

// awaitState waits until the lock name's inspected state is state.
func awaitState(t *testing.T, path, name, state string) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for time.Now().Before(end) {
		info, err := shm.Inspect(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range info.Objects {
			if o.Name == name && o.State == state {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s never %s", name, state)
}
