//go:build linux

package shm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/locktest"
)

// TestFastPathsInline asserts that the fast paths stay inlinable
// (locktest.CheckInlinable).
func TestFastPathsInline(t *testing.T) {
	locktest.CheckInlinable(t, []string{
		"(*Mutex).Lock", "(*Mutex).Unlock", "(*Mutex).TryLock", "(*Mutex).LockContext"})
}

// Cross-process tests re-execute the test binary as children
// (TestSharedChild), as Go's TestMutexMisuse does. The race detector does
// not see the mapping: these tests rest on their invariant checks.

// TestSharedMutexThousandGoroutinesTwoProcesses: 1,000 goroutines in each of
// 2 processes block on one held lock; each process stays under
// GOMAXPROCS+64 OS threads (one goroutine per process sleeps in the kernel,
// the rest park), and all complete after Unlock.
func TestSharedMutexThousandGoroutinesTwoProcesses(t *testing.T) {
	defer watchdog("1,000 goroutines × 2 processes", 2*time.Minute)()
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	m.Lock()
	thousandBlocked(t, m.Unlock, "1,000 goroutines", "threads", path, "1000")
}

// TestSharedMutexOwnerDeath: a holder is SIGKILLed while a waiter is
// already waiting; the waiter gets the lock with ErrOwnerDead within
// 100 ms of the kill, repairs, marks it consistent, and the lock works on.
func TestSharedMutexOwnerDeath(t *testing.T) { testOwnerDeath(t, "mutex") }

// TestSharedMutexOwnerDeathTryPaths: a dead holder found by a caller that
// arrives after the death (no waiter was sleeping), through LockContext
// with a done context (the TryLock that reports), and TryLock.
func TestSharedMutexOwnerDeathTryPaths(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	c := startHolder(t, path, "m")
	c.cmd.Process.Kill()
	c.exit()
	repairs := 0
	m.SetRepair(func() error { repairs++; return nil })
	if m.TryLock() || repairs != 0 {
		t.Fatalf("TryLock took a lock whose holder died (repair ran %d times): it must report false and leave it to Lock or LockContext", repairs)
	}
	m.SetRepair(nil)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.LockContext(done); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("LockContext(done) on a dead holder's lock = %v, want lockword.ErrOwnerDead", err)
	}
	// We hold it, inconsistent. If we "die" (a forged takeover by another
	// handle after detaching ours is the same), the next acquirer is told
	// again: here, unlock without marking makes it not recoverable.
	m.Unlock()
	wantNotRecoverable(t, m, path, 2)
}

