package lockword

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// Deadlock detection's tests run in every build: without the
// lockword_deadlock tag the fast paths skip tracking, so the tests drive
// each lock through the tracked paths that the hooks call (lockTracked,
// trackRelease); with the tag (go test -tags lockword_deadlock) they call
// the plain methods, hooks included.

// A trackedLock is one lock as the tests drive it.
type trackedLock struct {
	name   string
	lock   func(context.Context) error
	unlock func()
}

// tracked returns the lock named name, driven through its hooks with the
// tag and through the tracked paths without it.
func tracked(name string, lock any, plain, viaHook func(context.Context) error, unlock func()) trackedLock {
	if deadlockBuilt {
		return trackedLock{name, plain, unlock}
	}
	return trackedLock{name, viaHook, func() { trackRelease(lock); unlock() }}
}

// named names l and gives it a short stuck threshold (the cycle tests
// wait for it to pass).
func named[L interface {
	SetName(string)
	SetStuckThreshold(time.Duration)
}](l L, name string) L {
	l.SetName(name)
	l.SetStuckThreshold(20 * time.Millisecond)
	return l
}

// trackedKinds makes a named lock of each tracked kind.
var trackedKinds = []struct {
	kind string
	make func(name string) trackedLock
}{
	{"Mutex", func(name string) trackedLock {
		m := named(new(Mutex), name)
		return tracked(name, m, m.LockContext, m.lockTracked, m.Unlock)
	}},
	{"SpinMutex", func(name string) trackedLock {
		s := named(new(SpinMutex), name)
		return tracked(name, s, s.LockContext, s.lockTracked, s.Unlock)
	}},
	{"TicketMutex", func(name string) trackedLock {
		t := named(new(TicketMutex), name)
		return tracked(name, t, t.LockContext, t.lockTracked, t.Unlock)
	}},
	{"RWMutex", func(name string) trackedLock {
		rw := named(new(RWMutex), name)
		return tracked(name, rw, rw.LockContext, rw.lockTracked, rw.Unlock)
	}},
}

// readLocked is an RWMutex read-locked (inversions only: readers do not
// exclude each other).
func readLocked(name string) trackedLock {
	rw := named(new(RWMutex), name)
	return tracked(name, rw, rw.RLockContext, rw.rlockTracked, rw.RUnlock)
}

// detect turns detection on for the test and returns the channel of its
// reports. At the end it restores the setting and the recorders.
func detect(t *testing.T) <-chan DeadlockReport {
	reports := make(chan DeadlockReport, 100)
	was := lockTracking.Load() != 0
	oldEdge, oldCycle := recordEdge, findCycle
	setTracking(false) // forget other tests' records
	setTracking(true)
	SetDeadlockHandler(func(r DeadlockReport) { reports <- r })
	t.Cleanup(func() {
		SetDeadlockHandler(nil)
		setTracking(false)
		setTracking(was)
		breakDetector(oldEdge, oldCycle)
	})
	locktest.CaptureSlog(t) // keep the reports out of the test's output
	return reports
}

// breakDetector replaces the recorders (with broken ones, or back), under
// tracker.mu as they are read: the stuck watcher may be walking.
func breakDetector(edge func(orderEdge) (DeadlockReport, bool), cycle func(any) []DeadlockMember) {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	recordEdge, findCycle = edge, cycle
}

// lockBoth takes first, then second, and releases both, on a goroutine
// of its own (so that two calls are two goroutines).
//
//go:noinline
func lockBoth(first, second trackedLock) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		first.lock(context.Background())
		second.lock(context.Background())
		second.unlock()
		first.unlock()
	}()
	<-done
}

