package lockword

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Deadlock detection, opt-in (SetDeadlockDetection): holder tracking for
// Mutex, SpinMutex, TicketMutex and RWMutex. With it on, every
// acquisition records which goroutine holds which lock, from which stack,
// and which lock a goroutine waits for. Three diagnostics read that:
//
//   - lock-order inversion (a potential deadlock, found before it
//     happens): each acquisition made while holding other locks records
//     the edges held → acquired; an edge whose reverse was recorded before
//     is reported once per pair of locks, with the stacks of both orders
//     (go-deadlock's check, limited to two locks);
//   - an actual deadlock: when a wait passes the lock's stuck threshold,
//     the stuck watcher walks the waits-for graph from the lock (its
//     holders, the lock each of them waits for, its holders, ...) and
//     reports a cycle once, with every member (parking_lot's
//     deadlock_detection builds the same graph);
//   - the stuck report names the lock's holders and where they acquired it.
//
// A build tag (lockword_deadlock) compiles it in, and a runtime switch
// turns it off and on in such a build. The tag, because a runtime switch
// is not free: a load and a branch (an inlining cost of 7) would put five
// of the eleven inlined fast paths (Mutex's and SpinMutex's LockContext,
// TicketMutex.Unlock, RLock, RUnlock) over the inliner's budget of 80. The hooks are
// statements `if deadlockBuilt && lockTracking.Load() != 0 {...}`, which
// the compiler drops, with the constant false, before it weighs a function
// for inlining: without the tag the fast paths compile as before
// (TestFastPathsInline; docs/diagnostics.md, "What it costs"). go-deadlock
// too asks for a rebuild (its types replace sync's). Goroutines are told
// apart by the id that runtime.Stack prints, parsed once per tracked
// acquisition, a microsecond paid only while detection is on (the
// runtime's own goroutine id is not exported, and its internals are off
// limits). Semaphore is not tracked: its permits have no owner that a
// waits-for graph could name.

// lockTracking is 1 while detection is on. The fast paths read it only in
// builds with the lockword_deadlock tag (deadlockBuilt).
var lockTracking atomic.Uint32

// ErrDeadlockDetectionNotBuilt is returned by SetDeadlockDetection(true)
// in a build without the lockword_deadlock tag.
var ErrDeadlockDetectionNotBuilt = errors.New("lockword: deadlock detection is not compiled in: build with -tags lockword_deadlock")

// SetDeadlockDetection turns deadlock detection (lock-order inversions,
// waits-for cycles, holders in stuck reports) on or off for every
// Mutex, SpinMutex, TicketMutex and RWMutex of the process. It is
// compiled in only by the build tag lockword_deadlock (go build -tags
// lockword_deadlock, go test -tags lockword_deadlock), and such a build
// starts with it on; in other builds turning it on returns
// ErrDeadlockDetectionNotBuilt and the locks pay nothing for it. Turn it
// on before the locks are used: a lock held when it was turned on has no
// recorded holder. Turning it off forgets every record. On, each
// acquisition costs a few microseconds (a stack and the goroutine id),
// and the recorded order keeps every lock that was held with another
// reachable until detection is turned off: it is meant for tests and
// debugging runs.
func SetDeadlockDetection(on bool) error {
	if on && !deadlockBuilt {
		return ErrDeadlockDetectionNotBuilt
	}
	setTracking(on)
	return nil
}

// setTracking turns tracking on or off (tests of builds without the tag
// drive the tracked paths themselves).
func setTracking(on bool) {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	if on {
		lockTracking.Store(1)
		return
	}
	lockTracking.Store(0)
	tracker.goroutines, tracker.holders, tracker.order, tracker.reported = nil, nil, nil, nil
}

// SetDeadlockHandler sets a function called, in addition to the log/slog
// error, with each report of deadlock detection; nil removes it. It runs
// on the goroutine that found the problem (an acquiring goroutine for an
// inversion, the stuck watcher for a cycle) and must not block on
// lockword locks.
func SetDeadlockHandler(handler func(DeadlockReport)) {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	tracker.handler = handler
}

// A DeadlockReport is one finding of deadlock detection.
type DeadlockReport struct {
	// Cycle is true for an actual deadlock: every member waits for a lock
	// that the next member holds (the last, one that the first holds).
	// It is false for a lock-order inversion: two members that took the
	// same two locks in opposite orders, and may deadlock when they next
	// run at the same time.
	Cycle   bool
	Members []DeadlockMember
}