// TestSharedMutexNotRecoverableWakesWaiters: waiters asleep when the
// recovering holder unlocks without repairing all learn ErrNotRecoverable.
func TestSharedMutexNotRecoverableWakesWaiters(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	dead := forgeSlot(r, (r.slot+1)%regionProcSlots, procIdentity{pid: 4194303, start: 1, boot: mustSelf(t).boot}, 1)
	m.word.Store(dead)
	if err := m.LockContext(context.Background()); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatal(err)
	}
	other := openHandles(t, path, 1)[0]
	om, _ := other.Mutex("m")
	got := make(chan error, 3)
	for range 3 {
		go func() { got <- om.LockContext(context.Background()) }()
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	m.Unlock() // without MarkConsistent
	for range 3 {
		if err := <-got; !errors.Is(err, lockword.ErrNotRecoverable) {
			t.Fatalf("waiter got %v, want lockword.ErrNotRecoverable", err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("waiters learned after %v", d)
	}
}

// TestSharedMutexLockerOwnerDead: the sync.Locker path. With a repair
// function, Lock repairs and marks consistent; without, it panics with an
// error wrapping ErrOwnerDead (in a child, so the panic is seen whole).
func TestSharedMutexLockerOwnerDead(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	deadOwner := func() {
		m.word.Store(forgeSlot(r, (r.slot+1)%regionProcSlots, procIdentity{pid: 4194303, start: 1, boot: mustSelf(t).boot}, 3))
	}
	deadOwner()
	repaired := 0
	m.SetRepair(func() error { repaired++; return nil })
	m.Lock()
	if repaired != 1 || m.word.Load()&sharedInconsistent != 0 {
		t.Fatalf("repair ran %d times, word %#x", repaired, m.word.Load())
	}
	m.Unlock()
	m.Lock() // healthy: no repair
	m.Unlock()
	if repaired != 1 {
		t.Fatalf("repair ran on a healthy lock")
	}
	// A repair that fails, or panics: Lock gives the lock up unrepaired,
	// so it is not recoverable, and panics saying so.
	for i, repair := range []func() error{
		func() error { return errors.New("disk on fire") },
		func() error { panic(errors.New("disk on fire")) },
	} {
		f, _ := r.Mutex(fmt.Sprint("failing-repair-", i))
		f.word.Store(forgeSlot(r, (r.slot+1)%regionProcSlots, procIdentity{pid: 4194303, start: 1, boot: mustSelf(t).boot}, 3))
		f.SetRepair(repair)
		func() {
			defer func() {
				p := recover()
				err, _ := p.(error)
				if i == 1 { // the repair's own panic goes on unchanged
					if err == nil || err.Error() != "disk on fire" {
						t.Fatalf("panic %v, want the repair's", p)
					}
					return
				}
				if !errors.Is(err, lockword.ErrOwnerDead) || !errors.Is(err, lockword.ErrNotRecoverable) || !strings.Contains(err.Error(), "disk on fire") ||
					strings.Count(err.Error(), "lockword: ") != 1 {
					t.Fatalf("panic %v: want lockword.ErrOwnerDead, lockword.ErrNotRecoverable and the repair's error, in one message", p)
				}
			}()
			f.Lock()
		}()
		if w := f.word.Load(); w&ownerMask != ownerNotRecoverable {
			t.Fatalf("after a failed repair word %#x: want not recoverable, held by nobody", w)
		}
		if err := f.LockContext(context.Background()); !errors.Is(err, lockword.ErrNotRecoverable) {
			t.Fatalf("after a failed repair LockContext = %v, want lockword.ErrNotRecoverable", err)
		}
	}

	// No repair function: Lock panics (observed from a child).
	m.SetRepair(nil)
	deadOwner()
	c := startChild(t, "lock-owner-dead", path)
	err := c.exit()
	if err == nil || !strings.Contains(c.output(), "previous holder of the shared lock died") || !strings.Contains(c.output(), "SetRepair") {
		t.Fatalf("Lock without repair did not panic with lockword.ErrOwnerDead: %v\n%s", err, c.output())
	}
}

// TestSharedMutexLockerOwnerDeadRecovered: a process whose Lock panics on
// an owner death, without a repair function, recovers the panic (as
// net/http does for a handler) and lives on. It must not hold the lock:
// Lock gave it up, not recoverable, so other processes learn that at once
// instead of waiting forever on a live holder.
func TestSharedMutexLockerOwnerDeadRecovered(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	m.word.Store(forgeSlot(r, (r.slot+1)%regionProcSlots, procIdentity{pid: 4194303, start: 1, boot: mustSelf(t).boot}, 3))
	c := startChild(t, "lock-owner-dead-recover", path)
	if msg := c.expect(t, "recovered "); !strings.Contains(msg, "not recoverable") {
		t.Errorf("panic value %q does not say the lock is now not recoverable", msg)
	}
	c.expect(t, "alive")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.LockContext(ctx); !errors.Is(err, lockword.ErrNotRecoverable) {
		t.Fatalf("LockContext after the child recovered from Lock's panic = %v, want lockword.ErrNotRecoverable", err)
	}
}

func TestSharedMutexMisuse(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	m.Lock()
	for _, c := range []struct{ mode, msg string }{
		{"unlock-other", "lockword: Unlock of shm.Mutex \"m\" held by another process (PID " + strconv.Itoa(os.Getpid()) + ")"},
		{"unlock-unlocked", "lockword: Unlock of unlocked shm.Mutex \"fresh\""},
	} {
		ch := startChild(t, c.mode, path)
		err := ch.exit()
		if err == nil || !strings.Contains(ch.output(), c.msg) {
			t.Fatalf("%s: %v, output lacks %q:\n%s", c.mode, err, c.msg, ch.output())
		}
	}
	// A second handle in this process: not "another process" with our
	// own PID.
	other, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	om, _ := other.Mutex("m")
	func() {
		defer func() {
			p := fmt.Sprint(recover())
			if !strings.Contains(p, "lockword: Unlock of shm.Mutex \"m\" held through another Region handle in this process") {
				t.Fatalf("Unlock through a second handle panicked with %q", p)
			}
		}()
		om.Unlock()
	}()
	m.Unlock()
	if err := m.MarkConsistent(); err == nil {
		t.Fatal("MarkConsistent of a lock we do not hold succeeded")
	}
}

// TestSharedMutexPIDReuse forges an owner record whose PID belongs to a
// live process of another incarnation (our parent, with a wrong start time;
// ourselves, with a wrong start time or an earlier boot): the holder is dead
// and must be recovered. The same PID with the right start time is alive
// and must never be robbed. Then the same forgeries against a PID-only
// liveness check show that the test catches that design.
func TestSharedMutexPIDReuse(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	me := mustSelf(t)
	parent := os.Getppid()
	_, parentStart, err := readProcStat(parent)
	if err != nil {
		t.Fatal(err)
	}
	otherBoot := me.boot
	otherBoot[0] ^= 0xff
	slot := (r.slot + 1) % regionProcSlots
	cases := []struct {
		name string
		id   procIdentity
		dead bool
	}{
		{"live parent, its incarnation", procIdentity{pid: uint32(parent), start: parentStart, boot: me.boot}, false},
		{"parent's PID, earlier incarnation", procIdentity{pid: uint32(parent), start: parentStart - 1, boot: me.boot}, true},
		{"our PID, another start time", procIdentity{pid: me.pid, start: me.start + 100, boot: me.boot}, true},
		{"our PID and start, another boot", procIdentity{pid: me.pid, start: me.start, boot: otherBoot}, true},
	}
	try := func(id procIdentity) error {
		m.word.Store(forgeSlot(r, slot, id, 5))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := m.LockContext(ctx)
		if err == nil || errors.Is(err, lockword.ErrOwnerDead) {
			m.MarkConsistent()
			m.Unlock()
		} else {
			m.word.Store(0)
		}
		return err
	}
	for _, c := range cases {
		err := try(c.id)
		if c.dead && !errors.Is(err, lockword.ErrOwnerDead) {
			t.Errorf("%s: %v, want lockword.ErrOwnerDead", c.name, err)
		}
		if !c.dead && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want DeadlineExceeded (a live holder is never robbed)", c.name, err)
		}
	}

	// A broken, PID-only liveness check: the dead holders with live PIDs
	// look alive, and the checks above would fail.
	processAliveFunc = func(id procIdentity) bool { return syscall.Kill(int(id.pid), 0) == nil }
	defer func() { processAliveFunc = processAlive }()
	fooled := 0
	for _, c := range cases[1:3] {
		if err := try(c.id); !errors.Is(err, lockword.ErrOwnerDead) {
			fooled++
		}
	}
	if fooled != 2 {
		t.Fatalf("a PID-only liveness check fooled %d of 2 forged records: the test cannot tell it from the real one", fooled)
	}
}

// TestSharedMutexStoppedHolder: a holder stopped with SIGSTOP is alive: it
// is never robbed, however long; a waiter past the stuck threshold logs a
// warning naming the lock, the holder's PID and that it is stopped;
// inspect shows it held, the holder alive, and the held-for time growing.
func TestSharedMutexStoppedHolder(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	c := startHolder(t, path, "m")
	c.cmd.Process.Signal(syscall.SIGSTOP)
	defer c.cmd.Process.Signal(syscall.SIGCONT)

	logs := captureSlog(t)
	m.SetStuckThreshold(60 * time.Millisecond)
	// The waiter gives up 340 ms after its report (a deadline fixed
	// before the call may pass before a late-starting wait reaches the
	// threshold, on a loaded host).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- m.LockContext(ctx) }()
	awaitLogs(logs, "level=WARN", 1)
	time.Sleep(340 * time.Millisecond)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter on a stopped holder got %v, want Canceled", err)
	}
	out := logs.String()
	if err := locktest.StuckLinesDouble(out); err != nil {
		t.Fatal(err) // one report, repeated only as the wait doubles
	}
	for _, want := range []string{"lock=m", "holder_pid=" + strconv.Itoa(c.pid()), "holder_alive=true", "holder_state=stopped", "held_for=", "waiters=1", "waited=", "lockword inspect"} {
		if !strings.Contains(out, want) {
			t.Errorf("stuck report lacks %q:\n%s", want, out)
		}
	}

	var held []time.Duration
	for range 3 {
		o := inspectFirst(t, path)
		if o.State != "held" && o.State != "contended" || o.HolderPID != c.pid() || !o.HolderAlive || !o.HeldForKnown {
			t.Fatalf("inspect: %+v, want held by live PID %d with a known held-for", o, c.pid())
		}
		held = append(held, o.HeldFor)
		time.Sleep(50 * time.Millisecond)
	}
	if !(held[1] > held[0] && held[2] > held[1]) {
		t.Fatalf("held-for not growing: %v", held)
	}
	t.Logf("held-for across inspections: %v", held)
}

