package stuckrule

import (
	"testing"
	"time"
)

// TestEpisodeRepeatsOnlyWhenGrown walks one episode through the rule:
// the first look reports; more waiters within a threshold do not; the
// waiters doubling a threshold later do; the longest wait doubling does
// at once; a new episode after End reports afresh.
func TestEpisodeRepeatsOnlyWhenGrown(t *testing.T) {
	const th = time.Second
	t0 := time.Unix(0, 0)
	var e Episode
	for i, c := range []struct {
		waiters int
		longest time.Duration
		at      time.Duration // since t0
		want    bool
		end     bool // End the episode before this look
	}{
		{1, th, 0, true, false},
		{1, th + 100*time.Millisecond, 100 * time.Millisecond, false, false},
		{1000, th + 200*time.Millisecond, 200 * time.Millisecond, false, false}, // a flood, within a threshold
		{1000, 2 * th, 2 * th / 2, true, false},                                 // the longest wait doubled
		{1999, 2*th + time.Millisecond, 3 * th, false, false},                   // not quite twice the waiters
		{2000, 2*th + time.Millisecond, 3 * th, true, false},                    // twice, a threshold later
		{1, th, 10 * th, true, true},                                            // a new episode
	} {
		if c.end {
			e.End()
		}
		if got := e.Due(c.waiters, c.longest, th, t0.Add(c.at)); got != c.want {
			t.Fatalf("look %d (%d waiters, longest %v): Due = %v, want %v", i, c.waiters, c.longest, got, c.want)
		}
	}
}