// A DeadlockMember is a goroutine that holds one lock and wants another.
type DeadlockMember struct {
	// Goroutine is the goroutine's id, as a panic's traceback prints it.
	Goroutine uint64
	// Held is the lock held, and HeldStack the stack that acquired it.
	Held      LockID
	HeldStack string
	// Wanted is the lock wanted: in a cycle the lock waited for, and
	// WantedStack where the wait began; in an inversion the lock
	// acquired while holding Held, and where.
	Wanted      LockID
	WantedStack string
}

// A LockID names a lock in a DeadlockReport: its type, its name (SetName)
// and its address.
type LockID struct {
	Kind, Name string
	Addr       uintptr
}

// String returns the lock as `Mutex "name" at 0xc000012345`.
func (l LockID) String() string {
	return fmt.Sprintf("%s %q at %#x", l.Kind, l.Name, l.Addr)
}

// lockRef is a tracked lock: its pointer (the key of every record), type
// and diagnostics (for its name).
type lockRef struct {
	lock any
	kind string
	d    *diag
}

func (r lockRef) id() LockID {
	var addr uintptr
	fmt.Sscanf(fmt.Sprintf("%p", r.lock), "0x%x", &addr)
	return LockID{Kind: r.kind, Name: r.d.Name(), Addr: addr}
}

// A hold is one goroutine's hold on a lock.
type hold struct {
	ref   lockRef
	gid   uint64
	stack []uintptr // where it was acquired
}

// A goroutineState is what a goroutine holds and waits for.
type goroutineState struct {
	held      []*hold
	waiting   *lockRef
	waitStack []uintptr
}

// An orderEdge records the first acquisition of to while holding from.
type orderEdge struct {
	from, to *hold
}

var tracker struct {
	mu         sync.Mutex // a sync.Mutex: tracking must not track itself
	goroutines map[uint64]*goroutineState
	holders    map[any][]*hold // per lock, in acquisition order
	order      map[[2]any]orderEdge
	reported   map[string]bool
	handler    func(DeadlockReport)
}

// trackAcquire makes one tracked acquisition of ref by the calling
// goroutine: try takes the lock if it is free; else the wait is recorded
// and wait waits (blocking is nil for TryLock, which cannot deadlock and
// records no order edge).
func trackAcquire(ctx context.Context, ref lockRef, try func() bool, blocking func(context.Context) error) error {
	h := &hold{ref: ref, gid: goroutineID(), stack: callers()}
	var found []DeadlockReport
	if blocking != nil {
		found = trackOrder(h)
	}
	report(found)
	if try() {
		trackHeld(h)
		return nil
	}
	if blocking == nil {
		return errTryFailed
	}
	trackWaiting(h, true)
	err := blocking(ctx)
	trackWaiting(h, false)
	if err == nil {
		trackHeld(h)
	}
	return err
}

// errTryFailed is trackAcquire's answer to a TryLock that failed.
var errTryFailed = errors.New("lockword: lock held")

// trackOrder records the edges from the locks h's goroutine holds to h's
// lock and returns the inversions it finds.
func trackOrder(h *hold) []DeadlockReport {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	g := tracker.goroutines[h.gid]
	if g == nil || lockTracking.Load() == 0 {
		return nil
	}
	var found []DeadlockReport
	for _, from := range g.held {
		if r, ok := recordEdge(orderEdge{from: from, to: h}); ok {
			found = append(found, r)
		}
	}
	return found
}

// recordEdge records e (unless already known) and reports whether its
// reverse was recorded before: an inversion not yet reported. It is a
// variable so that a test can break it (and see the test fail).
var recordEdge = func(e orderEdge) (DeadlockReport, bool) {
	a, b := e.from.ref.lock, e.to.ref.lock
	if a == b {
		return DeadlockReport{}, false // recursive read locks, or a self-deadlock the stuck report shows
	}
	if tracker.order == nil {
		tracker.order = map[[2]any]orderEdge{}
	}
	if _, ok := tracker.order[[2]any{a, b}]; !ok {
		tracker.order[[2]any{a, b}] = e
	}
	rev, ok := tracker.order[[2]any{b, a}]
	if !ok || !firstReport(fmt.Sprintf("order %p %p", a, b), fmt.Sprintf("order %p %p", b, a)) {
		return DeadlockReport{}, false
	}
	return DeadlockReport{Members: []DeadlockMember{rev.member(), e.member()}}, true
}

func (e orderEdge) member() DeadlockMember {
	return DeadlockMember{Goroutine: e.to.gid, Held: e.from.ref.id(), HeldStack: formatStack(e.from.stack),
		Wanted: e.to.ref.id(), WantedStack: formatStack(e.to.stack)}
}