func TestSharedMutexLockContext(t *testing.T) {
	_, m, om := twoMutexes(t)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.LockContext(done); err != nil {
		t.Fatalf("LockContext(done) on a free lock = %v", err)
	}
	if err := om.LockContext(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext(done) on a held lock = %v", err)
	}
	if err := om.LockContext(nil); err == nil {
		t.Fatal("LockContext(nil) = nil")
	}
	// Cancellation ends a kernel sleep promptly: the cancellation wakes
	// the sleeper, and a waiter that missed it would still see it at the
	// end of its 10 ms slice. Timing assumption: in one of five tries the
	// host runs the woken waiter within 100 ms (a loaded one can keep a
	// runnable thread off the CPU for longer, so the measurement is
	// retried, never the bound).
	res := make(chan error)
	var took []time.Duration
	for prompt := false; !prompt; {
		if len(took) == 5 {
			t.Fatalf("cancellation took %v in five tries, want one within 100ms", took)
		}
		ctx, cancel2 := context.WithCancel(context.Background())
		go func() { res <- om.LockContext(ctx) }()
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		cancel2()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled LockContext = %v", err)
		}
		took = append(took, time.Since(start))
		prompt = took[len(took)-1] <= 100*time.Millisecond
	}
	// A waiter, then Unlock: it gets the lock.
	go func() { res <- om.LockContext(context.Background()) }()
	time.Sleep(30 * time.Millisecond)
	m.Unlock()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	om.Unlock()
}