// checkInversion checks that reports hold one inversion of a and b, with
// both orders and their stacks.
func checkInversion(reports <-chan DeadlockReport, a, b string) error {
	var found []DeadlockReport
	for len(reports) > 0 {
		if r := <-reports; !r.Cycle {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		return fmt.Errorf("%d inversion reports, want 1: %+v", len(found), found)
	}
	m := found[0].Members
	if len(m) != 2 || m[0].Held.Name != a || m[0].Wanted.Name != b || m[1].Held.Name != b || m[1].Wanted.Name != a {
		return fmt.Errorf("members %+v, want %s then %s, and %s then %s", m, a, b, b, a)
	}
	for _, x := range m {
		if !strings.Contains(x.HeldStack, "lockBoth") || !strings.Contains(x.WantedStack, "lockBoth") || x.Goroutine == 0 {
			return fmt.Errorf("member %+v: want both stacks in lockBoth and a goroutine id", x)
		}
	}
	if m[0].Goroutine == m[1].Goroutine {
		return fmt.Errorf("both orders on goroutine %d, want two goroutines", m[0].Goroutine)
	}
	return nil
}

// TestDeadlockInversion: a then b on one goroutine, b then a on another
// (one after the other: nothing deadlocks) is reported once, with both
// stacks, for each kind, and for read locks.
func TestDeadlockInversion(t *testing.T) {
	makers := map[string]func(string) trackedLock{"RWMutex read": readLocked}
	for _, k := range trackedKinds {
		makers[k.kind] = k.make
	}
	for kind, make := range makers {
		t.Run(kind, func(t *testing.T) {
			reports := detect(t)
			a, b := make("a"), make("b")
			lockBoth(a, b)
			lockBoth(a, b) // the same order again: no report
			lockBoth(b, a)
			lockBoth(b, a) // the inversion again: reported once
			if err := checkInversion(reports, "a", "b"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDeadlockInversionCheckerFails: a detector that ignores the second
// edge (never looks for the reverse of an edge) reports nothing, and
// checkInversion says so.
func TestDeadlockInversionCheckerFails(t *testing.T) {
	reports := detect(t)
	breakDetector(func(orderEdge) (DeadlockReport, bool) { return DeadlockReport{}, false }, findCycle)
	a, b := trackedKinds[0].make("a"), trackedKinds[0].make("b")
	lockBoth(a, b)
	lockBoth(b, a)
	if checkInversion(reports, "a", "b") == nil {
		t.Fatal("checkInversion passed a detector that ignores the second edge")
	}
}

// cycleMember holds own, and once every member holds its lock, waits for
// want until ctx ends.
//
//go:noinline
func cycleMember(ctx context.Context, own, want trackedLock, holding *sync.WaitGroup) {
	own.lock(context.Background())
	holding.Done()
	holding.Wait()
	if want.lock(ctx) == nil {
		want.unlock()
	}
	own.unlock()
}

// formCycle starts one goroutine per lock, the i'th holding locks[i] and
// waiting for the next: a deadlock, which the returned stop ends by
// cancelling the waits.
func formCycle(locks []trackedLock) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var holding, done sync.WaitGroup
	holding.Add(len(locks))
	for i := range locks {
		done.Go(func() { cycleMember(ctx, locks[i], locks[(i+1)%len(locks)], &holding) })
	}
	return func() { cancel(); done.Wait() }
}

// firstCycle returns the first cycle report received within wait.
func firstCycle(reports <-chan DeadlockReport, wait time.Duration) (DeadlockReport, error) {
	timeout := time.After(wait)
	for {
		select {
		case r := <-reports:
			if r.Cycle {
				return r, nil
			}
		case <-timeout:
			return DeadlockReport{}, fmt.Errorf("no cycle reported within %v", wait)
		}
	}
}

// checkCycle checks a cycle report over the locks named: one member per
// lock, each holding the lock the member before waits for, with stacks.
func checkCycle(r DeadlockReport, names []string) error {
	m := r.Members
	if len(m) != len(names) {
		return fmt.Errorf("%d members, want %d: %+v", len(m), len(names), m)
	}
	held := map[string]bool{}
	for i, x := range m {
		held[x.Held.Name] = true
		if next := m[(i+1)%len(m)]; x.Wanted != next.Held {
			return fmt.Errorf("member %d wants %v, but the next holds %v", i, x.Wanted, next.Held)
		}
		if !strings.Contains(x.HeldStack, "cycleMember") || !strings.Contains(x.WantedStack, "cycleMember") {
			return fmt.Errorf("member %d: stacks %q and %q, want both in cycleMember", i, x.HeldStack, x.WantedStack)
		}
	}
	for _, n := range names {
		if !held[n] {
			return fmt.Errorf("lock %s in no member: %+v", n, m)
		}
	}
	return nil
}

// TestDeadlockCycle: two and three goroutines that each hold a lock and
// wait for the next one's deadlock; the stuck watcher, once the 20 ms
// threshold has passed, finds the cycle and reports every member. It
// waits up to 10 s for the report: a loaded host may delay the waiters
// and the watcher, and the report is what is tested, not its latency.
func TestDeadlockCycle(t *testing.T) {
	for _, k := range trackedKinds {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/%d", k.kind, n), func(t *testing.T) {
				var locks []trackedLock
				var names []string
				for i := range n {
					names = append(names, fmt.Sprintf("%s-%d", k.kind, i))
					locks = append(locks, k.make(names[i]))
				}
				testCycle(t, locks, names)
			})
		}
	}
	t.Run("mixed", func(t *testing.T) {
		names := []string{"mutex", "ticket", "rw"}
		locks := []trackedLock{trackedKinds[0].make("mutex"), trackedKinds[2].make("ticket"), trackedKinds[3].make("rw")}
		testCycle(t, locks, names)
	})
}

func testCycle(t *testing.T, locks []trackedLock, names []string) {
	reports := detect(t)
	stop := formCycle(locks)
	defer stop()
	r, err := firstCycle(reports, 10*time.Second)
	if err == nil {
		err = checkCycle(r, names)
	}
	if err != nil {
		t.Error(err)
	}
}

// TestDeadlockCycleCheckerFails: a walk that stops after the first hop
// (it finds only a goroutine waiting for a lock it holds itself) misses a
// two-lock cycle, and the test's check says so. The walk is run by hand
// once the cycle has formed, so the check does not wait.
func TestDeadlockCycleCheckerFails(t *testing.T) {
	reports := detect(t)
	breakDetector(recordEdge, func(lock any) []DeadlockMember {
		for _, h := range tracker.holders[lock] {
			if g := tracker.goroutines[h.gid]; g != nil && g.waiting != nil && g.waiting.lock == lock {
				return cycleMembers([]walkStep{{h.gid, h}})
			}
		}
		return nil
	})
	a, b := trackedKinds[0].make("a"), trackedKinds[0].make("b")
	stop := formCycle([]trackedLock{a, b})
	defer stop()
	for deadline := time.Now().Add(10 * time.Second); waitingGoroutines() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for lock := range trackedHolders() {
		checkDeadlock(lock)
	}
	r, err := firstCycle(reports, 0)
	if err == nil && checkCycle(r, []string{"a", "b"}) == nil {
		t.Fatal("the checks passed a walk that stops after one hop")
	}
}

// waitingGoroutines counts the goroutines recorded waiting.
func waitingGoroutines() (n int) {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	for _, g := range tracker.goroutines {
		if g.waiting != nil {
			n++
		}
	}
	return n
}

// trackedHolders returns the locks that have recorded holders.
func trackedHolders() map[any]bool {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	locks := map[any]bool{}
	for l := range tracker.holders {
		locks[l] = true
	}
	return locks
}

// holdAndWait holds m until release is closed.
//
//go:noinline
func holdAndWait(m trackedLock, held, release chan struct{}) {
	m.lock(context.Background())
	close(held)
	<-release
	m.unlock()
}

// TestStuckReportNamesHolder: with detection on, a stuck report names the
// holder goroutine and the stack where it acquired the lock, in place of
// the SIGQUIT hint.
func TestStuckReportNamesHolder(t *testing.T) {
	detect(t)
	logs := locktest.CaptureSlog(t)
	for _, k := range trackedKinds {
		m := k.make("held-" + k.kind)
		held, release := make(chan struct{}), make(chan struct{})
		go holdAndWait(m, held, release)
		<-held
		ctx, cancel := context.WithCancel(context.Background())
		go func() { locktest.AwaitLogs(logs, "lock=held-"+k.kind, 1); cancel() }()
		if m.lock(ctx) == nil {
			t.Errorf("%s: the waiter took a held lock", k.kind)
		}
		close(release)
		out := logs.String()
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "lock=held-"+k.kind) {
				line = l
			}
		}
		if !strings.Contains(line, "holder_goroutines=") || !strings.Contains(line, "holdAndWait") || strings.Contains(line, "SIGQUIT") {
			t.Errorf("%s: stuck report %q: want the holder goroutine and its stack in holdAndWait, no SIGQUIT hint", k.kind, line)
		}
	}
}

// BenchmarkDeadlockDetection is deadlock detection's cost on a Mutex,
// uncontended and at 16 goroutines: detection=false in a build without
// the tag is the baseline (the hooks compiled out); in a build with
// -tags lockword_deadlock, detection=false is the switch's cost and
// detection=true holder tracking's. Run the two builds interleaved and
// compare them with benchstat.
func BenchmarkDeadlockDetection(b *testing.B) {
	modes := []bool{false}
	if deadlockBuilt {
		modes = append(modes, true)
	}
	for _, on := range modes {
		for _, g := range []int{1, 16} {
			b.Run(fmt.Sprintf("detection=%v/goroutines=%d", on, g), func(b *testing.B) {
				if deadlockBuilt {
					SetDeadlockDetection(on)
					defer SetDeadlockDetection(true) // the tagged build's default
				}
				if g == 1 {
					locktest.Uncontended(b, new(Mutex))
				} else {
					locktest.Contended(b, new(Mutex), g)
				}
			})
		}
	}
}
