package lockword

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// A handoffKind is a lock with a starvation hand-off, with what the
// white-box tests below need of its word: the hand-off bit, and a starving
// waiter's steps as its lock loop takes them: counting itself (the word
// it stores), claiming a hand-off, leaving with its context ended.
type handoffKind struct {
	name    string
	new     func() ctxLocker
	word    func(ctxLocker) *atomic.Uint32
	handoff uint32
	starve  func(s uint32) uint32
	claim   func(s uint32) uint32
	leave   func(ctxLocker)
}

// handoffKinds are Mutex and SpinMutex.
var handoffKinds = []handoffKind{
	{
		"Mutex", func() ctxLocker { return new(Mutex) },
		func(l ctxLocker) *atomic.Uint32 { return &l.(*Mutex).state },
		mutexHandoff,
		func(s uint32) uint32 { return s&^mutexStateMask | mutexContended + mutexStarver },
		func(s uint32) uint32 { return s - mutexHandoff - mutexStarver },
		func(l ctxLocker) { l.(*Mutex).leaveStarving() },
	},
	{
		"SpinMutex", func() ctxLocker { return new(SpinMutex) },
		func(l ctxLocker) *atomic.Uint32 { return &l.(*SpinMutex).state },
		spinHandoff,
		func(s uint32) uint32 { return s + spinStarver },
		func(s uint32) uint32 { return s&^spinHandoff - spinStarver },
		func(l ctxLocker) { l.(*SpinMutex).leaveStarving() },
	},
}

// handedOff returns a lock of kind k, handed off by an Unlock while n
// starving waiters were counted in its word but none was asleep yet (each
// has just counted itself, as its lock loop does before it sleeps), so
// that the Unlock woke nobody.
func handedOff(k handoffKind, n int) (ctxLocker, *atomic.Uint32) {
	l := k.new()
	w := k.word(l)
	l.Lock()
	for range n {
		w.Store(k.starve(w.Load()))
	}
	l.Unlock()
	return l, w
}

// queueLocker starts a goroutine that locks l, closes the returned channel
// and unlocks, and returns once it sleeps on word.
func queueLocker(l ctxLocker, word *atomic.Uint32) <-chan struct{} {
	got := make(chan struct{})
	go func() { l.Lock(); close(got); l.Unlock() }()
	for wait.Parked(word) == 0 {
		time.Sleep(100 * time.Microsecond) // lets it run and sleep
	}
	return got
}

// TestHandoffWaitsForCountedStarver: an Unlock that hands the lock to a
// starving waiter counted in the word but not yet asleep (it has just
// counted itself, as its lock loop does before it sleeps) finds nobody to
// wake. The lock must stay handed off, held for that waiter, which claims
// it at its next look. A take-back instead released it, and the SPIN model
// (models/spinmutex.pml) shows why that breaks the bound: by the time the
// take-back looks, the waiter may have claimed, unlocked and handed off to
// a second starving waiter, and the take-back releases that hand-off to
// whoever comes first. No timing assumption: the steps run in sequence.
func TestHandoffWaitsForCountedStarver(t *testing.T) {
	for _, k := range handoffKinds {
		t.Run(k.name, func(t *testing.T) {
			defer watchdog("hand-off to a counted starving waiter", time.Minute)()
			l, w := handedOff(k, 1)
			if s := w.Load(); s&k.handoff == 0 {
				t.Fatalf("word %#x after Unlock: the hand-off to a counted starving waiter was taken back, the lock is free to any newcomer while that waiter starves", s)
			}
			if l.TryLock() {
				t.Fatal("TryLock took a lock handed off to a starving waiter")
			}
			got := queueLocker(l, w) // a plain locker queues behind
			s := w.Load()
			if !w.CompareAndSwap(s, k.claim(s)) { // the starving waiter claims
				t.Fatalf("word %#x changed under the claim", s)
			}
			l.Unlock()
			<-got
			if s := w.Load(); s != 0 {
				t.Fatalf("word %#x at rest, want 0", s)
			}
		})
	}
}

// TestCancelledStarverReleasesHandoff: a starving waiter whose context
// ends after a hand-off was made to it (the wake-up found it not yet
// asleep) must release the lock if it was the last starving waiter
// counted, and wake a plain sleeper; while another starving waiter is
// counted, the hand-off stays for that one. A lock handed to nobody would
// strand the plain locker (the watchdog).
func TestCancelledStarverReleasesHandoff(t *testing.T) {
	for _, k := range handoffKinds {
		t.Run(k.name, func(t *testing.T) {
			defer watchdog("cancelled starving waiters", time.Minute)()
			l, w := handedOff(k, 2)
			got := queueLocker(l, w)
			k.leave(l) // one leaves: the other will claim
			if s := w.Load(); s&k.handoff == 0 {
				t.Fatalf("word %#x: the hand-off was released while a starving waiter is still counted", s)
			}
			k.leave(l) // the last leaves: nobody will claim
			select {
			case <-got:
			case <-time.After(10 * time.Second): // a wake-up takes microseconds; 10 s is a loaded host's margin
				t.Fatalf("word %#x: the last starving waiter left and the plain locker did not get the lock", w.Load())
			}
			if s := w.Load(); s != 0 {
				t.Fatalf("word %#x at rest, want 0", s)
			}
		})
	}
}
