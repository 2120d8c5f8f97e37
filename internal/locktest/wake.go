package locktest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// The wake-latency check of the root package and of package shm: see
// wakelatency_test.go in the root for what it proves and its timing
// assumption.

// Hand-over counts and times.
const (
	WakeHandovers = 101
	WakeAttempts  = 3
	WakeHold      = 300 * time.Microsecond
	WakeSampleCap = 20 * time.Millisecond
)

// WakeCase is one lock's hand-over: the holder's lock and unlock, and the
// waiter's cancellable lock and its unlock.
type WakeCase struct {
	Lock, Unlock func()
	Wait         func(context.Context) error
	WaitUnlock   func()
}

// ContextLocker is a lock whose Lock has a cancellable twin.
type ContextLocker interface {
	sync.Locker
	LockContext(context.Context) error
}

// ExclusiveWake is the WakeCase of an exclusive lock: holder takes and
// releases it, waiter waits in LockContext (holder and waiter are one
// lock, or two handles on one shared lock).
func ExclusiveWake(holder, waiter ContextLocker) WakeCase {
	return WakeCase{Lock: holder.Lock, Unlock: holder.Unlock, Wait: waiter.LockContext, WaitUnlock: waiter.Unlock}
}

// WakeKind is a lock under test with its median bound.
type WakeKind struct {
	Name  string
	Bound time.Duration
	New   func(t *testing.T) WakeCase
}

// CheckWakeLatency runs every kind's hand-overs as a subtest and fails
// one whose median Unlock-to-waiter-running latency stays above its bound
// in WakeAttempts attempts.
func CheckWakeLatency(t *testing.T, kinds []WakeKind) {
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			var med time.Duration
			var lat []time.Duration
			for attempt := 1; attempt <= WakeAttempts; attempt++ {
				lat = measureWakeLatency(t, k.New(t), k.Bound)
				med = lat[len(lat)/2]
				if med <= k.Bound {
					break
				}
				t.Logf("attempt %d: median %v over %d hand-overs, above %v", attempt, med, len(lat), k.Bound)
			}
			if med > k.Bound {
				t.Fatalf("median Unlock-to-waiter-running latency %v > %v in %d attempts (a lost wake-up waits for a slice, or for ever): %s",
					med, k.Bound, WakeAttempts, wakeSummary(lat))
			}
			t.Logf("median %v (bound %v): %s", med, k.Bound, wakeSummary(lat))
		})
	}
}

// measureWakeLatency returns the sorted latencies of up to WakeHandovers
// hand-overs; it stops early once more than half are above bound, since
// the median is then decided.
func measureWakeLatency(t *testing.T, c WakeCase, bound time.Duration) []time.Duration {
	t.Helper()
	var lat []time.Duration
	slow := 0
	for range WakeHandovers {
		c.Lock()
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		got := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			close(ready)
			if err := c.Wait(ctx); err != nil {
				errc <- err
				return
			}
			got <- time.Now()
			c.WaitUnlock()
			errc <- nil
		}()
		<-ready
		time.Sleep(WakeHold) // long enough to sleep: the spin phases are microseconds
		released := time.Now()
		c.Unlock()
		d := WakeSampleCap
		select {
		case woke := <-got:
			d = woke.Sub(released)
		case <-time.After(WakeSampleCap):
		}
		cancel()
		if err := <-errc; err != nil && ctx.Err() == nil {
			t.Fatalf("waiter: %v", err)
		}
		lat = append(lat, d)
		if d > bound {
			slow++
			if slow > WakeHandovers/2 {
				break
			}
		}
	}
	slices.Sort(lat)
	return lat
}

// wakeSummary formats the spread of lat.
func wakeSummary(lat []time.Duration) string {
	q := func(p int) time.Duration { return lat[(len(lat)-1)*p/100] }
	return fmt.Sprintf("n=%d min=%v p50=%v p90=%v max=%v", len(lat), lat[0], q(50), q(90), lat[len(lat)-1])
}
