package torture

import (
	"strings"
	"testing"
	"time"
)

// TestReportThroughputUnits: a throughput under 0.1 M acquisitions/s (a
// slow -kill run) prints in k/s rather than as "0.0 M", which reads as
// none; faster runs keep M/s.
func TestReportThroughputUnits(t *testing.T) {
	for _, c := range []struct {
		adds int64
		want string
	}{
		{42_000, "Throughput: 42.0 k acquisitions/s"},
		{5_000_000, "Throughput: 5.0 M acquisitions/s"},
	} {
		r := &counterReport{lock: "shared-rw", workers: 1, perWorker: []int64{c.adds}, value: 1, elapsed: time.Second}
		var b strings.Builder
		r.writeText(&b)
		if !strings.Contains(b.String(), c.want+"\n") {
			t.Errorf("%d additions in 1 s: report lacks %q:\n%s", c.adds, c.want, b.String())
		}
	}
}
