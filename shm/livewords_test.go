//go:build linux

package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/lockword/lockword"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The live-word fuzzer (issue 12): arbitrary values are written into the
// words of every shared kind while their users work, and every user must
// come back: no panic, no call that outlasts its context (by more than
// liveSlack, for a loaded host), no access outside the mapping (a fault
// kills the test binary). Handles on one region stand for processes, as in
// the other shared tests; TestLiveWordsProcesses runs the same users in
// child processes.
//
// One kind of panic is expected and counted, not failed: Unlock of a
// Mutex and RUnlock of a RWMutex have only the shared word to
// go by, so an Unlock whose word was overwritten under its hold cannot
// be told from an Unlock without a Lock, and panics as misuse (documented
// in ErrCorrupt's doc). It is tolerated only if the fuzzer wrote that
// object's words during the hold (for RUnlock, whose check compares the
// counts of every reader ever, at any time before).

const (
	liveOpTimeout = 20 * time.Millisecond
	// liveSlack is how much later than its context a call may return: a
	// waiter checks its context at least every ownerCheckInterval (10 ms)
	// and is woken when it ends; the rest is scheduling on a loaded host
	// (two cores shared with other jobs), far below a hang. On a host so
	// loaded that a plain timer in the same process wakes up seconds
	// late (load 30 on two cores has done it), the allowance grows by
	// liveCanaryFactor times the latest such wake-up seen during the run
	// (liveUsers' canary): a call passes several such points (the
	// process's gate, the queue's wait, its withdrawal, a corruption
	// check), each of which can be as late as the canary's one sleep.
	liveSlack        = 3 * time.Second
	liveCanaryFactor = 10
)

// liveObject is one shared object under fuzzing, with a count of the
// fuzzer's writes into it that the tolerance above consults.
type liveObject struct {
	name   string
	writes *atomic.Uint64 // in the region (liveCounters), so children see it
}

// liveKinds are the users of each kind: open returns, for handle number
// role of a region, the operation that one worker repeats (nil: none for
// this role).
var liveKinds = []struct {
	name string
	open func(r *Region, role int) (func(ctx context.Context, o liveObject) error, error)
}{
	{"mutex", func(r *Region, _ int) (func(context.Context, liveObject) error, error) {
		m, err := r.Mutex("mutex")
		return func(ctx context.Context, o liveObject) error {
			w := o.writes.Load()
			if err := m.LockContext(ctx); err != nil && !isOwnerDead(err) {
				return err
			}
			return liveGuard(o, w, "Unlock of", m.Unlock)
		}, err
	}},
	{"ticket", func(r *Region, _ int) (func(context.Context, liveObject) error, error) {
		m, err := r.TicketMutex("ticket")
		return func(ctx context.Context, o liveObject) error {
			if err := m.LockContext(ctx); err != nil && !isOwnerDead(err) {
				return err
			}
			m.Unlock() // the handle knows it holds: never a misuse panic
			return nil
		}, err
	}},
	{"rw", func(r *Region, role int) (func(context.Context, liveObject) error, error) {
		rw, err := r.RWMutex("rw")
		return func(ctx context.Context, o liveObject) error {
			if role%2 == 0 {
				if err := rw.LockContext(ctx); err != nil && !isOwnerDead(err) {
					return err
				}
				rw.Unlock()
				return nil
			}
			if err := rw.RLockContext(ctx); err != nil {
				return err
			}
			// Readers are counted, not owned: a count of this slot
			// written lower, or in rewritten to the other phase, at any
			// time, not only during this hold, makes a later RUnlock
			// look like one too many. Tolerated once the fuzzer wrote
			// the object at all (0: its count before any write).
			return liveGuard(o, 0, "RUnlock of", rw.RUnlock)
		}, err
	}},
	{"cond", func(r *Region, role int) (func(context.Context, liveObject) error, error) {
		c, err := r.Cond("cond")
		var local lockword.Mutex // not shared: the wait is the cond's alone
		return func(ctx context.Context, o liveObject) error {
			if role == 0 {
				c.Broadcast()
				time.Sleep(time.Millisecond)
				return nil
			}
			local.Lock()
			defer local.Unlock()
			return c.WaitContext(ctx, &local)
		}, err
	}},
	{"ring", func(r *Region, role int) (func(context.Context, liveObject) error, error) {
		switch role {
		case 0:
			p, err := r.RingProducer("ring", 4096)
			return func(ctx context.Context, o liveObject) error { return p.Send(ctx, []byte("live words")) }, err
		case 1:
			c, err := r.RingConsumer("ring", 4096)
			buf := make([]byte, 64)
			return func(ctx context.Context, o liveObject) error { _, err := c.Receive(ctx, buf); return err }, err
		}
		return nil, nil
	}},
	{"seqlock", func(r *Region, role int) (func(context.Context, liveObject) error, error) {
		s, err := NewSeqLock[[4]uint64](r, "seqlock")
		// Readers only: Store takes no context, and waits as long as
		// the writers' word names a live holder, as a written word may.
		return func(ctx context.Context, o liveObject) error {
			_, err := s.LoadContext(ctx)
			return err
		}, err
	}},
	{"semaphore", func(r *Region, role int) (func(context.Context, liveObject) error, error) {
		s, err := r.Semaphore("semaphore", 3)
		k := int64(1 + role%2) // weights 1 and 2: some requests queue
		return func(ctx context.Context, o liveObject) error {
			w := o.writes.Load()
			if err := s.Acquire(ctx, k); err != nil && !isOwnerDead(err) {
				return err // nothing held: ctx.Err, a WeightError or a CorruptError
			}
			// Our entry or the counts overwritten during the hold
			// make Release panic with the CorruptError naming the
			// Semaphore, never as misuse: we release what we took.
			return liveGuard(o, w, `Semaphore "semaphore" in`, func() { s.Release(k) })
		}, err
	}},
	{"mpsc", func(r *Region, role int) (func(context.Context, liveObject) error, error) {
		// Role 1 consumes, every other role produces: each user handle
		// stands for a process. Its errors (ErrCorrupt on words no
		// history makes, ErrPeerDead on a token of no live process, a
		// message too large for a length written) are answers, not
		// failures: only a panic or a call past its context fails.
		if role == 1 {
			c, err := r.MPSCConsumer("mpsc", liveMPSCCapacity)
			buf := make([]byte, 0, liveMPSCCapacity)
			return func(ctx context.Context, o liveObject) error { _, err := c.Receive(ctx, buf); return err }, err
		}
		p, err := r.MPSCProducer("mpsc", liveMPSCCapacity)
		return func(ctx context.Context, o liveObject) error {
			return p.Send(ctx, []byte("live words, many producers"))
		}, err
	}},
}

