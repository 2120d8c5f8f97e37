package shm

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// TestSharedStuckReportOneLinePerLock: a thousand goroutines of this
// process blocked as readers of one RWMutex behind a writer log one stuck
// line that counts them, not one each; it is repeated once the longest
// wait has doubled, not before. Timing assumption: the look half a
// threshold after the first line comes before the longest wait doubles;
// a loaded host's lag could only delay a repeat, never advance it.
func TestSharedStuckReportOneLinePerLock(t *testing.T) {
	const (
		readers   = 1000
		threshold = 300 * time.Millisecond
	)
	r := mustCreate(t, tempRegionPath(t), 0)
	rw, err := r.RWMutex("flood")
	if err != nil {
		t.Fatal(err)
	}
	logs := captureSlog(t)
	rw.SetStuckThreshold(threshold)
	rw.Lock()
	start := time.Now()
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() { rw.RLock(); rw.RUnlock() })
	}
	released := false
	defer func() {
		if !released {
			rw.Unlock()
		}
		wg.Wait()
	}()
	awaitLogs(logs, "lock=flood", 1)
	time.Sleep(threshold / 2)
	if n := strings.Count(logs.String(), "lock=flood"); n != 1 {
		t.Fatalf("%d stuck reports for %d readers of one lock, want 1:\n%.2000s", n, readers, logs)
	}
	for _, want := range []string{"waiters=", "held_for=", "waiting_as=reader"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the report lacks %q:\n%s", want, logs)
		}
	}
	awaitLogs(logs, "lock=flood", 2)
	if d := time.Since(start); d < 2*threshold {
		t.Fatalf("second report %v after the wait began, want at least twice the threshold (%v)", d, 2*threshold)
	}
	rw.Unlock()
	released = true
	wg.Wait()
	if err := locktest.StuckLinesDouble(logs.String()); err != nil {
		t.Fatal(err)
	}
}