func TestSharedMutexStats(t *testing.T) {
	path, a, b := twoMutexes(t)
	if a.Stats() != (lockword.Stats{}) {
		t.Fatal("stats before EnableStats")
	}
	a.EnableStats()
	data, _ := a.r.Bytes("data", 64)
	var wg sync.WaitGroup
	n := scaled(20_000)
	for _, m := range []*Mutex{a, b} {
		wg.Go(func() { sharedHammer(m, data, 2, n, os.Getpid()) })
	}
	wg.Wait()
	s := b.Stats()
	t.Logf("%+v", s)
	if s.Acquisitions != uint64(4*n) || s.SlowPath == 0 || s.SlowPath > s.Acquisitions {
		t.Fatalf("stats %+v, want %d acquisitions", s, 4*n)
	}
	if !a.TryLock() {
		t.Fatal("TryLock with stats")
	}
	a.Unlock()
	if got := a.Stats().Acquisitions; got != uint64(4*n+1) {
		t.Fatalf("TryLock not counted: %d", got)
	}
	info, _ := Inspect(path)
	if info.Objects[0].Stats == nil || info.Objects[0].Stats.Acquisitions != uint64(4*n+1) {
		t.Fatalf("inspect stats %+v", info.Objects[0].Stats)
	}
}

func TestInspectRegion(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("a")
	r.Bytes("b", 10)
	m.Lock()
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Objects) != 2 || info.Objects[0].State != "held" || info.Objects[0].HolderPID != os.Getpid() || info.Objects[1].Kind != "bytes" {
		t.Fatalf("%+v", info)
	}
	if len(info.Processes) != 1 || info.Processes[0].PID != os.Getpid() || !info.Processes[0].Alive {
		t.Fatalf("processes %+v", info.Processes)
	}
	// The stamp inspect left sends Unlock down its slow path, which
	// clears it; the lock is then free and unstamped.
	m.Unlock()
	if w := m.word.Load(); w != 0 {
		t.Fatalf("word %#x after Unlock", w)
	}
	if _, err := Inspect(filepath.Join(t.TempDir(), "nothing")); err == nil {
		t.Fatal("inspect of a missing file succeeded")
	}
	os.WriteFile(path+".txt", []byte("hello"), 0o600)
	if _, err := Inspect(path + ".txt"); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("inspect of a text file: %v", err)
	}
}

var _ = io.Discard

