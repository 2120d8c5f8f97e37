package lockword_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockword/lockword"
)

func ExampleMutex() {
	var mu lockword.Mutex // the zero value is unlocked
	total := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				mu.Lock()
				total++ // plain read-modify-write, protected by mu
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println(total)
	// Output: 8000
}

func ExampleMutex_LockContext() {
	var mu lockword.Mutex
	mu.Lock() // held elsewhere for a long time

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := mu.LockContext(ctx); errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("gave up; the lock is not ours")
	}
	mu.Unlock()
	// Output: gave up; the lock is not ours
}

func ExampleMutex_TryLock() {
	var mu lockword.Mutex
	fmt.Println(mu.TryLock())
	fmt.Println(mu.TryLock())
	mu.Unlock()
	// Output:
	// true
	// false
}

func ExampleMutex_EnableStats() {
	var mu lockword.Mutex
	mu.SetName("orders")
	mu.EnableStats()
	for range 3 {
		mu.Lock()
		mu.Unlock()
	}
	s := mu.Stats()
	fmt.Printf("%s: %d acquisitions, %.0f%% slow path\n", mu.Name(), s.Acquisitions, 100*s.SlowPathFraction())
	// Output: orders: 3 acquisitions, 0% slow path
}

func ExampleSpinMutex() {
	var mu lockword.SpinMutex
	hits := map[string]int{}
	var wg sync.WaitGroup
	for _, page := range []string{"/", "/about", "/"} {
		wg.Go(func() {
			mu.Lock()
			hits[page]++ // a short critical section: what SpinMutex is for
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Println(hits["/"], hits["/about"])
	// Output: 2 1
}

// Every lock is a sync.Locker, so it fits sync.Cond and other helpers.
func ExampleSpinMutex_asLocker() {
	var l sync.Locker = new(lockword.SpinMutex)
	l.Lock()
	l.Unlock()
	fmt.Println("ok")
	// Output: ok
}

// A TicketMutex serves waiters in the order they arrived.
func ExampleTicketMutex() {
	var mu lockword.TicketMutex
	var order []int
	mu.Lock() // hold it while the waiters line up
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
		time.Sleep(20 * time.Millisecond) // waiter i takes its ticket before i+1
	}
	mu.Unlock()
	wg.Wait()
	fmt.Println(order)
	// Output: [0 1 2]
}

// A waiter that gives up does not hold up the waiters behind it: its turn
// is passed on.
func ExampleTicketMutex_LockContext() {
	var mu lockword.TicketMutex
	mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	next := make(chan struct{})
	go func() {
		time.Sleep(20 * time.Millisecond) // queues behind the waiter that gives up
		mu.Lock()
		close(next)
	}()
	if err := mu.LockContext(ctx); errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("gave up")
	}
	mu.Unlock()
	<-next
	fmt.Println("the next waiter got the lock")
	mu.Unlock()
	// Output:
	// gave up
	// the next waiter got the lock
}

func ExampleRWMutex() {
	var mu lockword.RWMutex
	config := map[string]string{"mode": "fast"}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			mu.RLock() // many readers at once
			_ = config["mode"]
			mu.RUnlock()
		})
	}
	wg.Go(func() {
		mu.Lock() // one writer, alone
		config["mode"] = "safe"
		mu.Unlock()
	})
	wg.Wait()
	mu.RLock()
	fmt.Println(config["mode"])
	mu.RUnlock()
	// Output: safe
}

// A bounded queue of capacity 1: producers wait while it is full,
// consumers while it is empty.
func ExampleCond() {
	var mu lockword.Mutex
	notEmpty, notFull := lockword.NewCond(&mu), lockword.NewCond(&mu)
	var slot []int
	go func() {
		for i := 1; i <= 3; i++ {
			mu.Lock()
			for len(slot) == 1 {
				notFull.Wait()
			}
			slot = append(slot, i*i)
			notEmpty.Signal()
			mu.Unlock()
		}
	}()
	for range 3 {
		mu.Lock()
		for len(slot) == 0 {
			notEmpty.Wait()
		}
		fmt.Println(slot[0])
		slot = slot[:0]
		notFull.Signal()
		mu.Unlock()
	}
	// Output:
	// 1
	// 4
	// 9
}
