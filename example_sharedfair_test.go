//go:build linux

package lockword_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockword/lockword"
)

// A SharedTicketMutex serves processes in the order they asked; LockContext
// reports a holder that died holding it, as SharedMutex does.
func ExampleSharedTicketMutex() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := lockword.CreateRegion(filepath.Join(dir, "jobs"), 0, nil)
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
