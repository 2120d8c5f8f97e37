//go:build linux

package shm

import (
	"context"
	"errors"
	"github.com/lockword/lockword"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of Mutex's hand-off word (issue 11.1: the starvation bound
// between processes). Second Region handles in this process stand for other
// processes (each has its own owner token and gate); dead processes are
// forged slots (deadToken) or SIGKILLed children.
//
// Timing assumptions, for a loaded host (two CPU hogs on 2 cores): a
// waiter files its request 1 ms after it began to wait, once it gets a
// CPU; we allow it handoffFileBound for that. A waiter notices a dead
// holder at its first liveness check, one 10 ms slice after it first slept,
// plus its wait for a CPU: deadNoticeBound. Neither bound is what the
// tests check: they check what happens once the request is filed (the
// very next Unlock hands over), and that a dead holder's lock comes back
// without ErrOwnerDead; the bounds only keep a broken lock from hanging
// the test.
const (
	handoffFileBound = 5 * time.Second
	deadNoticeBound  = 5 * time.Second
)

// noHandoff: LOCKWORD_TEST_NO_HANDOFF=1 turns hand-off requests off, to
// show that the checks below fail without them.
func init() {
	if os.Getenv("LOCKWORD_TEST_NO_HANDOFF") == "1" {
		sharedHandoffHook = func() bool { return false }
	}
}

// twoMutexes returns the Mutex "m" through two handles of one
// region: a and b have different owner tokens, as two processes do.
func twoMutexes(t *testing.T) (path string, a, b *Mutex) {
	path = tempRegionPath(t)
	r := mustCreate(t, path, 0)
	rb := openHandles(t, path, 1)[0]
	a, _ = r.Mutex("m")
	b, _ = rb.Mutex("m")
	return path, a, b
}

// waitFor polls cond every 50 µs until it holds or bound passes.
func waitFor(bound time.Duration, cond func() bool) bool {
	for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(50 * time.Microsecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestSharedMutexStarvingWaiterIsHandedTheLock: a waiter on handle b
// beside a greedy re-locker on handle a. Once the waiter has filed its
// request (the hand-off word names it, and the waiters bit sends a's
// Unlock down its slow path), a's very next Unlock hands it the lock: a's
// TryLock right after fails, and b holds. Structural, not a race: with
// hand-off requests off (LOCKWORD_TEST_NO_HANDOFF=1) no request is ever
// filed and the waiter loses every round to TryLock.
func TestSharedMutexStarvingWaiterIsHandedTheLock(t *testing.T) {
	defer watchdog("shared hand-off", time.Minute)()
	for trial := range 3 {
		_, a, b := twoMutexes(t)
		a.Lock()
		got := make(chan error, 1)
		release := make(chan struct{})
		go func() {
			err := b.LockContext(context.Background())
			got <- err
			<-release // hold until a's TryLock has looked
			if err == nil {
				b.Unlock()
			}
		}()
		filed := waitFor(handoffFileBound, func() bool {
			return a.handoff.Load() == b.token && a.word.Load()&sharedWaiters != 0
		})
		if !filed {
			// Show what the greedy re-locker does to a waiter that
			// cannot ask: lose round after round.
			lost := 0
			for ; lost < 20; lost++ {
				a.Unlock()
				if !a.TryLock() {
					break
				}
				waitFor(100*time.Millisecond, func() bool { return a.word.Load()&sharedWaiters != 0 })
			}
			if lost == 20 {
				a.Unlock()
			}
			<-got
			close(release)
			t.Fatalf("trial %d: the waiter filed no hand-off request within %v (hand-off word %#x, word %#x); the greedy re-locker then won %d Unlocks in a row",
				trial, handoffFileBound, a.handoff.Load(), a.word.Load(), lost)
		}
		a.Unlock()
		if w := a.word.Load(); w&ownerMask != b.token {
			t.Errorf("trial %d: after Unlock with b's request filed: word %#x, hand-off word %#x; want the word to name b (%#x)", trial, w, a.handoff.Load(), b.token)
		}
		if a.TryLock() {
			a.Unlock()
			<-got
			close(release)
			t.Fatalf("trial %d: the greedy re-locker's TryLock won the Unlock after the waiter's request: no hand-off", trial)
		}
		err := <-got
		close(release)
		if err != nil {
			t.Fatalf("trial %d: the handed-to waiter got %v", trial, err)
		}
		if h := a.handoff.Load(); h != 0 {
			t.Errorf("trial %d: hand-off word %#x after the grantee returned; want 0", trial, h)
		}
	}
}

// TestSharedMutexTwoStarvingWaiters: two waiters (handles b and c) beside
// a greedy re-locker on a; one request at a time, so the second waits
// for the first's hand-off, then is handed the lock too. Both must get it
// while a keeps re-locking (a's loop stops after 20 s: a broken lock
// fails rather than hangs).
func TestSharedMutexTwoStarvingWaiters(t *testing.T) {
	defer watchdog("two starving waiters", time.Minute)()
	path, a, b := twoMutexes(t)
	rc := openHandles(t, path, 1)[0]
	c, _ := rc.Mutex("m")
	a.Lock()
	var done atomic.Int32
	got := make(chan time.Duration, 2)
	for _, m := range []*Mutex{b, c} {
		go func() {
			start := time.Now()
			m.Lock()
			got <- time.Since(start)
			m.Unlock()
			done.Add(1)
		}()
	}
	time.Sleep(2 * time.Millisecond)
	start := time.Now()
	rounds := 0
	for done.Load() < 2 && time.Since(start) < 20*time.Second {
		a.Unlock()
		a.Lock()
		rounds++
	}
	a.Unlock()
	if done.Load() < 2 {
		t.Fatalf("%d of 2 waiters got the lock in %v beside a greedy re-locker (%d rounds)", done.Load(), time.Since(start), rounds)
	}
	w1, w2 := <-got, <-got
	t.Logf("waits %v and %v over %d greedy rounds", w1, w2, rounds)
}

// TestSharedMutexHandoffWithdrawn: a waiter that filed its request and
// whose context ends withdraws it; the lock stays with its holder, and the
// hand-off word is 0 again.
func TestSharedMutexHandoffWithdrawn(t *testing.T) {
	_, a, b := twoMutexes(t)
	a.Lock()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- b.LockContext(ctx) }()
	if !waitFor(handoffFileBound, func() bool { return a.handoff.Load() == b.token }) {
		cancel()
		t.Fatalf("no request filed (hand-off word %#x)", a.handoff.Load())
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext with its context cancelled = %v, want context.Canceled", err)
	}
	if h := a.handoff.Load(); h != 0 {
		t.Errorf("hand-off word %#x after the waiter left; want 0", h)
	}
	if w := a.word.Load(); w&ownerMask != a.token {
		t.Errorf("word %#x: the holder lost the lock", w)
	}
	a.Unlock()
	if !b.TryLock() {
		t.Fatal("lock not free after Unlock")
	}
	b.Unlock()
}

// TestSharedMutexHandoffToDeadWaiter: a request left by a process that
// died (a forged dead slot) is granted by Unlock: the word names the dead
// requester, the hand-off word grants it. The next waiter takes the lock
// back at its first liveness check, without ErrOwnerDead or the
// inconsistent bit: nobody returned it to a caller.
func TestSharedMutexHandoffToDeadWaiter(t *testing.T) {
	_, a, b := twoMutexes(t)
	dead := deadToken(t, a.r, (b.r.slot+1)%regionProcSlots)
	a.Lock()
	a.handoff.Store(dead)
	a.word.Or(sharedWaiters) // as the requester did before it slept
	a.Unlock()
	if w, h := a.word.Load(), a.handoff.Load(); w&ownerMask != dead || h != dead|handoffGranted {
		t.Fatalf("after Unlock with a dead process's request: word %#x, hand-off word %#x; want the word to name %#x, granted", w, h, dead)
	}
	if a.TryLock() {
		t.Fatal("TryLock took a lock handed to another process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadNoticeBound)
	defer cancel()
	start := time.Now()
	if err := b.LockContext(ctx); err != nil {
		t.Fatalf("LockContext on a lock handed to a dead waiter = %v after %v; want nil (a plain take-back, no lockword.ErrOwnerDead)", err, time.Since(start))
	}
	if w, h := b.word.Load(), b.handoff.Load(); w&sharedInconsistent != 0 || h != 0 {
		t.Errorf("after the take-back: word %#x, hand-off word %#x; want consistent, 0", w, h)
	}
	t.Logf("taken back after %v", time.Since(start))
	b.Unlock()
}

// TestSharedMutexHandoffDeadGranter: the granter died between its two
// CASes: the hand-off word grants the lock to a live process while the
// word still names the dead granter. Neither the grantee nor a third
// process is stranded; the taker is told ErrOwnerDead (conservatively:
// a grant that does not name the dead holder proves nothing about its
// hold, see TestSharedMutexStaleGrantReportsOwnerDeath), and the grant is
// cleared.
func TestSharedMutexHandoffDeadGranter(t *testing.T) {
	for _, who := range []string{"grantee", "third"} {
		t.Run(who, func(t *testing.T) {
			path, a, b := twoMutexes(t)
			c := b
			if who == "third" {
				rc := openHandles(t, path, 1)[0]
				c, _ = rc.Mutex("m")
			}
			dead := deadToken(t, a.r, (c.r.slot+1)%regionProcSlots)
			ctx, cancel := context.WithTimeout(context.Background(), deadNoticeBound)
			defer cancel()
			var err error
			if who == "grantee" {
				// The grantee is the waiter that asked: b waits
				// behind a until it files its request; then the
				// holder turns into the dead granter that made the
				// first CAS of its grant.
				a.Lock()
				errc := make(chan error, 1)
				go func() { errc <- c.LockContext(ctx) }()
				for a.handoff.Load() != b.token {
					if ctx.Err() != nil {
						t.Fatal("the waiter filed no request")
					}
					time.Sleep(100 * time.Microsecond)
				}
				a.word.Store(dead | sharedWaiters)
				a.handoff.Store(b.token | handoffGranted)
				wakeShared(a.handoff, wakeAll)
				err = <-errc
			} else {
				a.word.Store(dead | sharedWaiters)
				a.handoff.Store(b.token | handoffGranted)
				err = c.LockContext(ctx)
			}
			if !errors.Is(err, lockword.ErrOwnerDead) {
				t.Fatalf("LockContext = %v; want lockword.ErrOwnerDead (the granter died in Unlock, still holding)", err)
			}
			if w, h := a.word.Load(), a.handoff.Load(); w&ownerMask != c.token || h != 0 {
				t.Errorf("after the take-over: word %#x, hand-off word %#x; want %#x held, 0", w, h, c.token)
			}
			if err := c.MarkConsistent(); err != nil {
				t.Fatal(err)
			}
			c.Unlock()
		})
	}
}

// TestSharedMutexStaleGrantReportsOwnerDeath: a grant left behind (a build
// without the hand-off took over from a dead grantee and never cleared it;
// here written directly) must not hide a later holder's death. The new
// user's trial found that a live holder that died under such a grant was
// taken back plainly, with no ErrOwnerDead; the take-back is plain only
// when the grant names the dead holder itself.
func TestSharedMutexStaleGrantReportsOwnerDeath(t *testing.T) {
	_, a, b := twoMutexes(t)
	gone := deadToken(t, a.r, (b.r.slot+1)%regionProcSlots)
	holder := deadToken(t, a.r, (b.r.slot+2)%regionProcSlots) // locked, returned to its caller, then died
	a.handoff.Store(gone | handoffGranted)
	a.word.Store(holder | sharedWaiters)
	ctx, cancel := context.WithTimeout(context.Background(), deadNoticeBound)
	defer cancel()
	if err := b.LockContext(ctx); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("LockContext = %v; want lockword.ErrOwnerDead: the holder died holding", err)
	}
	if h := a.handoff.Load(); h != 0 {
		t.Errorf("hand-off word %#x after the take-over; want 0 (the stale grant cleared)", h)
	}
	if err := b.MarkConsistent(); err != nil {
		t.Fatal(err)
	}
	b.Unlock()
}

// TestSharedMutexHandoffToKilledChild: a real process files its request,
// is SIGKILLed, and is then handed the lock by our Unlock; our second
// handle takes it back without ErrOwnerDead.
func TestSharedMutexHandoffToKilledChild(t *testing.T) {
	path, a, b := twoMutexes(t)
	a.Lock()
	c := startChild(t, "hold", path, "m") // blocks: we hold
	var childTok uint32
	if !waitFor(handoffFileBound+5*time.Second, func() bool {
		h := a.handoff.Load()
		if h != 0 && h&ownerMask != a.token && h&ownerMask != b.token {
			childTok = h
			return a.word.Load()&sharedWaiters != 0
		}
		return false
	}) {
		c.cmd.Process.Kill()
		c.exit()
		t.Fatalf("the child filed no hand-off request (hand-off word %#x); its output: %s", a.handoff.Load(), c.output())
	}
	c.cmd.Process.Kill()
	c.exit()
	a.Unlock()
	if w, h := a.word.Load(), a.handoff.Load(); w&ownerMask != childTok || h != childTok|handoffGranted {
		t.Fatalf("after Unlock: word %#x, hand-off word %#x; want handed to the dead child %#x", w, h, childTok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadNoticeBound)
	defer cancel()
	if err := b.LockContext(ctx); err != nil {
		t.Fatalf("LockContext after a hand-off to a killed child = %v; want nil", err)
	}
	if info := inspectFirst(t, path); info.State != "held" && info.State != "contended" {
		t.Errorf("inspect after the take-back: %q (%s)", info.State, info.Reason)
	}
	b.Unlock()
}

// TestSharedMutexHandoffCorrupt: hand-off words that no valid history
// produces make waiters return ErrCorrupt, at once (not at the context's
// end), and inspect shows the object corrupt with the reason; a forged
// grant to a live waiter that the word never follows makes it return
// ErrCorrupt once its context has ended and handoffGrace has passed, not
// hang.
func TestSharedMutexHandoffCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    func(a, b *Mutex) uint32
		want string
	}{
		{"granted-no-token", func(a, b *Mutex) uint32 { return handoffGranted }, "names no incarnation"},
		{"reserved-bits", func(a, b *Mutex) uint32 { return 1<<29 | b.token }, "reserved bits"},
		{"generation-0", func(a, b *Mutex) uint32 { return 5 << ownerGenBits }, "names no incarnation"},
		{"generation-0-granted", func(a, b *Mutex) uint32 { return 5<<ownerGenBits | handoffGranted }, "names no incarnation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, a, b := twoMutexes(t)
			a.Lock()
			a.handoff.Store(tc.h(a, b))
			info := inspectFirst(t, path)
			if info.State != "corrupt" || !strings.Contains(info.Reason, tc.want) {
				t.Errorf("inspect: state %q, reason %q; want corrupt, %q", info.State, info.Reason, tc.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := b.LockContext(ctx)
			if !errors.Is(err, lockword.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LockContext = %v; want lockword.ErrCorrupt saying %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("lockword.ErrCorrupt took %v", d)
			}
			a.Unlock() // the holder's Unlock grants nothing corrupt, and releases
			if !b.TryLock() {
				t.Fatalf("lock not free after Unlock (word %#x)", a.word.Load())
			}
			b.Unlock()
		})
	}
	t.Run("forged-grant", func(t *testing.T) {
		_, a, b := twoMutexes(t)
		a.Lock()
		defer a.Unlock()
		a.handoff.Store(b.token | handoffGranted) // a holds, and hands nothing over
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.LockContext(ctx)
		if !errors.Is(err, lockword.ErrCorrupt) {
			t.Fatalf("LockContext with a forged grant = %v; want lockword.ErrCorrupt", err)
		}
		if d := time.Since(start); d > handoffGrace+liveSlack {
			t.Errorf("returned %v after its 20 ms context", d)
		}
	})
}

// TestInspectHandoff: lockword inspect names the requesting and the
// granted process.
func TestInspectHandoff(t *testing.T) {
	path, a, b := twoMutexes(t)
	a.Lock()
	defer a.Unlock()
	pid := strconv.Itoa(os.Getpid())
	a.handoff.Store(b.token)
	if info := inspectFirst(t, path); info.Handoff != "hand-off requested by PID "+pid {
		t.Errorf("request: Handoff %q", info.Handoff)
	}
	a.handoff.Store(b.token | handoffGranted)
	if info := inspectFirst(t, path); info.Handoff != "handed to PID "+pid {
		t.Errorf("grant: Handoff %q", info.Handoff)
	}
	a.handoff.Store(0)
	if info := inspectFirst(t, path); info.Handoff != "" {
		t.Errorf("none: Handoff %q", info.Handoff)
	}
}

// TestSharedMutexReinitializeClearsHandoff: Reinitialize of a
// not-recoverable lock clears a hand-off word left behind.
func TestSharedMutexReinitializeClearsHandoff(t *testing.T) {
	_, a, b := twoMutexes(t)
	a.word.Store(ownerNotRecoverable)
	a.handoff.Store(b.token)
	if err := a.Reinitialize(); err != nil {
		t.Fatal(err)
	}
	if h := a.handoff.Load(); h != 0 {
		t.Fatalf("hand-off word %#x after Reinitialize", h)
	}
	if !b.TryLock() {
		t.Fatal("not free after Reinitialize")
	}
	b.Unlock()
}

// TestSharedMutexForgedGrantToSelf: hand-off words naming this process
// that it never filed (forged, as FuzzLiveWords writes them) must not
// break mutual exclusion within the process nor strand the lock. A grant
// to us found by a waiter that never asked is reported as ErrCorrupt and
// cleared: taking it made a second goroutine of ours hold beside one that
// had taken the free word on the fast path (FuzzLiveWords then died of
// "Unlock of unlocked Mutex"). A request naming us while none of our
// goroutines waits is dropped by Unlock, which released the lock instead
// of "handing" it to us and leaving it held by nobody.
func TestSharedMutexForgedGrantToSelf(t *testing.T) {
	t.Run("grant", func(t *testing.T) {
		_, _, b := twoMutexes(t)
		b.handoff.Store(b.token | handoffGranted) // forged while the word is free
		b.Lock()                                  // the fast path: the word names us
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := b.LockContext(ctx) // as a second goroutine of ours would (ownership is per handle)
		if err == nil {
			t.Fatal("LockContext returned nil while another goroutine of this process held the lock: two holders")
		}
		if !errors.Is(err, lockword.ErrCorrupt) {
			t.Fatalf("LockContext = %v; want lockword.ErrCorrupt (a grant this process never asked for)", err)
		}
		if h := b.handoff.Load(); h != 0 {
			t.Errorf("hand-off word %#x after the report; want it cleared", h)
		}
		b.Unlock()
	})
	t.Run("request", func(t *testing.T) {
		_, a, b := twoMutexes(t)
		a.Lock()
		a.handoff.Store(a.token) // forged: no goroutine of a waits
		a.word.Or(sharedWaiters) // so that Unlock takes its slow path, which grants
		a.Unlock()
		if w, h := a.word.Load(), a.handoff.Load(); w&ownerMask != 0 || h != 0 {
			t.Fatalf("after Unlock with a forged request naming the holder: word %#x, hand-off word %#x; want both 0 (released)", w, h)
		}
		if !b.TryLock() {
			t.Fatal("the lock is not free after Unlock")
		}
		b.Unlock()
	})
}
