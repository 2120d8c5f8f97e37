package wait

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitOneValueMismatchReturnsAtOnce(t *testing.T) {
	var w atomic.Uint32
	w.Store(1)
	if err := WaitOne(context.Background(), &w, 0, 3, nil, 0); err != nil {
		t.Fatalf("WaitOne on a word that does not hold val: %v", err)
	}
	if n := Parked(&w); n != 0 {
		t.Fatalf("Parked = %d after a mismatched WaitOne, want 0", n)
	}
	if WakeOne(&w, 3) {
		t.Fatal("WakeOne found a waiter after a mismatched WaitOne")
	}
}

// TestWakeOneWakesOnlyItsKey: keys 0..7 wait in their slots (and, for a
// second waiter on key 0, in the parking lot: its slot is taken); each
// WakeOne wakes its key's waiter alone, and the parking-lot one is found
// too.
func TestWakeOneWakesOnlyItsKey(t *testing.T) {
	var w atomic.Uint32
	const keys = 8
	woke := make([]atomic.Int32, keys)
	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() { WaitOne(nil, &w, 0, uint32(k), nil, 0); woke[k].Add(1) })
	}
	for k := range keys {
		waitParkedKey(t, &w, uint32(k), 1)
	}
	wg.Go(func() { WaitOne(nil, &w, 0, 0, nil, 0); woke[0].Add(1) }) // slot 0 is taken
	waitParkedKey(t, &w, 0, 2)
	if n := Parked(&w); n != keys+1 {
		t.Fatalf("Parked = %d, want %d", n, keys+1)
	}
	w.Store(1)
	for k := keys - 1; k >= 1; k-- {
		if !WakeOne(&w, uint32(k)) {
			t.Fatalf("WakeOne(%d) found nobody", k)
		}
		for woke[k].Load() != 1 {
			time.Sleep(time.Millisecond)
		}
		for j := range k {
			if woke[j].Load() != 0 {
				t.Fatalf("WakeOne(%d) woke key %d", k, j)
			}
		}
	}
	if !WakeOne(&w, 0) || !WakeOne(&w, 0) {
		t.Fatal("two waiters on key 0, slot and parking lot, not both found")
	}
	wg.Wait()
	if WakeOne(&w, 0) {
		t.Fatal("WakeOne found a third waiter on key 0")
	}
}

func TestWaitOneContextCancel(t *testing.T) {
	var w atomic.Uint32
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := WaitOne(ctx, &w, 0, 5, nil, 0); err != context.DeadlineExceeded {
		t.Fatalf("WaitOne = %v, want DeadlineExceeded", err)
	}
	if n := Parked(&w); n != 0 {
		t.Fatalf("cancelled waiter still parked: %d", n)
	}
	if WakeOne(&w, 5) {
		t.Fatal("WakeOne found a waiter after cancellation")
	}
}

// TestCancelNeverSwallowsWakeOne races cancellations, wake-ups and
// diagnostic scans (which pin slots): every wake-up WakeOne reports must
// reach a waiter that returns nil, and a waiter that returns nil was woken.
func TestCancelNeverSwallowsWakeOne(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 200
	}
	var w atomic.Uint32
	for range rounds {
		cancelWakeRound(t, "WakeOne",
			func(ctx context.Context, i int) error { return WaitOne(ctx, &w, 0, uint32(i), i, 0) },
			func() { waitParkedKeys(t, &w) },
			func(i int) int {
				if WakeOne(&w, uint32(i)) {
					return 1
				}
				return 0
			},
			cancelToo,
			func(*cancellable, int) {
				Noted(func(*atomic.Uint32, any, int64, bool) bool { return true })
				Parked(&w)
			})
	}
}

// TestWakeOneNotLostAcrossValueChange: two goroutines hand a word back and
// forth, each waiting (WaitOne) for the value it needs, keyed by it; the
// other changes the word and then wakes that key. A lost wake-up hangs.
func TestWakeOneNotLostAcrossValueChange(t *testing.T) {
	rounds := 20000
	if testing.Short() {
		rounds = 2000
	}
	var w atomic.Uint32
	var wg sync.WaitGroup
	for side := range uint32(2) {
		wg.Go(func() {
			for i := uint32(side); i < uint32(rounds); i += 2 {
				for v := w.Load(); v != i; v = w.Load() {
					WaitOne(nil, &w, v, i, nil, 0)
				}
				w.Store(i + 1)
				WakeOne(&w, i+1)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // a lost wake-up hangs for ever; 60 s is far beyond any load
		t.Fatalf("hand-off stalled at %d: a wake-up was lost", w.Load())
	}
}

func TestWaitOneNoted(t *testing.T) {
	var word atomic.Uint32
	var hooked atomic.Int32
	OnNotedPark = func() { hooked.Add(1) }
	defer func() { OnNotedPark = nil }()
	note := &struct{ s string }{"n"}
	done := make(chan struct{})
	go func() { WaitOne(nil, &word, 0, 9, note, 42); close(done) }()
	waitParkedKey(t, &word, 9, 1)
	for hooked.Load() != 1 { // OnNotedPark runs just after the waiter is visible
		time.Sleep(time.Millisecond)
	}
	look := notedLook(&word, note, 42)
	checkNotedMark(t, look)
	word.Store(1)
	if !WakeOne(&word, 9) {
		t.Fatal("WakeOne found nobody")
	}
	<-done
	if seen, _ := look(false); seen != 0 {
		t.Fatalf("a woken waiter is still noted (%d)", seen)
	}
}
