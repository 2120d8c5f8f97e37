//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockword/lockword"
)

// TestSemaphoreGuardOverwrittenUnderHold: the guard is the package's own
// lock, so a guard word overwritten while held (a corrupt region, as
// FuzzLiveWords writes it) is reported as a CorruptError by the call that
// held it, not a misuse panic: that call may be a cancelled waiter's
// withdrawal on a background goroutine, where a panic kills the process.
func TestSemaphoreGuardOverwrittenUnderHold(t *testing.T) {
	_, s := semTwo(t)
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
			r, s := semHoldingOne(t)
			s.guard.word.Store(c.word)
			var ce *lockword.CorruptError
			err := s.Acquire(context.Background(), 1)
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

// semTwo returns a new region's Semaphore "sem" of 2 permits.
func semTwo(t *testing.T) (*Region, *Semaphore) {
	t.Helper()
	r := mustCreate(t, tempRegionPath(t), 0)
	s, err := r.Semaphore("sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	return r, s
}

// semHoldingOne is semTwo with 1 permit held by this process.
func semHoldingOne(t *testing.T) (*Region, *Semaphore) {
	t.Helper()
	r, s := semTwo(t)
	if err := s.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return r, s
}

// semCall runs call on its own goroutine and returns what it returned or
// panicked with, failing the test if it has not come back in 10 s: a
// call that waits on a guard naming this process waits for ever, and must
// fail this test, not hang the test binary. 10 s is far above the few
// stores and /proc reads a corrupt-word check costs on a loaded host.
func semCall(t *testing.T, what string, call func() error) error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				e, ok := p.(error)
				if !ok {
					e = fmt.Errorf("panic: %v", p)
				}
				got <- e
			}
		}()
		got <- call()
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still waiting after 10 s on a guard word naming this process, which no goroutine of it holds", what)
		return nil
	}
}

// TestSemaphoreGuardNamesThisProcess: a stray write that leaves this
// process's own owner token in the guard word, while none of its
// goroutines holds the guard, is corruption: every call returns (or
// Release panics with) a CorruptError naming the Semaphore, promptly,
// instead of waiting for a holder that does not exist. Close, whose
// housekeeping only tries the guard, finishes.
func TestSemaphoreGuardNamesThisProcess(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(s *Semaphore) error
	}{
		{"Release", func(s *Semaphore) error { s.Release(1); return nil }},
		{"Acquire", func(s *Semaphore) error { return s.Acquire(context.Background(), 1) }},
		{"AcquireNow", func(s *Semaphore) error { _, err := s.AcquireNow(1); return err }},
		{"TryAcquire", func(s *Semaphore) error {
			if s.TryAcquire(1) {
				return errors.New("TryAcquire took a permit under a corrupt guard")
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, s := semHoldingOne(t)
			s.guard.word.Store(r.token)
			err := semCall(t, c.name, func() error { return c.call(s) })
			var ce *lockword.CorruptError
			if c.name == "TryAcquire" {
				// Its bool cannot say why: AcquireNow's case does.
				if err != nil {
					t.Fatal(err)
				}
			} else if !errors.As(err, &ce) || ce.Kind != "Semaphore" || ce.Object != "sem" {
				t.Fatalf("%s: %v, want a CorruptError naming Semaphore \"sem\"", c.name, err)
			}
			if c.name != "Release" {
				s.held.Add(-1) // as if released: Close must not refuse for it
			}
			if err := semCall(t, "Close", r.Close); err != nil {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

// TestSemaphoreGuardHeldByAnotherGoroutine: the check above must not turn
// a legitimate hold into corruption. While one goroutine holds the guard,
// the word names this process, and a second goroutine's Acquire waits for
// it and then succeeds; and goroutines of one process hammering the
// semaphore (under -race) never see a CorruptError.
func TestSemaphoreGuardHeldByAnotherGoroutine(t *testing.T) {
	_, s := semTwo(t)
	if err := s.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- s.Acquire(context.Background(), 1) }()
	// Not a timing requirement: if the Acquire has not reached the guard
	// within 50 ms, it reaches it held or free, and must succeed either way.
	select {
	case err := <-got:
		t.Fatalf("Acquire returned %v while another goroutine held the guard", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := s.unlock(false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := semCall(t, "Acquire after the guard's release", func() error { return <-got }); err != nil {
		t.Fatalf("Acquire behind a goroutine holding the guard: %v", err)
	}
	s.Release(1)

	const workers, rounds = 4, 300
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for i := range rounds {
				if err := s.Acquire(context.Background(), 1); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 && !s.TryAcquire(1) {
					s.Release(1)
					continue
				} else if i%2 == 0 {
					s.Release(1)
				}
				s.Release(1)
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := semCall(t, "hammer", func() error { return <-errs }); err != nil {
			t.Fatalf("goroutines of one process: %v", err)
		}
	}
}

// TestSemaphoreGuardTurnsToThisProcess: a guard word that a stray write
// turns to this process's token while this process waits for another
// holder (here a second Region handle, alive, holding the guard) is
// corrupt too: the wait ends with a CorruptError within a liveness slice
// or so (10 s here, for any load), not never.
func TestSemaphoreGuardTurnsToThisProcess(t *testing.T) {
	r, s := semTwo(t)
	r2, err := Open(r.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	s2, err := r2.Semaphore("sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- s.Acquire(context.Background(), 1) }()
	// Not a timing requirement: an Acquire that has not begun waiting
	// by the write finds the word naming us before it waits.
	time.Sleep(50 * time.Millisecond)
	s.guard.word.Store(r.token)
	err = semCall(t, "Acquire", func() error { return <-got })
	var ce *lockword.CorruptError
	if !errors.As(err, &ce) || ce.Kind != "Semaphore" {
		t.Fatalf("Acquire while the guard word turned to this process: %v, want a CorruptError naming the Semaphore", err)
	}
	s2.unlock(false, false, nil) // its word is not its own: a CorruptError, ignored
}
