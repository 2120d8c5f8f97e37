package lockword

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Wake latency: a waiter asleep on a held lock must run soon after Unlock,
// not at the end of a sleep slice or never. A lost wake-up in an
// in-process lock hangs (the waiter parks with no timeout), and in a shared
// lock it hides as latency behind the waiter's sleep slice (1 ms for
// SharedMutex, 10 ms for the ticket queue and the RW lock), so no
// correctness test sees it; only the median hand-over time does, fast.
//
// Each hand-over: the test holds the lock, a waiter calls its lock with a
// context, the test waits wakeHold for it to fall asleep, notes the time
// and unlocks; the waiter notes the time it got the lock. A waiter not
// running within wakeSampleCap counts as wakeSampleCap (its context is
// cancelled, so a lost wake-up costs one cap, not a hang).
//
// The timing assumption, for a loaded host: a woken waiter usually runs
// within its bound (tens of microseconds on an idle machine: an in-process
// waiter is readied onto the unlocking goroutine's P, which then blocks; a
// kernel sleeper is a futex wake-up, which the scheduler favours). A loaded
// host delays some hand-overs by whole scheduler slices, but not most of
// them, so the median, unlike the maximum, stays far below the slice that
// a lost wake-up falls back to. A failed median is measured again, up to
// wakeAttempts times: the measurement is retried, never the bound.
const (
	wakeHandovers = 101
	wakeAttempts  = 3
	wakeHold      = 300 * time.Microsecond
	wakeSampleCap = 20 * time.Millisecond
)

// wakeCase is one lock's hand-over: the holder's lock and unlock, and the
// waiter's cancellable lock and its unlock.
type wakeCase struct {
	lock, unlock func()
	wait         func(context.Context) error
	waitUnlock   func()
}

// wakeKind is a lock under test with its median bound.
type wakeKind struct {
	name  string
	bound time.Duration
	new   func(t *testing.T) wakeCase
}

// wakeKinds are the in-process locks; Linux appends the shared ones
// (wakelatency_shared_test.go).
var wakeKinds = []wakeKind{
	{"Mutex", time.Millisecond, func(*testing.T) wakeCase {
		m := new(Mutex)
		return wakeCase{m.Lock, m.Unlock, m.LockContext, m.Unlock}
	}},
	{"SpinMutex", time.Millisecond, func(*testing.T) wakeCase {
		m := new(SpinMutex)
		return wakeCase{m.Lock, m.Unlock, m.LockContext, m.Unlock}
	}},
	{"TicketMutex", time.Millisecond, func(*testing.T) wakeCase {
		m := new(TicketMutex)
		return wakeCase{m.Lock, m.Unlock, m.LockContext, m.Unlock}
	}},
	{"RWMutexWriter", time.Millisecond, func(*testing.T) wakeCase {
		m := new(RWMutex)
		return wakeCase{m.Lock, m.Unlock, m.LockContext, m.Unlock}
	}},
	{"RWMutexReader", time.Millisecond, func(*testing.T) wakeCase {
		m := new(RWMutex)
		return wakeCase{m.Lock, m.Unlock, m.RLockContext, m.RUnlock}
	}},
}

func TestWakeLatency(t *testing.T) {
	for _, k := range wakeKinds {
		t.Run(k.name, func(t *testing.T) {
			var med time.Duration
			var lat []time.Duration
			for attempt := 1; attempt <= wakeAttempts; attempt++ {
				lat = measureWakeLatency(t, k.new(t), k.bound)
				med = lat[len(lat)/2]
				if med <= k.bound {
					break
				}
				t.Logf("attempt %d: median %v over %d hand-overs, above %v", attempt, med, len(lat), k.bound)
			}
			if med > k.bound {
				t.Fatalf("median Unlock-to-waiter-running latency %v > %v in %d attempts (a lost wake-up waits for a slice, or for ever): %s",
					med, k.bound, wakeAttempts, wakeSummary(lat))
			}
			t.Logf("median %v (bound %v): %s", med, k.bound, wakeSummary(lat))
		})
	}
}

// measureWakeLatency returns the sorted latencies of up to wakeHandovers
// hand-overs; it stops early once more than half are above bound, since
// the median is then decided.
func measureWakeLatency(t *testing.T, c wakeCase, bound time.Duration) []time.Duration {
	t.Helper()
	var lat []time.Duration
	slow := 0
	for range wakeHandovers {
		c.lock()
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		got := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			close(ready)
			if err := c.wait(ctx); err != nil {
				errc <- err
				return
			}
			got <- time.Now()
			c.waitUnlock()
			errc <- nil
		}()
		<-ready
		time.Sleep(wakeHold) // long enough to sleep: the spin phases are microseconds
		released := time.Now()
		c.unlock()
		d := wakeSampleCap
		select {
		case woke := <-got:
			d = woke.Sub(released)
		case <-time.After(wakeSampleCap):
		}
		cancel()
		if err := <-errc; err != nil && ctx.Err() == nil {
			t.Fatalf("waiter: %v", err)
		}
		lat = append(lat, d)
		if d > bound {
			slow++
			if slow > wakeHandovers/2 {
				break
			}
		}
	}
	slices.Sort(lat)
	return lat
}

func wakeSummary(lat []time.Duration) string {
	q := func(p int) time.Duration { return lat[(len(lat)-1)*p/100] }
	return fmt.Sprintf("n=%d min=%v p50=%v p90=%v max=%v", len(lat), lat[0], q(50), q(90), lat[len(lat)-1])
}