// liveMPSCCapacity is the MPSC queue's record space: small, so that the
// fuzzer's offsets land on its words and records alike.
const liveMPSCCapacity = 512

// errToleratedPanic counts a misuse panic on words the fuzzer overwrote.
var errToleratedPanic = errors.New("tolerated misuse panic on overwritten words")

// errLivePanic marks any other panic of a user: it fails the run.
var errLivePanic = errors.New("panic in a live-word user")

// liveGuard runs fn (an unlock); a panic is tolerated (errToleratedPanic)
// only if it is a lockword panic naming want and the fuzzer wrote o's
// words since before the acquisition: its write count is no longer w, or
// w is odd (a write was under way when the acquisition began; see
// fuzzLiveWrites). Any other panic is returned as an error, so that the
// fuzzer prints it (a panic in a user goroutine would kill the fuzzing
// process with no message).
func liveGuard(o liveObject, w uint64, want string, fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprint(p)
			now := o.writes.Load()
			if strings.HasPrefix(msg, "lockword: ") && strings.Contains(msg, want) && (now != w || w%2 == 1) {
				err = errToleratedPanic
				return
			}
			err = fmt.Errorf("%w: %s: %v (fuzzer write count %d then %d)", errLivePanic, o.name, p, w, now)
		}
	}()
	fn()
	return nil
}

// lateness keeps the longest delay noted, with what it says.
type lateness struct {
	mu  sync.Mutex
	d   time.Duration
	err error
}

func (l *lateness) note(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d > l.d {
		l.d, l.err = d, err
	}
}

func (l *lateness) get() (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.d, l.err
}

// liveCall runs op and turns a panic that liveGuard did not handle (one
// in the acquisition itself, say) into an error that fails the run with
// its message.
func liveCall(op func(context.Context, liveObject) error, ctx context.Context, o liveObject) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %v", errLivePanic, o.name, p)
		}
	}()
	return op(ctx, o)
}

// liveCounters is the bytes object holding each kind's write count.
const liveCounters = "live-counters"

// liveObjects creates (or finds) every kind's object in r, with counters.
func liveObjects(r *Region) ([]liveObject, error) {
	b, err := r.Bytes(liveCounters, 8*len(liveKinds))
	if err != nil {
		return nil, err
	}
	objs := make([]liveObject, len(liveKinds))
	for i, k := range liveKinds {
		objs[i] = liveObject{name: k.name, writes: word64(b, uint64(8*i))}
	}
	return objs, nil
}

