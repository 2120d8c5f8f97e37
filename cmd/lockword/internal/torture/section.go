package torture

// The critical section of the counter experiment and its checks: a plain
// counter that loses updates without mutual exclusion, and an owner slot
// set on entry and verified on exit (the Linux kernel's locktorture, Go's
// HammerMutex).

import (
	"runtime"
	"sync/atomic"
)

// ownerFree is the owner slot's value when no worker is inside; otherwise
// the slot holds the 1-based id of the worker inside.
const ownerFree = 0

// An arena is the data the critical section protects. counter and owner
// are plain ints on purpose: an atomic counter would hide the lost updates
// that prove a lock broken. Only violations, which is counted by whoever
// finds a violation, whether or not the lock works, is atomic.
type arena struct {
	counter    int64  // sum of every worker's additions
	owner      int    // ownerFree, or the id of the worker inside
	sink       uint64 // busy work's result, kept so that the compiler cannot drop the work
	violations atomic.Int64
}

// section is the critical section of the real locks. The race detector
// instruments it, so under -race it checks the lock's happens-before edges
// as well as our invariants. sectionUnprotected must stay identical to it
// apart from the go:norace directive (TestSectionsAgree checks that they
// compute the same). yield calls runtime.Gosched in the middle of the
// read-modify-write (see sectionUnprotected); real kinds pass false.
func (a *arena) section(id int, value int64, steps int, yield bool) {
	if a.owner != ownerFree {
		// Someone is inside, or left without clearing the slot.
		a.violations.Add(1)
	}
	a.owner = id
	v := a.counter // read...
	if yield {
		runtime.Gosched()
	}
	// busyWork is never inlined: besides lengthening the hold, the call
	// makes the compiler assume memory changed, so the owner check below
	// reloads the slot rather than reusing the id it just stored.
	a.sink = busyWork(a.sink, steps)
	a.counter = v + value // ...write back: additions made since the read are lost
	if a.owner != id {
		// Someone else entered while we were inside.
		a.violations.Add(1)
	}
	a.owner = ownerFree
}

// sectionUnprotected is section for locks that do not exclude: the none
// kind. Its unsynchronized accesses to the arena are the point of that kind,
// and the race detector would report them and fail every -race run, so the
// go:norace directive compiles this copy without race instrumentation
// (it works in any package, not only the runtime; the compiler also never
// inlines a go:norace function into an instrumented caller). The real
// kinds use the instrumented copy, section, so -race still checks them.
// The body must stay identical to section's.
//
// The none kind passes yield=true: runtime.Gosched between the read and the
// write-back widens the window, exactly as a holder preempted inside its
// critical section would, so that the lost updates and owner-slot
// violations show up reliably even with few additions on two cores, or on
// one.
//
//go:norace
func (a *arena) sectionUnprotected(id int, value int64, steps int, yield bool) {
	if a.owner != ownerFree {
		a.violations.Add(1)
	}
	a.owner = id
	v := a.counter
	if yield {
		runtime.Gosched()
	}
	a.sink = busyWork(a.sink, steps)
	a.counter = v + value
	if a.owner != id {
		a.violations.Add(1)
	}
	a.owner = ownerFree
}

// busyWork stands for the work a real critical section does: steps rounds
// of a 64-bit linear congruential generator on x, returned so that the
// compiler cannot drop them. It is never inlined, so that a call to it is a
// point where the compiler must assume memory changed (see section).
//
//go:noinline
func busyWork(x uint64, steps int) uint64 {
	for range steps {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}
