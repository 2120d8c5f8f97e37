//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

func init() {
	childModes["condstress"] = childCondStress
	childModes["cond-threads"] = func(args []string) error {
		// args: path, goroutines: wait on cond "c" under mutex "m" until
		// a Broadcast; report the OS threads while they wait.
		r, m, c, err := openCondChild(args[0])
		if err != nil {
			return err
		}
		flag, _ := r.Bytes("flag", 8)
		n, _ := strconv.Atoi(args[1])
		var done atomic.Int64
		for range n {
			go func() {
				m.Lock()
				for word32(flag, 0).Load() == 0 {
					c.Wait(m)
				}
				m.Unlock()
				done.Add(1)
			}()
		}
		printThreadsWhileParked(n, func() int { return wait.Parked(&c.sleeper.woke) }, &done)
		return nil
	}
	childModes["cond-wait"] = func(args []string) error {
		// Wait on cond "c" under mutex "m" until killed. args: path.
		_, m, c, err := openCondChild(args[0])
		if err != nil {
			return err
		}
		m.Lock()
		fmt.Println("waiting")
		for {
			c.Wait(m)
		}
	}
	childModes["signal-hold"] = func(args []string) error {
		// Lock mutex "m", Signal cond "c", and hold m until killed.
		_, m, c, err := openCondChild(args[0])
		if err != nil {
			return err
		}
		m.Lock()
		c.Signal()
		fmt.Println("locked")
		time.Sleep(time.Hour)
		return nil
	}
}

