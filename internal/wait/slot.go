package wait

import (
	"context"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/lockword/lockword/internal/contention"
)

// Hand-off slots: a lock-free lane beside the parking lot for keyed waiters
// of which at most one waits under a given word and key at a time (a ticket
// lock's tickets). A waiter publishes itself in the slot of its word and
// key with one CAS; the waker finds it there with one load and takes it
// with one CAS, so a hand-off to a known waiter takes no bucket lock (the
// idea of Go's runtime semaphore handing its ticket to a known sudog).
// A waiter whose slot is occupied (another word or key hashed there) parks
// in the parking lot as WaitKey does, and WakeOne looks there too.
//
// A slot holds nil, a waiter, or slotBusy. Whoever wants to read a
// published waiter's fields or take it (WakeOne, Noted, Parked) first swaps
// it for slotBusy, so that the waiter cannot leave and be reused meanwhile,
// and then stores nil (taken) or the waiter back. The waiter itself leaves
// with a CAS from itself to nil; failing that while the slot is not busy,
// a waker took it and its token is on the way.

const (
	slotBits   = 12
	slotCount  = 1 << slotBits
	slotStride = cacheLine / 8 // keys k and k+1 of a word sit on different cache lines
)

var slots [slotCount]atomic.Pointer[waiter]

// slotBusy marks a slot whose waiter is being looked at.
var slotBusy waiter

func slotOf(addr *atomic.Uint32, key uint32) *atomic.Pointer[waiter] {
	h := uint64(uintptr(unsafe.Pointer(addr))>>2) * 0x9E3779B97F4A7C15
	return &slots[(h>>(64-slotBits)+uint64(key)*slotStride)&(slotCount-1)]
}

// pin swaps the waiter in s for slotBusy and returns it, or returns nil if
// s holds none. The caller must store it (or nil) back.
func pin(s *atomic.Pointer[waiter]) *waiter {
	for {
		p := s.Load()
		switch {
		case p == nil:
			return nil
		case p == &slotBusy:
			runtime.Gosched() // another pinner is reading a few fields
		case s.CompareAndSwap(p, &slotBusy):
			return p
		}
	}
}

// leave takes w out of s and reports whether it did; false means a waker
// took it first and its token is on the way.
func leave(s *atomic.Pointer[waiter], w *waiter) bool {
	for {
		switch p := s.Load(); {
		case p == w:
			if s.CompareAndSwap(w, nil) {
				return true
			}
		case p == &slotBusy:
			runtime.Gosched() // a pinner will put w (or nil) back
		default:
			return false
		}
	}
}

// WaitOne is WaitKeyNoted for a protocol in which at most one goroutine
// waits under a word and key at a time: it parks while *addr == val until
// WakeOne(addr, key) wakes it or ctx is done, and
// returns as Wait does. It is counted by Parked and ParkedKey and reported
// by Noted (with note and since, as WaitNoted; a nil note is none) like any
// parked waiter. Two goroutines waiting under one word and key are both
// woken in time, but not necessarily oldest first.
func WaitOne(ctx context.Context, addr *atomic.Uint32, val, key uint32, note any, since int64) error {
	w := waiterPool.Get().(*waiter)
	w.addr, w.key, w.keyed = addr, key, true
	w.note, w.since = note, since
	// Stamped before w is published, as a waker reads it once published.
	if contention.Armed() { // one load while the profile is off
		w.profNs = contention.Take(addr, note)
	}
	s := slotOf(addr, key)
	if !s.CompareAndSwap(nil, w) {
		return park(ctx, bucketOfKey(addr, key), w, val) // slot taken: the parking lot
	}
	// Published before loading the word: the waker changes the word before
	// it loads the slot, so (all atomics being sequentially consistent)
	// either we see its change or it sees us.
	if addr.Load() != val {
		if !leave(s, w) {
			<-w.ready // a waker chose us meanwhile: consume its token
		} else if w.profNs != 0 {
			contention.Arm(note) // not asleep: leave the sample to the next park
		}
		release(w)
		return nil
	}
	if note != nil && OnNotedPark != nil {
		OnNotedPark() // a scan that starts now sees w (see Noted)
	}
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	var err error
	if done == nil {
		<-w.ready
	} else {
		select {
		case <-w.ready:
		case <-done:
			if leave(s, w) {
				err = ctx.Err()
			} else {
				<-w.ready // chosen before we could leave: report the wake-up
			}
		}
	}
	release(w)
	return err
}

// WakeOne wakes the goroutine waiting on addr under key (WaitOne, or
// WaitKey as WakeKey(addr, key, 1) would) and reports whether there was
// one. Callers change the word before calling WakeOne. With nobody waiting
// in the key's slot or bucket it costs two atomic loads.
func WakeOne(addr *atomic.Uint32, key uint32) bool {
	s := slotOf(addr, key)
	if s.Load() != nil {
		if w := pin(s); w != nil {
			if w.addr == addr && w.key == key {
				s.Store(nil)
				profNs := w.profNs // w may be reused once woken
				w.ready <- struct{}{}
				if profNs != 0 {
					contention.Woken(profNs)
				}
				return true
			}
			s.Store(w) // another word's or key's waiter: leave it
		}
	}
	return wake(bucketOfKey(addr, key), addr, true, key, 1) == 1
}

// slotsNoted is Noted's pass over the slots.
func slotsNoted(f func(addr *atomic.Uint32, note any, since int64, marked bool) bool) int {
	n := 0
	for i := range slots {
		s := &slots[i]
		if s.Load() == nil {
			continue
		}
		if w := pin(s); w != nil {
			if w.note != nil {
				n++
				w.marked = f(w.addr, w.note, w.since, w.marked)
			}
			s.Store(w)
		}
	}
	return n
}

// slotsParked counts the slot waiters on addr (with key, if keyed).
func slotsParked(addr *atomic.Uint32, keyed bool, key uint32) int {
	n := 0
	count := func(s *atomic.Pointer[waiter]) {
		if s.Load() == nil {
			return
		}
		if w := pin(s); w != nil {
			if w.addr == addr && (!keyed || w.key == key) {
				n++
			}
			s.Store(w)
		}
	}
	if keyed {
		count(slotOf(addr, key))
		return n
	}
	for i := range slots {
		count(&slots[i])
	}
	return n
}
