package lockword

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
	"github.com/lockword/lockword/internal/wait"
)

// TestStuckWatcherReportsOnceAndStops: three goroutines stuck on one lock
// are reported in one line that counts them, not one each; their waits
// leave the watcher's registry when they end, and the watcher goroutine
// exits once nobody sleeps.
func TestStuckWatcherReportsOnceAndStops(t *testing.T) {
	before := stuckWaits.entries.Load() // other tests' sleepers, if any
	logs := captureSlog(t)
	var m Mutex
	m.SetName("stuck-watcher-test")
	m.SetStuckThreshold(200 * time.Millisecond)
	m.Lock()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { m.Lock(); m.Unlock() })
	}
	start := time.Now()
	awaitLogs(logs, "lock=stuck-watcher-test waiters=3", 1)
	time.Sleep(100 * time.Millisecond) // for a line per waiter, if any
	m.Unlock()
	held := time.Since(start)
	wg.Wait()
	if err := locktest.StuckLinesWithin(logs.String(), "stuck-watcher-test", held, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := stuckWaits.entries.Load(); n > before { // others may have left meanwhile
		t.Fatalf("%d waits registered after the waiters left, %d before they came", n, before)
	}
	if before != 0 {
		return // another test's goroutine still sleeps: the watcher must run
	}
	deadline := time.Now().Add(10 * time.Second)
	for stuckWaits.running.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("the stuck watcher still runs with %d waits registered", stuckWaits.entries.Load())
		}
		time.Sleep(stuckTick)
	}
}

// stuckReportDelay holds a lock (hold, release), starts one waiter on it
// (waiter, which returns holding nothing), and returns how long after the
// waiter's call the first stuck report was logged (0: none within
// patience).
func stuckReportDelay(t *testing.T, hold, release, waiter func(), patience time.Duration) time.Duration {
	logs := captureSlog(t)
	hold()
	defer release()
	start := make(chan time.Time, 1)
	go func() {
		start <- time.Now()
		waiter()
	}()
	t0 := <-start
	deadline := t0.Add(patience)
	for time.Now().Before(deadline) {
		if strings.Contains(logs.String(), "level=WARN") {
			return time.Since(t0)
		}
		time.Sleep(time.Millisecond)
	}
	return 0
}

// stuckLock is a lock under test for stuckWithin10Percent.
type stuckLock struct {
	hold, release, waiter func()
	setThreshold          func(time.Duration)
}

func stuckLockOf(l interface {
	sync.Locker
	SetStuckThreshold(time.Duration)
}) stuckLock {
	return stuckLock{l.Lock, l.Unlock, func() { l.Lock(); l.Unlock() }, l.SetStuckThreshold}
}

// stuckWithin10Percent reports whether the stuck report for a waiter on l
// comes after its threshold (less the coarse clock's tick: the start is
// read from it) and within 10% past it. Timing assumption, for a loaded
// 2-core host: within one try the watcher's sleep of stuckTick and this
// test's polling (1 ms) each overrun by less than 5% of the 400 ms
// threshold (20 ms). A try that overruns is retried, up to 5 tries; the
// bound itself is never widened.
func stuckWithin10Percent(t *testing.T, l stuckLock) error {
	const threshold = 400 * time.Millisecond
	l.setThreshold(threshold)
	var last time.Duration
	for range 5 {
		last = stuckReportDelay(t, l.hold, l.release, l.waiter, 2*threshold)
		if last >= threshold-stuckTick && last <= threshold+threshold/10 {
			return nil
		}
	}
	return fmt.Errorf("stuck report %v after the wait began (0: none in %v), want within [%v, %v]",
		last, 2*threshold, threshold-stuckTick, threshold+threshold/10)
}

// TestStuckReportWithin10Percent: the report of a waiter on each in-process
// lock comes no later than 10% past its threshold: writers and readers of
// an RWMutex, each behind a writer.
func TestStuckReportWithin10Percent(t *testing.T) {
	for _, k := range ctxLockKinds {
		t.Run(k.name, func(t *testing.T) {
			l := k.new()
			l.SetName("ten-percent")
			if err := stuckWithin10Percent(t, stuckLockOf(l)); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("RWMutex-reader", func(t *testing.T) {
		rw := new(RWMutex)
		l := stuckLock{rw.Lock, rw.Unlock, func() { rw.RLock(); rw.RUnlock() }, rw.SetStuckThreshold}
		if err := stuckWithin10Percent(t, l); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("RWMutex-writer-behind-reader", func(t *testing.T) {
		rw := new(RWMutex)
		l := stuckLock{rw.RLock, rw.RUnlock, func() { rw.Lock(); rw.Unlock() }, rw.SetStuckThreshold}
		if err := stuckWithin10Percent(t, l); err != nil {
			t.Fatal(err)
		}
	})
}

// unseenTicket is a ticket lock whose waiters sleep without a note: the
// stuck watcher never sees them. TestStuckCheckerCatchesMissingReport shows
// that stuckWithin10Percent fails on it.
type unseenTicket struct{ TicketMutex }

func (m *unseenTicket) Lock() {
	ticket := m.next.Add(1) - 1
	for {
		s := m.serving.Load()
		if s == ticket {
			return
		}
		wait.WaitKey(nil, &m.serving, s, ticket)
	}
}

func TestStuckCheckerCatchesMissingReport(t *testing.T) {
	if err := stuckWithin10Percent(t, stuckLockOf(new(unseenTicket))); err == nil {
		t.Fatal("a lock whose waiters the watcher cannot see passed the stuck-report check")
	}
}

// TestStuckReportOneLinePerLock: a thousand goroutines stuck on one lock
// log one line, not one each, repeated only as internal/stuckrule says:
// after twice the threshold, a second line (the longest wait doubled);
// never more than one per threshold held. Writers of a Mutex register
// their waits and readers of an RWMutex sleep with a note (stuck.go):
// both are grouped. Timing assumption: none; a loaded host that delays
// the release lengthens the hold, and the bound with it.
func TestStuckReportOneLinePerLock(t *testing.T) {
	const (
		waiters   = 1000
		threshold = 300 * time.Millisecond
	)
	rw := new(RWMutex)
	m := new(Mutex)
	for _, k := range []struct {
		name    string
		l       stuckLock
		setName func(string)
	}{
		{"Mutex", stuckLockOf(m), m.SetName},
		{"RWMutex-readers", stuckLock{rw.Lock, rw.Unlock, func() { rw.RLock(); rw.RUnlock() }, rw.SetStuckThreshold}, rw.SetName},
	} {
		t.Run(k.name, func(t *testing.T) {
			logs := captureSlog(t)
			k.setName("flood")
			k.l.setThreshold(threshold)
			k.l.hold()
			start := time.Now()
			var wg sync.WaitGroup
			for range waiters {
				wg.Go(k.l.waiter)
			}
			awaitLogs(logs, "lock=flood", 2)
			k.l.release()
			held := time.Since(start)
			wg.Wait()
			if err := locktest.StuckLinesWithin(logs.String(), "flood", held, threshold); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(logs.String(), "lock=flood"); n < 2 {
				t.Fatalf("%d stuck reports in %v, want a second once the longest wait doubled:\n%s", n, held, logs)
			}
		})
	}
}