// openCondChild is a child's view of the region at path: the region,
// its mutex "m" and its cond "c".
func openCondChild(path string) (*Region, *Mutex, *Cond, error) {
	r, err := Open(path, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	m, _ := r.Mutex("m")
	c, _ := r.Cond("c")
	return r, m, c, nil
}

// sharedCondVar is what the cross-process stress needs of a condition
// variable: Cond, and lateSharedCond.
type sharedCondVar interface {
	Wait(l sync.Locker)
	Signal()
	Broadcast()
}

// lateSharedCond reads the sequence after releasing the lock: the classic
// lost wake-up, with a pause in the window as a preempted waiter would
// make (a yield would not do: the other processes are not our goroutines).
type lateSharedCond struct{ *Cond }

func (c lateSharedCond) Wait(l sync.Locker) {
	l.Unlock()
	time.Sleep(20 * time.Microsecond)
	c.waiters.Add(1)
	c.sleep(context.Background(), c.seq.Load())
	l.Lock()
}

// Shared state of the condition-variable stress, in the region's "q"
// bytes; "seen" has a byte per item.
const (
	cqFull  = 0  // uint64: the one slot is full
	cqSlot  = 8  // uint64: the item in it
	cqTaken = 16 // uint64: items consumed
	cqAbort = 24 // uint32: set by the parent when the run stalls
)

// childCondStress: args path, role (producer, consumer), index, count of
// that role's processes, goroutines, items, lock kind (mutex, ticket),
// mode (ok, late). Producers put items index, index+producers, ...;
// consumers take them and count each in seen. Signal only, plus one
// Broadcast by whoever takes the last item.
func childCondStress(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	role, index, procs, goroutines, items := args[1], atoi(args[2]), atoi(args[3]), atoi(args[4]), atoi(args[5])
	l, err := robustLock(r, args[6], "qlock")
	if err != nil {
		return err
	}
	ne1, _ := r.Cond("notEmpty")
	nf1, _ := r.Cond("notFull")
	var notEmpty, notFull sharedCondVar = ne1, nf1
	if args[7] == "late" {
		notEmpty, notFull = lateSharedCond{ne1}, lateSharedCond{nf1}
	}
	q, _ := r.Bytes("q", 64)
	seen, _ := r.Bytes("seen", items)
	start, _ := r.Bytes("start", 8)
	abort := func() bool { return word32(q, cqAbort).Load() != 0 }
	full := word64(q, cqFull)
	taken := word64(q, cqTaken)
	awaitStart(start)
	var wg sync.WaitGroup
	for g := range goroutines {
		if role == "producer" {
			wg.Go(func() {
				for item := index*goroutines + g; item < items; item += procs * goroutines {
					l.Lock()
					for full.Load() != 0 && !abort() {
						notFull.Wait(l)
					}
					if abort() {
						l.Unlock()
						return
					}
					ne.PutUint64(q[cqSlot:], uint64(item))
					full.Store(1)
					notEmpty.Signal()
					l.Unlock()
				}
			})
			continue
		}
		wg.Go(func() {
			for {
				l.Lock()
				for full.Load() == 0 && taken.Load() < uint64(items) && !abort() {
					notEmpty.Wait(l)
				}
				if abort() || full.Load() == 0 {
					l.Unlock()
					return
				}
				seen[ne.Uint64(q[cqSlot:])]++
				full.Store(0)
				n := taken.Add(1)
				notFull.Signal()
				if n == uint64(items) {
					notEmpty.Broadcast() // the other consumers may leave
				}
				l.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println("done")
	return nil
}

// runSharedCondStress runs producer and consumer processes over a queue
// of capacity 1 guarded by the lock of kind, and returns an error if some
// item was not consumed exactly once, or if the run stalled for patience
// (a lost wake-up): then it releases everyone (abort, Broadcasts).
func runSharedCondStress(t *testing.T, kind, mode string, procsPerRole, goroutines, items int, patience time.Duration) error {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	if _, err := robustLock(r, kind, "qlock"); err != nil {
		t.Fatal(err)
	}
	notEmpty, _ := r.Cond("notEmpty")
	notFull, _ := r.Cond("notFull")
	q, _ := r.Bytes("q", 64)
	seen, _ := r.Bytes("seen", items)
	start, _ := r.Bytes("start", 8)
	var children []*child
	for _, role := range []string{"producer", "consumer"} {
		for i := range procsPerRole {
			children = append(children, startChild(t, "condstress", path, role, strconv.Itoa(i), strconv.Itoa(procsPerRole),
				strconv.Itoa(goroutines), strconv.Itoa(items), kind, mode))
		}
	}
	for _, c := range children {
		c.expect(t, "ready")
	}
	word32(start, 0).Store(1)
	finished := make(chan struct{})
	go func() {
		for _, c := range children {
			c.expect(t, "done")
			c.wait(t)
		}
		close(finished)
	}()
	var stall error
	last, since := uint64(0), time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-finished:
			done = true
		case <-tick.C:
			if stall != nil {
				notEmpty.Broadcast()
				notFull.Broadcast()
				continue
			}
			if n := word64(q, cqTaken).Load(); n != last {
				last, since = n, time.Now()
			} else if time.Since(since) > patience {
				stall = fmt.Errorf("stalled for %v after %d of %d items: a lost wake-up", patience, n, items)
				word32(q, cqAbort).Store(1)
			}
		}
	}
	if stall != nil {
		return stall
	}
	for i, n := range seen {
		if n != 1 {
			return fmt.Errorf("item %d consumed %d times", i, n)
		}
	}
	return nil
}

// TestSharedCondStressProcesses: 2 producer and 2 consumer processes, 2
// goroutines each, Signal only, through a queue of capacity 1 guarded by a
// Mutex, and by a TicketMutex: every item consumed exactly
// once, no stall.
func TestSharedCondStressProcesses(t *testing.T) {
	defer watchdog("shared cond stress", 2*time.Minute)()
	for _, kind := range []string{"mutex", "ticket"} {
		t.Run(kind, func(t *testing.T) {
			items := scaled(10_000)
			start := time.Now()
			if err := runSharedCondStress(t, kind, "ok", 2, 2, items, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d items through 4 processes in %v", items, time.Since(start))
		})
	}
}

// TestSharedCondStressCatchesLateRead: the same stress against a condition
// variable that reads its sequence after releasing the lock must stall.
func TestSharedCondStressCatchesLateRead(t *testing.T) {
	defer watchdog("shared cond stress, broken", 2*time.Minute)()
	err := runSharedCondStress(t, "mutex", "late", 2, 2, 50_000, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "lost wake-up") {
		t.Fatalf("a Cond that loses wake-ups passed the stress (%v): the stall check cannot fail", err)
	}
	t.Log("late-reading shm.Cond:", err)
}

func TestSharedCondBasics(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	c := firstHandle(t, "c", r.Cond, r.Mutex)
	m, _ := r.Mutex("m")
	oc, _ := openHandles(t, path, 1)[0].Cond("c")

	// Signal from another handle wakes a waiter.
	woke := make(chan error)
	go func() {
		m.Lock()
		err := c.WaitContext(context.Background(), m)
		m.Unlock()
		woke <- err
	}()
	for c.waiters.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	oc.Signal()
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	// A deadline ends the wait, with the lock held again.
	m.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.WaitContext(ctx, m); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitContext past its deadline = %v", err)
	}
	if m.TryLock() {
		t.Fatal("WaitContext returned without the lock")
	}
	m.Unlock()
	if err := c.WaitContext(nil, m); err == nil {
		t.Fatal("WaitContext(nil) = nil")
	}
	// Broadcast wakes everyone; waiters with the ticket lock too.
	tm, _ := r.TicketMutex("t")
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			tm.Lock()
			c.Wait(tm)
			tm.Unlock()
		})
	}
	for c.waiters.Load() != 5 {
		time.Sleep(time.Millisecond)
	}
	if o := inspectFirst(t, path); o.Kind != "cond" || o.State != "waiting" || o.Queued != 5 || !o.Waiters {
		t.Fatalf("inspect: %+v", o)
	}
	oc.Broadcast()
	wg.Wait()
	if n := c.waiters.Load(); n != 0 {
		t.Fatalf("%d waiters counted after all left", n)
	}
}

