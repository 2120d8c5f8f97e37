//go:build linux

package shm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/shm"
)

// A shm.TicketMutex serves processes in the order they asked; LockContext
// reports a holder that died holding it, as Mutex does.
func ExampleTicketMutex() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := shm.Create(filepath.Join(dir, "jobs"), 0, nil)
	defer r.Close()
	mu, _ := r.TicketMutex("queue")

	err := mu.LockContext(context.Background())
	switch {
	case errors.Is(err, lockword.ErrOwnerDead):
		// We hold the lock and must repair the data, then:
		mu.MarkConsistent()
	case err != nil:
		fmt.Println(err)
		return
	}
	fmt.Println("holding the lock; TryLock from elsewhere:", mu.TryLock())
	mu.Unlock()
	// Output: holding the lock; TryLock from elsewhere: false
}

// An RWMutex lets readers in several processes share the data while
// writers take turns; a writer's LockContext reports a writer that died
// holding it.
func ExampleRWMutex() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := shm.Create(filepath.Join(dir, "config"), 0, nil)
	defer r.Close()
	rw, _ := r.RWMutex("settings")

	rw.RLock()
	rw.RLock() // readers share it (here two in one process)
	fmt.Println("TryLock while read:", rw.TryLock())
	rw.RUnlock()
	rw.RUnlock()

	if err := rw.LockContext(context.Background()); errors.Is(err, lockword.ErrOwnerDead) {
		rw.MarkConsistent() // after repairing what the dead writer left
	} else if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("writing; TryRLock:", rw.TryRLock())
	rw.Unlock()
	// Output:
	// TryLock while read: false
	// writing; TryRLock: false
}

// A Cond lets a process wait for a change that another process makes
// to data in the region, under a shared lock.
func ExampleCond() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := shm.Create(filepath.Join(dir, "jobs"), 0, nil)
	defer r.Close()
	mu, _ := r.Mutex("jobs-lock")
	ready, _ := r.Cond("jobs-ready")
	pending, _ := r.Bytes("jobs-pending", 8) // guarded by mu

	go func() { // in real use, another process
		mu.Lock()
		binary.NativeEndian.PutUint64(pending, 3)
		mu.Unlock()
		ready.Signal()
	}()

	mu.Lock()
	for binary.NativeEndian.Uint64(pending) == 0 {
		if err := ready.WaitContext(context.Background(), mu); err != nil {
			fmt.Println(err) // ErrOwnerDead: repair, MarkConsistent
		}
	}
	fmt.Println("pending jobs:", binary.NativeEndian.Uint64(pending))
	mu.Unlock()
	// Output: pending jobs: 3
}