// liveUsers runs every kind's workers on handle r (as role) until stop is
// closed, and reports the first failure: a call that returned more than
// liveSlack (see there) after its context's end, or a panic (liveCall).
// or the child).
func liveUsers(r *Region, role int, stop <-chan struct{}) (ops, tolerated int64, err error) {
	objs, err := liveObjects(r)
	if err != nil {
		return 0, 0, err
	}
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	var nOps, nTol atomic.Int64
	// The latest call (its overrun past the context) and the canary's
	// latest wake-up, both judged once the users stop (see liveSlack).
	var late, canary lateness
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			time.Sleep(liveOpTimeout)
			canary.note(time.Since(start)-liveOpTimeout, nil)
		}
	})
	for i, k := range liveKinds {
		op, err := k.open(r, role)
		if errors.Is(err, ErrRingCorrupt) || errors.Is(err, lockword.ErrCorrupt) || errors.Is(err, ErrRingBusy) || errors.Is(err, ErrPermitsMismatch) {
			// The other process's writes got there first (a ring's
			// indices overwritten before we attached, say): refusing a
			// corrupt object is the right answer, not a failure.
			nTol.Add(1)
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k.name, err)
		}
		if op == nil {
			continue
		}
		workers := 2
		if k.name == "ring" || k.name == "mpsc" {
			workers = 1 // a handle is used by one goroutine at a time
		}
		for range workers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), liveOpTimeout)
					start := time.Now()
					err := liveCall(op, ctx, objs[i])
					cancel()
					nOps.Add(1)
					if errors.Is(err, errToleratedPanic) {
						nTol.Add(1)
					}
					if errors.Is(err, errLivePanic) {
						failed.CompareAndSwap(nil, &err)
					}
					if took := time.Since(start); took > liveOpTimeout+liveSlack {
						late.note(took-liveOpTimeout, fmt.Errorf("%s: a call returned %v after it began (context %v): %v", k.name, took, liveOpTimeout, err))
					}
					if errors.Is(err, ErrRingCorrupt) || errors.Is(err, lockword.ErrRingClosed) || errors.Is(err, ErrRingBusy) || errors.Is(err, lockword.ErrCorrupt) {
						time.Sleep(time.Millisecond) // sticky: do not spin on it
					}
				}
			})
		}
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		err = *p
	} else if d, e := late.get(); e != nil {
		if c, _ := canary.get(); d > liveSlack+liveCanaryFactor*c {
			err = fmt.Errorf("%w (a timer in the same process was at worst %v late)", e, c.Round(time.Millisecond))
		}
	}
	return nOps.Load(), nTol.Load(), err
}

// fuzzLiveWrites applies writes, 7 bytes each (kind, offset, value), to the
// objects of r, one every gap: the value goes to the 32-bit word at the
// offset (modulo the object's size, aligned) of the kind's object.
func fuzzLiveWrites(r *Region, objs []liveObject, writes []byte, gap time.Duration) {
	for ; len(writes) >= 7; writes = writes[7:] {
		k := int(writes[0]) % len(liveKinds)
		o := r.objects[liveKinds[k].name]
		off := uint64(binary.LittleEndian.Uint16(writes[1:])) * 4 % uint64(o.size)
		// The count is odd while the write is under way: a user that
		// reads it before the store and panics after it (the count not
		// yet moved on) still sees that its words were written.
		objs[k].writes.Add(1)
		word32(r.data, o.offset+off).Store(binary.LittleEndian.Uint32(writes[3:]))
		objs[k].writes.Add(1)
		time.Sleep(gap)
	}
}

