//go:build linux

package lockword_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockword/lockword"
)

func ExampleOpenOrCreateRegion() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders") // or just "orders": /dev/shm/orders

	// Every process runs the same lines; exactly one creates the file.
	r, err := lockword.OpenOrCreateRegion(path, 0, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	mu, _ := r.Mutex("orders-lock")
	total, _ := r.Bytes("orders-total", 8) // the data the lock protects

	mu.Lock()
	n := binary.NativeEndian.Uint64(total)
	binary.NativeEndian.PutUint64(total, n+1)
	mu.Unlock()
	fmt.Println(binary.NativeEndian.Uint64(total))
	// Output: 1
}

// LockContext tells the caller when the previous holder died while holding
// the lock, so that it can repair the data before marking it consistent.
func ExampleSharedMutex_LockContext() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := lockword.CreateRegion(filepath.Join(dir, "jobs"), 0, nil)
	defer r.Close()
	mu, _ := r.Mutex("queue")

	err := mu.LockContext(context.Background())
	switch {
	case errors.Is(err, lockword.ErrOwnerDead):
		// We hold the lock; the data may be half updated: repair it
		// (roll back from an intent record, say), then:
		mu.MarkConsistent()
	case err != nil:
		fmt.Println(err) // ErrNotRecoverable, or the context's error
		return
	}
	fmt.Println("holding the lock")
	mu.Unlock()
	// Output: holding the lock
}

// With a repair function, the sync.Locker methods handle owner death too.
func ExampleSharedMutex_SetRepair() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := lockword.CreateRegion(filepath.Join(dir, "jobs"), 0, nil)
	defer r.Close()
	mu, _ := r.Mutex("queue")
	mu.SetRepair(func() error {
		// Runs holding the lock, only after a holder died holding it.
		return nil
	})
	mu.Lock()
	mu.Unlock()
	fmt.Println("ok")
	// Output: ok
}

func ExampleInspectRegion() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders")
	r, _ := lockword.CreateRegion(path, 0, nil)
	defer r.Close()
	mu, _ := r.Mutex("orders-lock")
	mu.Lock()
	info, _ := lockword.InspectRegion(path)
	for _, o := range info.Objects {
		fmt.Println(o.Name, o.Kind, o.State, o.HolderPID == os.Getpid(), o.HolderAlive)
	}
	mu.Unlock()
	// Output: orders-lock mutex held true true
}