// TestSharedMutexHolderUnknownAfterSlotReuse: a holder died and its
// process-table slot now belongs to another, live process. The holder's
// PID is unknown; no message, error or inspection may name the slot's new
// occupant instead.
func TestSharedMutexHolderUnknownAfterSlotReuse(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	me := mustSelf(t)
	slot := (r.slot + 1) % regionProcSlots
	dead := forgeSlot(r, slot, procIdentity{pid: 4194303, start: 1, boot: me.boot}, 5)
	m.word.Store(dead)
	// The slot is reclaimed by a live process (our parent, say).
	parent := os.Getppid()
	_, parentStart, err := readProcStat(parent)
	if err != nil {
		t.Fatal(err)
	}
	forgeSlot(r, slot, procIdentity{pid: uint32(parent), start: parentStart, boot: me.boot}, 6)
	occupant := "PID " + strconv.Itoa(parent)

	if alive, pid := r.tokenAlive(dead); alive || pid != 0 {
		t.Fatalf("tokenAlive of the old incarnation = %v, PID %d; want dead, PID 0 (unknown)", alive, pid)
	}
	if o := inspectFirst(t, path); o.State != "owner-dead" || o.HolderPID != 0 || o.HolderAlive {
		t.Fatalf("inspect: %+v; want owner-dead, holder PID 0 (unknown), not alive", o)
	}
	func() {
		defer func() {
			if p := fmt.Sprint(recover()); !strings.Contains(p, "PID unknown") || strings.Contains(p, occupant) {
				t.Fatalf("Unlock of a lock we do not hold panicked with %q; want PID unknown", p)
			}
		}()
		m.Unlock()
	}()
	err = m.LockContext(context.Background())
	var od *lockword.OwnerDeadError
	if !errors.As(err, &od) || od.PID != 0 || !strings.Contains(err.Error(), "PID unknown") || strings.Contains(err.Error(), occupant) {
		t.Fatalf("LockContext = %v; want an lockword.OwnerDeadError with PID 0, \"PID unknown\"", err)
	}
	m.MarkConsistent()
	m.Unlock()
}

// TestSharedMutexForeignPIDNamespace runs a holder in a PID namespace of
// its own (unshare, where the test may create one), where its PIDs mean
// nothing to us, and ours to it. A waiter here would take the live
// holder for dead (its PID, 1, names another process here) and rob it;
// instead opening the region across namespaces fails, both ways, and
// Inspect too. TestRegionForeignPIDNamespace checks the same with
// a forged namespace record, wherever this cannot run.
func TestSharedMutexForeignPIDNamespace(t *testing.T) {
	unshare := []string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}
	if out, err := exec.Command(unshare[0], append(unshare[1:], "true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot make a PID namespace here (%v: %s)", err, out)
	}
	firstLine := func(c *child) string {
		select {
		case line := <-c.lines:
			return line
		case <-time.After(30 * time.Second):
			t.Fatalf("child printed nothing in 30s:\n%s", c.output())
			return ""
		}
	}

	// The region is ours; a holder in another namespace must not attach.
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	c := startChildIn(t, unshare, "hold", path, "m")
	if line := firstLine(c); !strings.Contains(line, ErrForeignPIDNamespace.Error()[len("lockword: "):]) {
		t.Fatalf("holder in another PID namespace: %q, want ErrForeignPIDNamespace\n%s", line, c.output())
	}
	c.exit()
	if !m.TryLock() {
		t.Fatal("lock taken by a holder that could not attach")
	}
	m.Unlock()
	r.Close()

	// The region is theirs, held: we must not attach, nor inspect it.
	path = tempRegionPath(t)
	c = startChildIn(t, unshare, "create-hold", path, "m")
	if line := firstLine(c); line != "locked" {
		t.Fatalf("holder: %q\n%s", line, c.output())
	}
	if _, err := Open(path, nil); !errors.Is(err, ErrForeignPIDNamespace) {
		t.Fatalf("OpenRegion of a region held in another PID namespace = %v, want ErrForeignPIDNamespace", err)
	}
	if _, err := Inspect(path); !errors.Is(err, ErrForeignPIDNamespace) {
		t.Fatalf("InspectRegion of a region held in another PID namespace = %v, want ErrForeignPIDNamespace", err)
	}
}

