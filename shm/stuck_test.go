//go:build linux

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
// line that counts them, not one each, repeated only as
// internal/stuckrule says: after twice the threshold, a second line;
// never more than one per threshold held. Timing assumption: none; a
// loaded host that delays the release lengthens the hold, and the bound
// with it.
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
	awaitLogs(logs, "lock=flood", 2)
	rw.Unlock()
	held := time.Since(start)
	wg.Wait()
	out := logs.String()
	if err := locktest.StuckLinesWithin(out, "flood", held, threshold); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"waiters=", "held_for=", "waiting_as=reader"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the report lacks %q:\n%s", want, out)
		}
	}
}
