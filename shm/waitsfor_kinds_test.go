//go:build linux

package shm

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Cross-process deadlock cycles through every shared lock kind: a
// TicketMutex's and an RWMutex's waiters (queued writers, and readers
// behind a writer) record what they wait for, as a Mutex's do.

func init() { childModes["cycle-kinds"] = childCycleKinds }

// A kindLock is one side of a shared lock as a cycle's member takes it:
// spec "mutex:a", "ticket:a", "rw:a" (write) or "rwread:a" (read).
type kindLock struct {
	lock func(context.Context) error
}

func openKindLock(r *Region, spec string) (kindLock, error) {
	kind, name, _ := strings.Cut(spec, ":")
	switch kind {
	case "mutex":
		m, err := r.Mutex(name)
		if err != nil {
			return kindLock{}, err
		}
		return kindLock{m.LockContext}, nil
	case "ticket":
		m, err := r.TicketMutex(name)
		if err != nil {
			return kindLock{}, err
		}
		return kindLock{m.LockContext}, nil
	case "rw", "rwread":
		m, err := r.RWMutex(name)
		if err != nil {
			return kindLock{}, err
		}
		if kind == "rwread" {
			return kindLock{m.RLockContext}, nil
		}
		return kindLock{m.LockContext}, nil
	}
	return kindLock{}, fmt.Errorf("lock spec %q", spec)
}

// childCycleKinds opens the region args[0], takes args[1] (a kindLock
// spec), prints "locked", waits for the file args[3] to exist (every
// member holds its lock by then), then takes args[2]: with its peers it
// deadlocks.
func childCycleKinds(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	hold, err := openKindLock(r, args[1])
	if err != nil {
		return err
	}
	want, err := openKindLock(r, args[2])
	if err != nil {
		return err
	}
	if err := hold.lock(context.Background()); err != nil {
		return err
	}
	fmt.Println("locked")
	for {
		if _, err := os.Stat(args[3]); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return want.lock(context.Background())
}

// TestDeadlockCycleProcsKinds: two- and three-process cycles through
// TicketMutex, RWMutex (queued writer, and reader behind a writer) and
// Mutex are reported by Inspect, naming every member's PID and locks, and
// by the members' stuck reports.
func TestDeadlockCycleProcsKinds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		hold, wants []string // member i holds hold[i] and wants wants[i]
	}{
		{"ticket-rw", []string{"ticket:a", "rw:b"}, []string{"rw:b", "ticket:a"}},
		{"mutex-ticket-rwread", []string{"mutex:a", "ticket:b", "rw:c"}, []string{"ticket:b", "rwread:c", "mutex:a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tempRegionPath(t)
			r := mustCreate(t, path, 0)
			for _, spec := range tc.hold { // create each object with its kind
				if _, err := openKindLock(r, spec); err != nil {
					t.Fatal(err)
				}
			}
			start := path + ".go"
			var pids []int
			var names []string
			var children []*child
			for i := range tc.hold {
				c := startChild(t, "cycle-kinds", path, tc.hold[i], tc.wants[i], start)
				c.expect(t, "locked")
				pids = append(pids, c.pid())
				children = append(children, c)
				_, name, _ := strings.Cut(tc.hold[i], ":")
				names = append(names, name)
			}
			if err := os.WriteFile(start, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			d := awaitDeadlock(t, r)
			if len(d.Members) != len(pids) {
				t.Fatalf("deadlock %v: want %d members", d, len(pids))
			}
			for _, m := range d.Members {
				i := slices.Index(pids, m.PID)
				if i < 0 || m.Holds != names[i] || m.WaitsFor != names[(i+1)%len(names)] {
					t.Errorf("member %+v: children %v hold %v, each waits for the next", m, pids, names)
				}
			}
			// Some member's stuck report (2 s in, the default) names
			// the cycle too.
			awaitStuckDeadlock(t, children, d.String())
		})
	}
}