// TestInspectRegionReadOnly: an inspection without write access (forced
// here: the test runs as root, whom permissions do not stop; the command's
// TestInspectReadOnlyUser runs one as an unprivileged user) maps the file
// read-only, where any store would fault, writes nothing, and says that a
// fast-path hold's held-for is unknown. One with write access stamps it,
// and read-only inspections then read the stamp.
func TestInspectRegionReadOnly(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	m.Lock() // the fast path: no stamp
	before := append([]byte(nil), m.obj...)
	info, err := inspectRegion(path, modeObserveReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if o := info.Objects[0]; !info.ReadOnly || o.State != "held" || o.HolderPID != os.Getpid() || !o.HolderAlive || o.HeldForKnown {
		t.Fatalf("read-only: %+v, read-only %v; want held by us, held-for unknown", o, info.ReadOnly)
	}
	if !bytes.Equal(before, m.obj) {
		t.Fatalf("a read-only inspection changed the object:\n%x\n%x", before, m.obj)
	}
	info, err = Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if o := info.Objects[0]; info.ReadOnly || !o.HeldForKnown || m.word.Load()&sharedTimed == 0 {
		t.Fatalf("with write access: %+v, word %#x; want the hold stamped", o, m.word.Load())
	}
	time.Sleep(20 * time.Millisecond)
	info, err = inspectRegion(path, modeObserveReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if o := info.Objects[0]; !o.HeldForKnown || o.HeldFor < 20*time.Millisecond {
		t.Fatalf("read-only after a stamp: %+v; want held for at least 20ms", o)
	}
	m.Unlock()
	if w := m.word.Load(); w != 0 {
		t.Fatalf("word %#x after Unlock", w)
	}
}

// inspectFirst is lockword inspect's view of the region's first object.
func inspectFirst(t *testing.T, path string) ObjectInfo {
	t.Helper()
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Objects[0]
}

// wantInspectState checks the state lockword inspect gives the region's
// first object.
func wantInspectState(t *testing.T, path, want string) {
	t.Helper()
	if s := inspectFirst(t, path).State; s != want {
		t.Fatalf("inspect state %q, want %s", s, want)
	}
}

// wantNotRecoverable checks that l, the region's first object, refuses
// rounds LockContext calls with ErrNotRecoverable and a TryLock, and that
// lockword inspect calls it not-recoverable.
func wantNotRecoverable(t *testing.T, l interface {
	LockContext(context.Context) error
	TryLock() bool
}, path string, rounds int) {
	t.Helper()
	for range rounds {
		if err := l.LockContext(context.Background()); !errors.Is(err, lockword.ErrNotRecoverable) {
			t.Fatalf("LockContext of a not-recoverable lock = %v, want lockword.ErrNotRecoverable", err)
		}
	}
	if l.TryLock() {
		t.Fatal("TryLock took a not-recoverable lock")
	}
	wantInspectState(t, path, "not-recoverable")
}

// TestSharedMutexReinitialize: Reinitialize is the way out of
// ErrNotRecoverable for every process, and refuses a held lock, whose
// holder (live or dead) must not be stranded or skipped.
func TestSharedMutexReinitialize(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	if err := m.Reinitialize(); err != nil {
		t.Fatalf("Reinitialize of a free lock: %v", err)
	}
	m.Lock()
	if err := m.Reinitialize(); !errors.Is(err, ErrRegionBusy) {
		t.Fatalf("Reinitialize of a lock we hold: %v, want ErrRegionBusy", err)
	}
	m.Unlock()
	c := startHolder(t, path, "m")
	c.cmd.Process.Kill()
	c.exit()
	if err := m.Reinitialize(); !errors.Is(err, ErrRegionBusy) {
		t.Fatalf("Reinitialize of a dead holder's lock: %v, want ErrRegionBusy (LockContext recovers it)", err)
	}
	if err := m.LockContext(context.Background()); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("LockContext: %v, want lockword.ErrOwnerDead", err)
	}
	m.Unlock() // unrepaired: not recoverable
	if err := m.LockContext(context.Background()); !errors.Is(err, lockword.ErrNotRecoverable) {
		t.Fatalf("%v, want lockword.ErrNotRecoverable", err)
	}
	if err := m.Reinitialize(); err != nil {
		t.Fatalf("Reinitialize of a not-recoverable lock: %v", err)
	}
	wantInspectState(t, path, "free")
	if err := m.LockContext(context.Background()); err != nil {
		t.Fatalf("after Reinitialize: %v", err)
	}
	m.Unlock()
	// Another process sees it usable too.
	h := startHolder(t, path, "m")
	h.cmd.Process.Kill()
	h.exit()
}
