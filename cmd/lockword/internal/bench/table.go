package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the summaries as one table per group: throughput
// (ns/op for one goroutine, uncontended) as the median of the rounds with
// the slowest and fastest round beside it, the ratio to the peer (above
// 1x: lockword is faster), the wait tail and the fairness.
func WriteTable(w io.Writer, groups []Group, sums []Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range groups {
		var rows []*Summary
		for i := range sums {
			if sums[i].Group == g.Name {
				rows = append(rows, &sums[i])
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(tw, "\n%s (%s/s, median of %d; vs: throughput over the peer's)\n", g.Title, g.Unit, rows[0].Rounds)
		for _, n := range g.Notes {
			fmt.Fprintf(tw, "note: %s\n", n)
		}
		cpu := rows[0].ServerCPUPerOp > 0
		wait := "wait"
		if cpu {
			wait = "hand-over" // see etcdGroups
		}
		fmt.Fprintf(tw, "%s\tkind\tthroughput\tslowest..fastest\tvs\t%s p50\tp99\tmax\tmax/min%s\n", g.Axis, wait, cond(cpu, "\tserver CPU/acq\tvs", ""))
		last := -1
		for _, s := range rows {
			n := ""
			if s.Goroutines != last {
				n, last = fmt.Sprint(s.Goroutines), s.Goroutines
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s%s\n", n, s.Kind, rate(s, s.OpsPerSec),
				spread(s), ratios(s), waitQ(s, 0.5), waitQ(s, 0.99), waitQ(s, 1), fairness(s), cond(cpu, serverCPU(s, sums), ""))
		}
	}
	return tw.Flush()
}

// rate formats a throughput: ns/op where one goroutine ran uncontended,
// millions per second otherwise, or plainly per second below 10,000 (the
// etcd kinds).
func rate(s *Summary, v float64) string {
	switch {
	case v <= 0:
		return "-"
	case s.Waits == nil && s.Goroutines == 1:
		return fmt.Sprintf("%.3g ns/op", 1e9/v)
	case v < 1e4:
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.3g M/s", v/1e6)
}

func cond(c bool, yes, no string) string {
	if c {
		return yes
	}
	return no
}

// serverCPU is the server CPU columns of s: its CPU per acquisition and
// its ratio to its peer's at the same point (above 1x: s costs more).
func serverCPU(s *Summary, sums []Summary) string {
	col := "\t-\t"
	if s.ServerCPUPerOp > 0 {
		col = "\t" + FormatNs(int64(s.ServerCPUPerOp)) + "\t"
	}
	for _, o := range sums {
		if len(s.Versus) > 0 && o.Group == s.Group && o.Kind == s.Versus[0] && o.Goroutines == s.Goroutines && o.ServerCPUPerOp > 0 {
			col += fmt.Sprintf("%.2fx", s.ServerCPUPerOp/o.ServerCPUPerOp)
		}
	}
	return col
}

// spread is the slowest and fastest round relative to the median.
func spread(s *Summary) string {
	if s.Rounds < 2 || s.OpsPerSec <= 0 {
		return "-"
	}
	return fmt.Sprintf("%+.0f%%..%+.0f%%", 100*(s.Lo/s.OpsPerSec-1), 100*(s.Hi/s.OpsPerSec-1))
}

func ratios(s *Summary) string {
	var parts []string
	for i, r := range s.Ratios {
		p := "-"
		switch {
		case r >= 10:
			p = fmt.Sprintf("%.1fx", r)
		case r > 0:
			p = fmt.Sprintf("%.2fx", r)
		}
		if len(s.Ratios) > 1 {
			p += " " + s.Versus[i]
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func waitQ(s *Summary, q float64) string {
	if s.Waits == nil || s.Waits.N == 0 {
		return "-"
	}
	return FormatNs(s.Waits.Quantile(q))
}

func fairness(s *Summary) string {
	switch {
	case s.Fairness == 0:
		return "-"
	case s.Fairness >= 100:
		return fmt.Sprintf("%.0f", s.Fairness)
	}
	return fmt.Sprintf("%.2f", s.Fairness)
}

// FormatNs formats nanoseconds with three significant digits at most:
// 87ns, 1.2us, 35ms.
func FormatNs(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gus", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}