// liveSetup creates the counters and every kind's object through r, the
// fuzzer's handle, which takes no role in any of them (the ring's producer
// role is claimed and given back), so that r knows where each lies. It
// returns the objects for fuzzLiveWrites.
func liveSetup(t *testing.T, r *Region) []liveObject {
	objs, err := liveObjects(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range liveKinds {
		if _, err := k.open(r, 99); err != nil {
			t.Fatal(err)
		}
	}
	p, err := r.RingProducer("ring", 4096)
	if err != nil {
		t.Fatal(err)
	}
	p.e.release()
	return objs
}

// liveRegion makes a region with every kind's object and n handles.
//
// The handles wait up to liveFileLockWait for the region's file lock, not
// DefaultInitTimeout: a handle's goroutine that holds it for an object
// lookup (microseconds of work) sits runnable behind dozens of users'
// goroutines on two loaded cores, and has been seen to take over 2 s at
// load 24. What the fuzzer proves (no panic, no call past its context by
// more than liveSlack) is about the lock words, not the file lock; a
// file lock held past liveFileLockWait still fails.
func liveRegion(t *testing.T, n int) (string, []*Region) {
	path := tempRegionPath(t)
	opts := &Options{InitTimeout: liveFileLockWait}
	first, err := Create(path, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	rs := []*Region{first}
	for range n - 1 {
		r, err := Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return path, rs
}

// liveCrashOutput sends a fatal crash's output (a panic on a goroutine
// that is not the test's, a fatal runtime error) to a file as well: Go's
// fuzzing coordinator discards its workers' stderr, and reports such a
// crash only as "fuzzing process hung or terminated unexpectedly: exit
// status 2". The file is $LOCKWORD_CRASH_DIR/fuzzlivewords-PID.txt (CI
// prints them when the fuzz step fails); unset, nothing is written.
func liveCrashOutput(f *testing.F) {
	dir := os.Getenv("LOCKWORD_CRASH_DIR")
	if dir == "" {
		return
	}
	out, err := os.Create(filepath.Join(dir, fmt.Sprintf("fuzzlivewords-%d.txt", os.Getpid())))
	if err != nil {
		f.Fatal(err)
	}
	if err := debug.SetCrashOutput(out, debug.CrashOptions{}); err != nil {
		f.Fatal(err)
	}
	out.Close() // SetCrashOutput holds its own duplicate
}

// liveFileLockWait bounds a wait for the region's file lock in these
// tests (see liveRegion).
const liveFileLockWait = 30 * time.Second

// liveInspect is Inspect, tried again while the file lock stays held for
// its DefaultInitTimeout, up to liveFileLockWait (see liveRegion).
func liveInspect(path string) (*RegionInfo, error) {
	deadline := time.Now().Add(liveFileLockWait)
	for {
		info, err := Inspect(path)
		if !errors.Is(err, ErrFileLockTimeout) || time.Now().After(deadline) {
			return info, err
		}
	}
}

// liveRun fuzzes one input on a fresh region with three handles.
func liveRun(t *testing.T, writes []byte) {
	defer watchdog("live-word fuzz input", 60*time.Second)()
	path, rs := liveRegion(t, 4) // the fuzzer's handle, and three users
	objs := liveSetup(t, rs[0])
	stop := make(chan struct{})
	errs := make(chan error, len(rs))
	for i, r := range rs[1:] {
		go func() {
			_, _, err := liveUsers(r, i, stop)
			errs <- err
		}()
	}
	fuzzLiveWrites(rs[0], objs, writes, 200*time.Microsecond)
	time.Sleep(20 * time.Millisecond) // users go on with what was written
	if _, err := liveInspect(path); err != nil {
		t.Errorf("InspectRegion on live corrupt words: %v", err)
	}
	close(stop)
	for range rs[1:] {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for _, r := range rs {
		r.Close() // may be refused (a reader counted in by corrupt words): not checked
	}
}

// FuzzLiveWords: CI runs it briefly with -fuzz; the seeds run with every
// go test.
func FuzzLiveWords(f *testing.F) {
	liveCrashOutput(f)
	le := func(vals ...uint32) []byte { // kind, offset/4, value triples
		var b []byte
		for i := 0; i+2 < len(vals); i += 3 {
			b = append(b, byte(vals[i]), byte(vals[i+1]), byte(vals[i+1]>>8))
			b = binary.LittleEndian.AppendUint32(b, vals[i+2])
		}
		return b
	}
	// semaphore: the users' held zeroed, again and again, under their
	// holds: Release must panic with a CorruptError, not as misuse.
	var zeroHeld []uint32
	for range 3 {
		zeroHeld = append(zeroHeld, 6, 36, 0, 6, 40, 0, 6, 44, 0)
	}
	f.Add(le(zeroHeld...))
	f.Add(le(1, 1, 10))                                          // ticket: serving = 10, ahead of next
	f.Add(le(2, 1, 1000, 2, 0, 0))                               // rw writers' queue: serving far ahead, next reset
	f.Add(le(0, 0, 0x0fffffff, 0, 0, 1<<18))                     // mutex: not recoverable, then a generation-0 token
	f.Add(le(1, 32, 0xffffffff, 1, 33, 0xffffffff, 1, 0, 7))     // ticket: a record of all ones, next moved
	f.Add(le(2, 160, 0x12, 2, 161, 0x100, 2, 162, 0x7))          // rw readers' words
	f.Add(le(3, 0, 5, 3, 1, 0xffffffff, 4, 0, 0xdead, 4, 2, 77)) // cond counters, ring words
	f.Add(le(5, 0, 1, 5, 2, 0x3ff<<18|3))                        // seqlock: odd sequence, writer token
	f.Add(le(0, 14, 1<<18|1, 0, 14, 2<<18|1|1<<31))              // mutex hand-off word: a user's request, a grant to another user
	f.Add(le(0, 14, 1<<31, 0, 14, 7<<28|1<<18|1, 0, 14, 3<<18))  // mutex hand-off word: grant without token, reserved bits, generation 0
	f.Add(le(6, 17, 3, 6, 18, 1, 6, 20, 5))                      // semaphore: all permits in use, sleepers bit, 5 waiters
	f.Add(le(6, 16, 0, 6, 34, 9, 6, 32, 2))                      // semaphore: capacity 0, slot 0's ticket and held
	f.Add(le(6, 0, 1<<18|2, 6, 19, 0, 6, 33, 0x3ff<<18|5))       // semaphore: guard, next ticket, an entry's token
	f.Add(le(7, 0, 0x3ff<<18|9, 7, 1, 0xffffffff))               // mpsc header: a consumer token of no process, producers -1
	f.Add(le(7, 33, 1<<31|5, 7, 32, 0x3ff<<18|7))                // mpsc claim word: claiming, by a token of no process
	f.Add(le(7, 32, 0x7, 7, 33, 1, 7, 64, 8))                    // mpsc tail unaligned and 2^32 past head; head unaligned
	f.Add(le(7, 128, 2<<28, 7, 129, 0xffff, 7, 34, 0xffffffff))  // mpsc record: published, length past capacity; wake word all ones
	f.Add(le(7, 41, 1<<12, 7, 43, 1<<12, 7, 73, 1, 7, 66, 0x80)) // mpsc: sent, claims recovered, received past their bounds; an unknown not-full bit
	f.Fuzz(func(t *testing.T, writes []byte) {
		if len(writes) > 7*200 {
			writes = writes[:7*200]
		}
		liveRun(t, writes)
	})
}

// TestLiveWordsProcesses runs the users in two child processes while this
// process writes random values into every word of every object.
func TestLiveWordsProcesses(t *testing.T) {
	path, rs := liveRegion(t, 1)
	objs := liveSetup(t, rs[0])
	var children []*child
	for role := range 2 {
		children = append(children, startChild(t, "live-users", path, fmt.Sprint(role), "1.5s"))
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	writes := make([]byte, 7*2000)
	for i := range writes {
		seed = seed*6364136223846793005 + 1442695040888963407
		writes[i] = byte(seed >> 56)
	}
	fuzzLiveWrites(rs[0], objs, writes, 500*time.Microsecond)
	for _, c := range children {
		stop := watchdog("live-word child", time.Minute)
		err := c.exit()
		stop()
		if err != nil {
			t.Errorf("child: %v\n%s", err, c.output())
		} else {
			t.Logf("child: %s", strings.TrimSpace(c.output()))
		}
	}
}

func init() { childModes["live-users"] = childLiveUsers }

// childLiveUsers is the child side of TestLiveWordsProcesses: args are the
// region's path, the role, and how long to run.
func childLiveUsers(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	var role int
	fmt.Sscan(args[1], &role)
	d, err := time.ParseDuration(args[2])
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	ops, tolerated, err := liveUsers(r, role, stop)
	fmt.Fprintf(os.Stdout, "role %d: %d calls, %d tolerated misuse panics on overwritten words\n", role, ops, tolerated)
	return err
}

// TestLiveWordsReachSemaphore: the fuzzer's writes of the semaphore kind
// land in the Semaphore object's words (its in-use count here), so
// FuzzLiveWords corrupts it under its users like every other kind.
func TestLiveWordsReachSemaphore(t *testing.T) {
	_, rs := liveRegion(t, 1)
	objs := liveSetup(t, rs[0])
	write := []byte{6, semObjInUse / 4, 0, 3, 0, 0, 0} // kind 6, offset 68: in use = 3
	fuzzLiveWrites(rs[0], objs, write, 0)
	o, ok := rs[0].objects["semaphore"]
	if !ok || o.kind != kindSemaphore {
		t.Fatalf("no semaphore among the live-word objects (%+v)", o)
	}
	if got := word32(rs[0].data, o.offset+semObjInUse).Load(); got != 3 {
		t.Fatalf("the semaphore's in-use word reads %d after the fuzzer wrote 3 there", got)
	}
}
