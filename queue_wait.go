package lockword

import (
	"context"
	"math"
	"sync/atomic"

	"github.com/lockword/lockword/internal/ringindex"
	"github.com/lockword/lockword/internal/wait"
)

// wakePoppers wakes up to n parked consumers after a publish: one load on a
// busy queue. On a closed queue it wakes them all: a publish after Close
// may be the last, after which a parked consumer must wake to see the
// queue drained, and no later publish will wake it.
func (q *Queue[T]) wakePoppers(n int) {
	if q.poppers.unwoken(q.poppers.state.Load()) {
		if q.Closed() {
			q.poppers.wakeAll()
			return
		}
		q.poppers.wakeSlow(n)
	}
}

// queueWaiters are the goroutines of one side of a Queue parked until the
// other side makes progress, around one wake word and one count word.
//
//	word            written by                        read by
//	gen             every wake, +1                    a parking goroutine: it
//	                                                  parks only while gen is
//	                                                  unchanged
//	state, low 32   a goroutine announcing, +1, and   the other side after
//	(announced)     leaving, -1                       each publish (release)
//	state, high 32  a waker, +k for the k goroutines  the same; a goroutine
//	(woken)         it wakes; a goroutine leaving,    leaving
//	                -1 while above 0
//
// A release wakes only while announced > woken. A woken goroutine stays
// announced until it runs and leaves, which on a loaded machine is long
// after the wake: without the woken count, every release meanwhile made a
// wake call for it (1.69 M wake calls for 2,630 sleeps in one benchmark).
// The counts need not match identities: whichever goroutine leaves first
// takes one woken off, so woken ≤ announced always holds, and a goroutine
// still asleep is never covered by a wake-up that went to no one (a wake-up
// that finds nobody asleep belongs to a goroutine that has not parked yet:
// it loaded gen before it announced itself, so it sees gen changed).
//
// No lost wake-up: a goroutine loads gen, announces itself, and only then
// looks at the queue once more; the other side stores the slot's sequence
// and then loads state. Go's atomics are sequentially consistent, so either
// the look sees the new slot, or the other side sees the announcement and
// bumps gen, after which the park (which compares gen under the waiting
// layer's lock) does not sleep. models/queue.pml checks this protocol.
type queueWaiters struct {
	gen    atomic.Uint32
	state  atomic.Uint64 // announced | woken<<32
	sleeps atomic.Uint64 // times a goroutine parked
	wakes  atomic.Uint64 // wake calls
}

// queueWoken is one woken goroutine in queueWaiters.state.
const queueWoken = 1 << 32

// unwoken reports whether state counts an announced goroutine that no
// wake-up has been made for.
func (w *queueWaiters) unwoken(state uint64) bool {
	return uint32(state) > uint32(state>>32)
}

// announce counts the calling goroutine as parked (before it loads gen).
func (w *queueWaiters) announce() { w.state.Add(1) }

// leave withdraws an announcement, taking one woken off if any is counted.
func (w *queueWaiters) leave() {
	for {
		s := w.state.Load()
		d := uint64(1)
		if s>>32 != 0 {
			d += queueWoken
		}
		if w.state.CompareAndSwap(s, s-d) {
			return
		}
	}
}

// wake wakes up to n parked goroutines, if any is announced and not yet
// woken: one load on a busy queue.
func (w *queueWaiters) wake(n int) {
	if w.unwoken(w.state.Load()) {
		w.wakeSlow(n)
	}
}

// wakeSlow counts up to n announced goroutines as woken and, if it counted
// any (a concurrent waker may have taken them), wakes them.
//
//go:noinline
func (w *queueWaiters) wakeSlow(n int) {
	for {
		s := w.state.Load()
		k := uint64(uint32(s) - uint32(s>>32)) // announced, not yet woken
		if k == 0 {
			return
		}
		k = min(k, uint64(n))
		if w.state.CompareAndSwap(s, s+k*queueWoken) {
			w.gen.Add(1)
			w.wakes.Add(1)
			wait.Wake(&w.gen, int(k))
			return
		}
	}
}

// wakeAll wakes every parked goroutine (Close): it bumps gen whatever the
// counts say, so a goroutine already counted woken but not yet asleep on
// the old gen does not sleep either, and the woken count is not raised
// (leavers only lower it, so at worst later releases wake once more).
func (w *queueWaiters) wakeAll() {
	w.gen.Add(1)
	w.wakes.Add(1)
	wait.Wake(&w.gen, math.MaxInt32)
}

// await waits until ready reports true, or an error: ready's (the queue is
// closed), ErrNilContext, or ctx's. It yields and spins as a Ring does,
// then parks on w.
func (q *Queue[T]) await(ctx context.Context, w *queueWaiters, ready func() (bool, error)) error {
	if ctx == nil {
		return ErrNilContext
	}
	for sp := ringindex.NewSpinner(); ; {
		if ok, err := ready(); ok {
			return err
		}
		if !sp.Wait() {
			break
		}
	}
	for {
		// Load gen before announcing: a release that counts us woken
		// bumps gen after it sees the announcement, so the park below
		// cannot sleep through it. (Loaded after, it could be the bumped
		// value, and we would sleep counted woken: no release would wake
		// us again.)
		gen := w.gen.Load()
		w.announce() // announce, then look again (the Dekker pair)
		if queueAnnounceHook != nil {
			queueAnnounceHook()
		}
		if ok, err := ready(); ok {
			w.leave()
			return err
		}
		w.sleeps.Add(1)
		// A wake-up that dequeued us is reported as one even if ctx
		// ends meanwhile (internal/wait), so an error here took no
		// wake-up from another parked goroutine.
		err := wait.Wait(ctx, &w.gen, gen)
		w.leave()
		if err != nil {
			return err
		}
	}
}
