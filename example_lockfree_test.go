package lockword_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword"
)

// A producer hands items to a consumer; Close ends the stream and the
// consumer drains what is left before it sees ErrRingClosed.
func ExampleRing() {
	ring, err := lockword.NewRing[string](8)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	go func() { // the producer
		for _, w := range []string{"wait-free", "single", "producer", "single", "consumer"} {
			if err := ring.Push(ctx, w); err != nil {
				panic(err)
			}
		}
		ring.Close()
	}()
	for { // the consumer
		w, err := ring.Pop(ctx)
		if errors.Is(err, lockword.ErrRingClosed) {
			break
		}
		fmt.Print(w, " ")
	}
	fmt.Println()
	// Output: wait-free single producer single consumer
}

// TryPush and TryPop never wait; they report a full or empty ring instead.
func ExampleRing_TryPush() {
	ring, _ := lockword.NewRing[int](2)
	fmt.Println(ring.TryPush(1), ring.TryPush(2), ring.TryPush(3))
	v, ok := ring.TryPop()
	fmt.Println(v, ok, ring.Len())
	// Output:
	// true true false
	// 1 true 1
}

// Batches move many items per index update: the fast way through a ring.
func ExampleRing_PushSlice() {
	ring, _ := lockword.NewRing[int](64)
	ctx := context.Background()
	go func() {
		batch := make([]int, 100)
		for i := range batch {
			batch[i] = i + 1
		}
		ring.PushSlice(ctx, batch) // waits for room as the consumer drains
		ring.Close()
	}()
	sum, buf := 0, make([]int, 32)
	for {
		n, err := ring.PopSlice(ctx, buf)
		if err != nil {
			break
		}
		for _, v := range buf[:n] {
			sum += v
		}
	}
	fmt.Println(sum)
	// Output: 5050
}

// A read-mostly snapshot: readers never block the writer and never see a
// half-written value.
func ExampleSeqLock() {
	type limits struct {
		RequestsPerSecond int64
		Burst             int64
	}
	cfg, err := lockword.NewSeqLock(limits{RequestsPerSecond: 100, Burst: 10})
	if err != nil {
		panic(err)
	}
	cfg.Store(limits{RequestsPerSecond: 500, Burst: 50}) // the one writer
	l := cfg.Load()                                      // any number of readers
	fmt.Println(l.RequestsPerSecond, l.Burst)
	// Output: 500 50
}

// Only plain data fits in a SeqLock: a raw copy must never carry a pointer.
func ExampleNewSeqLock_pointers() {
	type quote struct {
		Price  int64
		Symbol string
	}
	_, err := lockword.NewSeqLock(quote{})
	fmt.Println(errors.Is(err, lockword.ErrHasPointers))
	fmt.Println(err)
	// Output:
	// true
	// lockword: type holds pointers: NewSeqLock[lockword_test.quote]: field Symbol is a string; a seqlock copies its value as raw memory words, which must not carry pointers (use numbers, bools and fixed-size arrays)
}

// An atomic counter replaces a mutex around an integer. Before:
//
//	var mu sync.Mutex
//	var hits int
//	...
//	mu.Lock()
//	hits++
//	mu.Unlock()
//
// After: one atomic add, no lock, nobody ever waits.
func Example_atomicCounter() {
	var hits atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				hits.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println(hits.Load())
	// Output: 8000
}

// Update is the CAS loop for updates that Add cannot express: here a
// counter that saturates at a ceiling.
func ExampleUpdate() {
	var credits atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				lockword.Update(&credits, func(c int64) int64 { return min(c+3, 1000) })
			}
		})
	}
	wg.Wait()
	fmt.Println(credits.Load())
	// Output: 1000
}

// UpdateIf refuses updates whose condition fails: take a ticket unless
// none are left.
func ExampleUpdateIf() {
	var tickets atomic.Int32
	tickets.Store(2)
	take := func(n int32) (int32, bool) { return n - 1, n > 0 }
	for range 3 {
		_, left, ok := lockword.UpdateIf(&tickets, take)
		fmt.Println(ok, left)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}

// UpdateMax keeps a high-water mark that many goroutines feed.
func ExampleUpdateMax() {
	var peak atomic.Int64
	var wg sync.WaitGroup
	for _, depth := range []int64{3, 17, 9, 12} {
		wg.Go(func() { lockword.UpdateMax(&peak, depth) })
	}
	wg.Wait()
	fmt.Println(peak.Load())
	// Output: 17
}
