//go:build linux

package shm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockword/lockword"
)

// semFlip XORs the 8 bytes at off in the semaphore object with 0xA5, as
// a stray write would (the new user's reproduction).
func semFlip(s *Semaphore, off uint64) {
	for i := range uint64(8) {
		s.obj[off+i] ^= 0xA5
	}
}

// semInspectState returns the state that Inspect gives the semaphore.
func semInspectState(t *testing.T, path string) string {
	t.Helper()
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range info.Objects {
		if o.Name == "sem" {
			return o.State
		}
	}
	t.Fatal("Inspect: no object sem")
	return ""
}

// TestSharedSemaphoreCorruptEntryAgrees: a stray write into any entry or
// count is ErrCorrupt for Acquire (once a full check is due: at most
// ownerCheckInterval later), holding nothing and without a later panic,
// never a recovery of impossible permits; and Inspect calls the object
// corrupt as the API does.
func TestSharedSemaphoreCorruptEntryAgrees(t *testing.T) {
	defer watchdog("shared semaphore corrupt entry", 2*time.Minute)()
	cases := []struct {
		name string
		poke func(s *Semaphore)
	}{
		{"own slot's entry (held and token)", func(s *Semaphore) { semFlip(s, semSlotOff(s.r.slot)) }},
		{"another slot's entry (held and token)", func(s *Semaphore) { semFlip(s, semSlotOff(s.r.slot+2)) }},
		{"another slot's entry (ticket and want)", func(s *Semaphore) { semFlip(s, semSlotOff(s.r.slot+3)+semSlotTicket) }},
		{"waiters word", func(s *Semaphore) { semFlip(s, semObjWaiters) }},
		// Only the guarded checks see this one (a plausible ticket in an
		// entry that names no process): inspect must run them too.
		{"free slot's ticket alone", func(s *Semaphore) { word32(s.obj, semSlotOff(s.r.slot+3)+semSlotTicket).Store(43) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, sems := semHandles(t, 1, 4)
			s := sems[0]
			if err := s.Acquire(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			c.poke(s)
			// A process validates every entry at least every
			// ownerCheckInterval (its own at every call): let one pass.
			time.Sleep(ownerCheckInterval)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.Acquire(ctx, 1)
			if !errors.Is(err, lockword.ErrCorrupt) {
				t.Errorf("Acquire: %v, want lockword.ErrCorrupt", err)
			}
			if st := semInspectState(t, path); st != "corrupt" {
				t.Errorf("Inspect: state %q, want corrupt (as the API)", st)
			}
			if err == nil {
				s.Release(1)
			}
			t.Log(err)
		})
	}
}

// TestSharedSemaphoreCorruptCapacity: a corrupt capacity word is
// ErrCorrupt for (*Region).Semaphore, not ErrPermitsMismatch.
func TestSharedSemaphoreCorruptCapacity(t *testing.T) {
	_, sems := semHandles(t, 1, 4)
	s := sems[0]
	if err := s.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	semFlip(s, semObjPermits)
	_, err := s.r.Semaphore("other", 4) // a new object: the region still works
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(s.r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	_, err = r2.Semaphore("sem", 4)
	if !errors.Is(err, lockword.ErrCorrupt) || errors.Is(err, ErrPermitsMismatch) {
		t.Fatalf("Semaphore over a corrupt capacity: %v, want lockword.ErrCorrupt", err)
	}
	t.Log(err)
}

// TestInspectSemaphoreBusyNotCorrupt: the checks that Inspect makes on a
// snapshot never call a valid semaphore corrupt, neither one whose guard
// holder stopped halfway through a change (its entry's held raised, in
// use not yet: only the guard's next holder can judge it), nor one in use
// by acquirers while Inspect's checks read it (a few hundred rounds: no
// timing assumption, a slow machine only runs fewer of them concurrently).
func TestInspectSemaphoreBusyNotCorrupt(t *testing.T) {
	path, sems := semHandles(t, 2, 4)
	s := sems[0]
	if err := s.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.own(&semRecovery{})
	word32(s.me, semSlotHeld).Store(1) // a take stopped after its first store
	if st := semInspectState(t, path); st == "corrupt" {
		t.Errorf("Inspect of a semaphore whose guard holder is halfway through a take: corrupt, want a valid state")
	}
	word32(s.obj, semObjInUse).Store(1) // the take's second store: now whole
	s.count(1, true)
	s.unlock(false, true, nil)
	s.Release(1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	for _, h := range sems {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				if err := h.Acquire(ctx, 2); err == nil {
					h.Release(2)
				}
			}
		}()
	}
	for range 300 {
		if reason := semInspectReason(s.obj); reason != "" {
			t.Fatalf("Inspect's checks of a busy, valid semaphore: corrupt (%s)", reason)
		}
	}
	cancel()
	<-done
	<-done
}
