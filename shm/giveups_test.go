//go:build linux

package shm

import (
	"context"
	"errors"
	"github.com/lockword/lockword"
	"testing"
	"time"
)

// TestSharedStatsCountGiveUps: the shared locks count the LockContext
// (and RLockContext) calls that waited and gave up, as the in-process
// locks do, in the region's statistics that every process sums into.
// What the code guarantees, and so what is asserted whatever the load: a
// give-up's recorded wait is positive and no longer than the call that
// made it, as the test measures around it. (A Mutex keeps the
// longest give-up to the microsecond and no total: see Stats.)
func TestSharedStatsCountGiveUps(t *testing.T) {
	type statsLock interface {
		EnableStats()
		Stats() lockword.Stats
		Lock()
		LockContext(context.Context) error
	}
	kinds := []struct {
		name    string
		open    func(r *Region) (statsLock, error)
		reader  bool // give up in RLockContext (the lock is an RWMutex)
		noTotal bool
	}{
		{name: "SharedMutex", noTotal: true, open: func(r *Region) (statsLock, error) { return r.Mutex("m") }},
		{name: "SharedTicketMutex", open: func(r *Region) (statsLock, error) { return r.TicketMutex("m") }},
		{name: "SharedRWMutex writer", open: func(r *Region) (statsLock, error) { return r.RWMutex("m") }},
		{name: "SharedRWMutex reader", reader: true, open: func(r *Region) (statsLock, error) { return r.RWMutex("m") }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			r := mustCreate(t, tempRegionPath(t), 0)
			l, err := k.open(r)
			if err != nil {
				t.Fatal(err)
			}
			l.EnableStats()
			giveUp, stats, hold := l.LockContext, l.Stats, l.Lock
			if k.reader {
				giveUp = l.(*RWMutex).RLockContext
			}
			hold() // held by this goroutine: the calls below wait, then give up
			var longest time.Duration
			for range 2 {
				began := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
				err := giveUp(ctx)
				cancel()
				longest = max(longest, time.Since(began))
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("a wait for a held lock: %v, want DeadlineExceeded", err)
				}
			}
			s := stats()
			if s.GiveUps != 2 || s.GiveUpWaitMax <= 0 || s.GiveUpWaitMax > longest ||
				(!k.noTotal && (s.GiveUpWaitTotal < s.GiveUpWaitMax || s.GiveUpWaitTotal > 2*longest)) {
				t.Errorf("after two timed-out waits, the longest %v: %+v", longest, s)
			}
			if s.Acquisitions != 1 {
				t.Errorf("give-ups counted as acquisitions: %+v", s)
			}
		})
	}
}
