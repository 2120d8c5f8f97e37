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

// TestSemaphoreGuardErrorsNameIt: a guard word that no valid history
// writes (a token of no incarnation; the not-recoverable owner, which the
// semaphore never leaves, as it marks a recovered guard consistent) is a
// CorruptError naming the Semaphore, not the shm.Mutex inside it, which
// the caller never made; and Release, whose Acquire succeeded, panics with
// it rather than hang or call it misuse.
func TestSemaphoreGuardErrorsNameIt(t *testing.T) {
	for _, c := range []struct {
		name string
		word uint32
	}{
		{"token of no incarnation", makeToken(5, 0)},
		{"not recoverable", ownerNotRecoverable},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mustCreate(t, tempRegionPath(t), 0)
			s, err := r.Semaphore("sem", 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Acquire(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			s.guard.word.Store(c.word)
			var ce *lockword.CorruptError
			err = s.Acquire(context.Background(), 1)
			if !errors.As(err, &ce) || ce.Kind != "Semaphore" || ce.Object != "sem" {
				t.Errorf("Acquire: %v, want a CorruptError naming Semaphore \"sem\"", err)
			}
			func() {
				defer func() {
					p, _ := recover().(error)
					if !errors.As(p, &ce) || ce.Kind != "Semaphore" {
						t.Errorf("Release: panicked with %v, want a CorruptError naming the Semaphore", p)
					}
				}()
				s.Release(1)
			}()
			if err := r.Close(); err != nil {
				t.Errorf("Close after Release: %v", err)
			}
		})
	}
}
