//go:build linux

package shm

import (
	"context"
	"errors"
	"testing"

	"github.com/lockword/lockword"
)

// TestSemaphoreGuardOverwrittenUnderHold: the guard is the package's own
// lock, so a guard word overwritten while held (a corrupt region, as
// FuzzLiveWords writes it) is reported as a CorruptError by the call that
// held it, not a misuse panic: that call may be a cancelled waiter's
// withdrawal on a background goroutine, where a panic kills the process.
func TestSemaphoreGuardOverwrittenUnderHold(t *testing.T) {
	r := mustCreate(t, tempRegionPath(t), 0)
	s, err := r.Semaphore("sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.guard.word.Store(0) // overwritten: the guard reads free
	var got error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("unlock of an overwritten guard panicked: %v", p)
			}
		}()
		_, got = s.unlock(false, false, nil)
	}()
	var ce *lockword.CorruptError
	if !errors.As(got, &ce) || ce.Kind != "Semaphore" {
		t.Fatalf("unlock of an overwritten guard: %v, want a Semaphore CorruptError", got)
	}
	// The semaphore still works once its words are sane again.
	if err := s.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	s.Release(1)
}
