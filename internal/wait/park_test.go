package wait

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitValueMismatchReturnsAtOnce(t *testing.T) {
	var w atomic.Uint32
	w.Store(1)
	if err := Wait(context.Background(), &w, 0); err != nil {
		t.Fatalf("Wait on a word that does not hold val: %v", err)
	}
	if n := Parked(&w); n != 0 {
		t.Fatalf("Parked = %d after a mismatched Wait, want 0", n)
	}
}

func TestWakeWithoutWaiters(t *testing.T) {
	var w atomic.Uint32
	if n := Wake(&w, 1); n != 0 {
		t.Fatalf("Wake with no waiters = %d", n)
	}
	if n := Wake(&w, 0); n != 0 {
		t.Fatalf("Wake(0) = %d", n)
	}
}

// waitParked polls until n goroutines are parked on w.
func waitParked(t *testing.T, w *atomic.Uint32, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for Parked(w) != n {
		if time.Now().After(deadline) {
			t.Fatalf("parked = %d, want %d", Parked(w), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWakeOneAtATimeInFIFOOrder(t *testing.T) {
	var w atomic.Uint32
	const n = 5
	order := make(chan int, n)
	for i := range n {
		go func() {
			if err := Wait(nil, &w, 0); err != nil {
				t.Error(err)
			}
			order <- i
		}()
		waitParked(t, &w, i+1) // enqueue in a known order
	}
	for i := range n {
		if got := Wake(&w, 1); got != 1 {
			t.Fatalf("Wake = %d, want 1", got)
		}
		if got := <-order; got != i {
			t.Fatalf("woke waiter %d, want %d (FIFO)", got, i)
		}
	}
}

func TestWakeAllAndOnlyThisWord(t *testing.T) {
	// Many words share buckets (there are 256): Wake must leave waiters
	// of other words in place.
	words := make([]atomic.Uint32, 600)
	var wg sync.WaitGroup
	for i := range words {
		wg.Go(func() { Wait(nil, &words[i], 0) })
	}
	for i := range words {
		waitParked(t, &words[i], 1)
	}
	for i := range words {
		if n := Wake(&words[i], 1<<30); n != 1 {
			t.Fatalf("Wake(word %d) = %d, want 1", i, n)
		}
		if i+1 < len(words) && Parked(&words[i+1]) != 1 {
			t.Fatalf("waking word %d disturbed word %d", i, i+1)
		}
	}
	wg.Wait()
}

func TestWaitContextCancel(t *testing.T) {
	var w atomic.Uint32
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := Wait(ctx, &w, 0)
	if err != context.DeadlineExceeded {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("returned after %v, before the deadline", d)
	}
	if n := Parked(&w); n != 0 {
		t.Fatalf("cancelled waiter still queued: Parked = %d", n)
	}
	if n := Wake(&w, 1); n != 0 {
		t.Fatalf("Wake found %d waiters after cancellation", n)
	}
}

// TestCancelNeverSwallowsWake races cancellations against wake-ups. Every
// wake-up that Wake reports must reach a waiter that returns nil: a waiter
// that returns ctx.Err() must not have been counted by Wake.
func TestCancelNeverSwallowsWake(t *testing.T) {
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	var w atomic.Uint32
	for range rounds {
		const waiters = 8
		var woken atomic.Int32
		var wg sync.WaitGroup
		ctxs := make([]context.CancelFunc, waiters)
		for i := range waiters {
			ctx, cancel := context.WithCancel(context.Background())
			ctxs[i] = cancel
			wg.Go(func() {
				if Wait(ctx, &w, 0) == nil {
					woken.Add(1)
				}
			})
		}
		waitParked(t, &w, waiters)
		var reported atomic.Int32
		var race sync.WaitGroup
		for i := range waiters {
			race.Go(func() {
				if rand.IntN(2) == 0 {
					ctxs[i]()
				} else {
					reported.Add(int32(Wake(&w, 1)))
				}
			})
		}
		race.Wait()
		// Release the rest so the round ends.
		for i := range waiters {
			ctxs[i]()
		}
		wg.Wait()
		if r, got := reported.Load(), woken.Load(); got != r {
			t.Fatalf("Wake reported %d wake-ups but %d waiters returned woken", r, got)
		}
	}
}

func BenchmarkWakeEmpty(b *testing.B) {
	var w atomic.Uint32
	for b.Loop() {
		Wake(&w, 1)
	}
}

func BenchmarkParkUnpark(b *testing.B) {
	// Ping-pong between two goroutines through two words: the cost of one
	// park plus one wake-up.
	var ping, pong atomic.Uint32
	done := make(chan struct{})
	go func() {
		for i := uint32(1); ; i++ {
			for ping.Load() < i {
				if Wait(nil, &ping, i-1) != nil {
					return
				}
			}
			select {
			case <-done:
				return
			default:
			}
			pong.Store(i)
			Wake(&pong, 1)
		}
	}()
	i := uint32(0)
	for b.Loop() {
		i++
		ping.Store(i)
		Wake(&ping, 1)
		for pong.Load() < i {
			Wait(nil, &pong, i-1)
		}
	}
	close(done)
	ping.Store(i + 1)
	Wake(&ping, 1)
}
