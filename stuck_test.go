package lockword

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStuckWatcherReportsEachWaitOnceAndStops: three goroutines stuck on
// one lock are each reported once, however long they wait; their waits
// leave the watcher's registry when they end, and the watcher goroutine
// exits once nobody sleeps.
func TestStuckWatcherReportsEachWaitOnceAndStops(t *testing.T) {
	before := stuckWaits.entries.Load() // other tests' sleepers, if any
	logs := captureSlog(t)
	var m Mutex
	m.SetName("stuck-watcher-test")
	m.SetStuckThreshold(20 * time.Millisecond)
	m.Lock()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { m.Lock(); m.Unlock() })
	}
	time.Sleep(200 * time.Millisecond) // ten thresholds
	m.Unlock()
	wg.Wait()
	if n := strings.Count(logs.String(), "lock=stuck-watcher-test"); n != 3 {
		t.Fatalf("%d reports for 3 stuck waiters, want 3:\n%s", n, logs)
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
