package torture

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLatencyDist: nearest-rank percentiles and the maximum, in ms.
func TestLatencyDist(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100) // 1..100 ms, shuffled by reversal
	for i := range hundred {
		hundred[i] = 100 - i
	}
	for _, c := range []struct {
		samples []time.Duration
		want    latencyDist
	}{
		{nil, latencyDist{}},
		{ms(7), latencyDist{1, 7, 7, 7}},
		{ms(30, 10, 20), latencyDist{3, 20, 30, 30}},
		{ms(hundred...), latencyDist{100, 50, 99, 100}},
		{ms(append(hundred, 357)...), latencyDist{101, 51, 100, 357}}, // one outlier moves only the max
	} {
		if got := distOf(c.samples); got != c.want {
			t.Errorf("distOf(%v) = %+v, want %+v", c.samples, got, c.want)
		}
	}
}

// TestKillReportLatencies: a -kill report gives the distribution of both
// latencies, in its text and in its JSON, beside the maxima it always had.
func TestKillReportLatencies(t *testing.T) {
	k := &killReport{Kills: 4, HolderKills: 3}
	for _, d := range []int{12, 9, 40} {
		k.recovered(time.Duration(d)*time.Millisecond, time.Duration(d+1)*time.Millisecond)
	}
	var b strings.Builder
	k.writeText(&b)
	for _, want := range []string{
		"Recovery latency (kill to repaired, 3 recoveries): p50 13.0 ms, p99 41.0 ms, max 41.0 ms\n",
		"Detection latency (kill to ErrOwnerDead): p50 12.0 ms, p99 40.0 ms, max 40.0 ms\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	js, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	var back killReport
	if err := json.Unmarshal(js, &back); err != nil || back.Recovery == nil || back.Detection == nil ||
		*back.Recovery != (latencyDist{3, 13, 41, 41}) || *back.Detection != (latencyDist{3, 12, 40, 40}) || back.MaxRecoveryMs != 41 {
		t.Errorf("JSON %s: %+v, %v", js, back, err)
	}
	var none strings.Builder
	(&killReport{Kills: 2}).writeText(&none)
	if !strings.Contains(none.String(), "Recovery latency: no kill of the holder to time\n") {
		t.Errorf("no recoveries: %s", none.String())
	}
}
