//go:build linux

package shm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockword/lockword/shm"
)

// Cap the jobs that use the machine's GPUs at four, across every process
// on the host: each job takes the permits it needs and gives them back.
// A process killed while it holds permits does not leak them: a later
// Acquire takes them back and says so with ErrOwnerDead, holding what it
// asked for (there is nothing to mark consistent).
func ExampleRegion_Semaphore() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, err := shm.OpenOrCreate(filepath.Join(dir, "host"), 0, nil) // or just "host": /dev/shm/host
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	gpus, err := r.Semaphore("gpus", 4) // the same count in every process
	if err != nil {
		fmt.Println(err) // ErrPermitsMismatch: made with another count
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var dead *shm.SemaphoreOwnerDeadError
	switch err := gpus.Acquire(ctx, 3); {
	case errors.As(err, &dead):
		fmt.Printf("took back %d permits of dead PID %d\n", dead.Permits, dead.PID) // and we hold 3
	case err != nil:
		fmt.Println(err) // the context ended: nothing held
		return
	}
	fmt.Println("held:", gpus.Held(), "of", gpus.Capacity())
	fmt.Println("two more now?", gpus.TryAcquire(2))
	gpus.Release(3)
	fmt.Println("held:", gpus.Held())
	// Output:
	// held: 3 of 4
	// two more now? false
	// held: 0
}
