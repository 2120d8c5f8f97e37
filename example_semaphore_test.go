package lockword_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
)

// At most 2 of 6 jobs run at once: each takes a permit before it starts and
// gives it back when it ends, whatever happens in between.
func ExampleSemaphore() {
	jobs := lockword.NewSemaphore(2)
	var running, most atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if err := jobs.Acquire(context.Background(), 1); err != nil {
				return // only a nil context or a bad weight fail here
			}
			defer jobs.Release(1)
			n := running.Add(1)
			lockword.UpdateMax(&most, n)
			time.Sleep(time.Millisecond) // the job
			running.Add(-1)
		})
	}
	wg.Wait()
	fmt.Println("at most", most.Load(), "at once; free again:", jobs.Free())
	// Output: at most 2 at once; free again: 2
}

// A large request waits its turn: small ones that arrive after it queue
// behind it even while permits are free, so it is never starved. A wait
// that ends with the context holds nothing.
func ExampleSemaphore_Acquire() {
	pool := lockword.NewSemaphore(4)
	pool.Acquire(context.Background(), 3) // three busy

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := pool.Acquire(ctx, 4) // all four: waits for the three
	fmt.Println(errors.Is(err, context.DeadlineExceeded), pool.Free())

	err = pool.Acquire(context.Background(), 5)
	fmt.Println(errors.Is(err, lockword.ErrWeight), err)
	pool.Release(3)
	// Output:
	// true 1
	// true lockword: semaphore weight 5 exceeds its capacity 4 (it could never be granted)
}