// firstReport reports whether none of keys was reported before, and
// marks them reported.
func firstReport(keys ...string) bool {
	if tracker.reported == nil {
		tracker.reported = map[string]bool{}
	}
	for _, k := range keys {
		if tracker.reported[k] {
			return false
		}
	}
	for _, k := range keys {
		tracker.reported[k] = true
	}
	return true
}

// state returns gid's record, making one.
func state(gid uint64) *goroutineState {
	if tracker.goroutines == nil {
		tracker.goroutines = map[uint64]*goroutineState{}
		tracker.holders = map[any][]*hold{}
	}
	g := tracker.goroutines[gid]
	if g == nil {
		g = new(goroutineState)
		tracker.goroutines[gid] = g
	}
	return g
}

// trackHeld records h: its goroutine holds its lock.
func trackHeld(h *hold) {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	if lockTracking.Load() == 0 {
		return
	}
	g := state(h.gid)
	g.held = append(g.held, h)
	tracker.holders[h.ref.lock] = append(tracker.holders[h.ref.lock], h)
}

// trackWaiting records that h's goroutine waits for h's lock (or no
// longer does).
func trackWaiting(h *hold, waiting bool) {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	if lockTracking.Load() == 0 {
		return
	}
	g := state(h.gid)
	g.waiting, g.waitStack = nil, nil
	if waiting {
		g.waiting, g.waitStack = &h.ref, h.stack
	}
	forgetIdle(h.gid, g)
}

func forgetIdle(gid uint64, g *goroutineState) {
	if len(g.held) == 0 && g.waiting == nil {
		delete(tracker.goroutines, gid)
	}
}

// trackRelease forgets one hold on lock, by the calling goroutine if it
// has one (a reader releasing its own read lock), else the oldest: a lock
// may be unlocked by another goroutine than its locker, and for an
// exclusive lock the oldest hold recorded is the one being released even
// when the unlock runs after the next holder recorded its own.
func trackRelease(lock any) {
	gid := goroutineID()
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	hs := tracker.holders[lock]
	if len(hs) == 0 {
		return // acquired before detection was on
	}
	i := slices.IndexFunc(hs, func(h *hold) bool { return h.gid == gid })
	if i < 0 {
		i = 0
	}
	h := hs[i]
	if hs = slices.Delete(hs, i, i+1); len(hs) == 0 {
		delete(tracker.holders, lock)
	} else {
		tracker.holders[lock] = hs
	}
	if g := tracker.goroutines[h.gid]; g != nil {
		if j := slices.Index(g.held, h); j >= 0 {
			g.held = slices.Delete(g.held, j, j+1)
		}
		forgetIdle(h.gid, g)
	}
}

// report logs each finding and passes it to the handler.
func report(found []DeadlockReport) {
	if len(found) == 0 {
		return
	}
	tracker.mu.Lock()
	handler := tracker.handler
	tracker.mu.Unlock()
	for _, r := range found {
		logDeadlock(r)
		if handler != nil {
			handler(r)
		}
	}
}

func logDeadlock(r DeadlockReport) {
	msg := "lockword: lock-order inversion: these goroutines took the same locks in opposite orders and can deadlock"
	if r.Cycle {
		msg = "lockword: deadlock: each goroutine waits for a lock that the next one holds"
	}
	attrs := []any{}
	for i, m := range r.Members {
		attrs = append(attrs, slog.Group("member"+strconv.Itoa(i+1),
			"goroutine", m.Goroutine,
			"held", m.Held.String(), "held_at", m.HeldStack,
			"wants", m.Wanted.String(), "wants_at", m.WantedStack))
	}
	slog.Error(msg, attrs...)
}

// goroutineID returns the calling goroutine's id, parsed from the first
// line of its traceback ("goroutine 18 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	line := string(buf[:runtime.Stack(buf[:], false)])
	line = strings.TrimPrefix(line, "goroutine ")
	if i := strings.IndexByte(line, ' '); i > 0 {
		line = line[:i]
	}
	id, _ := strconv.ParseUint(line, 10, 64)
	return id
}

// callers returns the caller's stack, the lock's own frames included
// (formatStack drops them).
func callers() []uintptr {
	pcs := make([]uintptr, 32)
	return pcs[:runtime.Callers(3, pcs)]
}

// formatStack writes a stack as a traceback does, one "function\n\tfile:line"
// per frame, from the caller of the lock's method.
func formatStack(pcs []uintptr) string {
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	inLock := true
	for {
		f, more := frames.Next()
		if inLock && strings.HasPrefix(f.Function, "github.com/lockword/lockword.(*") {
			if !more {
				break
			}
			continue
		}
		inLock = false
		fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
	return b.String()
}
