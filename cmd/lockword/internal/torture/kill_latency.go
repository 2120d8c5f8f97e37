package torture

// The recovery latencies of a -kill run: for every kill of the lock's
// holder, the time from the SIGKILL to a waiter getting the lock with
// ErrOwnerDead (detection) and to the repaired lock being marked
// consistent (recovery). The report gives their distribution, not only
// the worst case, because the worst case on a loaded host measures the
// scheduler (a waiter that cannot get a CPU notices nothing), while the
// median measures the lock's 10 ms polling.

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// A latencyDist is the distribution of one latency over a run's
// recoveries, in milliseconds: the median, the 99th percentile (nearest
// rank) and the maximum.
type latencyDist struct {
	Samples int     `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// distOf summarizes samples; the zero latencyDist when there are none.
func distOf(samples []time.Duration) latencyDist {
	if len(samples) == 0 {
		return latencyDist{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	// Nearest rank: the smallest sample at or above p percent of them.
	rank := func(p int) time.Duration { return s[max((len(s)*p+99)/100, 1)-1] }
	return latencyDist{Samples: len(s), P50Ms: ms(rank(50)), P99Ms: ms(rank(99)), MaxMs: ms(s[len(s)-1])}
}

// recovered records one recovery from a killed holder: detection and
// repaired are the times from the kill to ErrOwnerDead and to
// MarkConsistent.
func (k *killReport) recovered(detection, repaired time.Duration) {
	k.detections = append(k.detections, detection)
	k.repairs = append(k.repairs, repaired)
	k.MaxDetectionMs = max(k.MaxDetectionMs, float64(detection)/1e6)
	k.MaxRecoveryMs = max(k.MaxRecoveryMs, float64(repaired)/1e6)
}

// MarshalJSON adds the distributions to the kill object.
func (k *killReport) MarshalJSON() ([]byte, error) {
	type fields killReport // the same fields, without this method
	j := fields(*k)
	det, rec := distOf(k.detections), distOf(k.repairs)
	j.Detection, j.Recovery = &det, &rec
	return json.Marshal(j)
}

// writeLatencies prints the two latency lines of a -kill report.
func (k *killReport) writeLatencies(w io.Writer) {
	if len(k.repairs) == 0 {
		fmt.Fprintln(w, "Recovery latency: no kill of the holder to time")
		return
	}
	rec, det := distOf(k.repairs), distOf(k.detections)
	fmt.Fprintf(w, "Recovery latency (kill to repaired, %d recoveries): p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", rec.Samples, rec.P50Ms, rec.P99Ms, rec.MaxMs)
	fmt.Fprintf(w, "Detection latency (kill to ErrOwnerDead): p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", det.P50Ms, det.P99Ms, det.MaxMs)
}