// TestSharedCondOwnerDeath: a process signals, then dies holding the
// mutex; the woken waiter's WaitContext re-locks it with ErrOwnerDead. A
// waiter process killed while it waits does not disturb later Signals.
func TestSharedCondOwnerDeath(t *testing.T) {
	defer watchdog("shared cond owner death", time.Minute)()
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	c, _ := r.Cond("c")

	w := startChild(t, "cond-wait", path)
	w.expect(t, "waiting")
	for c.waiters.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	w.cmd.Process.Kill()
	w.exit()

	got := make(chan error, 1)
	m.Lock()
	go func() { got <- c.WaitContext(context.Background(), m) }()
	for c.waiters.Load() != 2 { // the dead waiter stays counted
		time.Sleep(time.Millisecond)
	}
	s := startChild(t, "signal-hold", path)
	s.expect(t, "locked")
	time.Sleep(30 * time.Millisecond) // the waiter is woken and waits for m
	s.cmd.Process.Kill()
	s.exit()
	err := <-got
	if !errors.Is(err, lockword.ErrOwnerDead) || !strings.Contains(err.Error(), strconv.Itoa(s.pid())) {
		t.Fatalf("WaitContext after the signaller died holding the mutex: %v, want lockword.ErrOwnerDead naming %d", err, s.pid())
	}
	m.MarkConsistent()
	m.Unlock()
}

// TestSharedCondLayout pins the object layout of docs/abi.md.
func TestSharedCondLayout(t *testing.T) {
	if kindCond != 5 || condObjSize != 64 || condObjSeq != 0 || condObjWaiters != 4 {
		t.Fatal("shm.Cond layout differs from docs/abi.md")
	}
}

// TestSharedCondThousandWaiters: 1,000 goroutines waiting in each of two
// processes cost a few OS threads each (one sleeps in the kernel, the
// others park), and a Broadcast from here releases them all.
func TestSharedCondThousandWaiters(t *testing.T) {
	defer watchdog("1,000 cond waiters × 2 processes", 2*time.Minute)()
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	c, _ := r.Cond("c")
	flag, _ := r.Bytes("flag", 8)
	thousandBlocked(t, func() {
		m.Lock()
		word32(flag, 0).Store(1)
		m.Unlock()
		c.Broadcast()
	}, "1,000 goroutines in Wait", "cond-threads", path, "1000")
}

// TestSharedCondSignalNotStolen: a waiter (here, of another handle: as
// another process) that starts waiting after a Signal does not take it
// from the one already waiting.
func TestSharedCondSignalNotStolen(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	hs := openHandles(t, path, 2)
	m, _ := r.Mutex("m")
	c, _ := r.Cond("c")
	early, _ := hs[0].Cond("c")
	late, _ := hs[1].Cond("c")
	woke := make(chan string, 2)
	waitOn := func(name string, cv *Cond) {
		m.Lock()
		cv.Wait(m)
		m.Unlock()
		woke <- name
	}
	go waitOn("early", early)
	for c.waiters.Load() != 1 || early.sleeper.sleeping.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // asleep in the kernel
	m.Lock()
	c.Signal()
	go waitOn("late", late) // reads seq after the Signal, once we unlock
	m.Unlock()
	if got := <-woke; got != "early" {
		t.Fatalf("%s took the Signal", got)
	}
	select {
	case got := <-woke:
		t.Fatalf("%s returned without a Signal of its own", got)
	case <-time.After(50 * time.Millisecond):
	}
	c.Signal()
	if got := <-woke; got != "late" {
		t.Fatalf("second Signal woke %s", got)
	}
}
