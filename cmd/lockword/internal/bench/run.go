// Package bench is the harness behind "lockword bench": it measures each
// of lockword's locks against the lock a Go programmer would use instead
// (its peer) in one interleaved run, and reports throughput, wait-time
// tails and fairness as a terminal table, JSON Lines and charts.
//
// Interleaving: the run is count rounds; each round measures every
// subject at every goroutine count once, the subjects of one count back
// to back in an order rotated by one each round, so that a peer and its
// lockword kind alternate and drift in the machine's load (other
// processes, frequency scaling) falls on both alike. The table shows the
// median of the rounds and their spread.
//
// What a sample is: Params.Goroutines workers hammer one lock for
// Params.Duration; throughput is the acquisitions completed before the
// stop over the time to the stop. With more than one worker one Lock in
// waitSampleEvery is timed (two clock reads, the same for every subject),
// giving the wait-time histogram; with one worker nothing is timed and
// the figure is the uncontended cost, shown as ns/op.
package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"time"
)

// A Subject is one lock (or queue) under test.
type Subject struct {
	Name string // as shown: "Mutex", "sync.Mutex"
	// Peers names the subjects of the same group this one is compared
	// with, the first in the table's ratio column; empty for a peer.
	Peers []string
	run   func(ctx context.Context, p Params) (Sample, error)
}

// IsPeer reports whether s is a peer (a lock from outside lockword).
func (s *Subject) IsPeer() bool { return len(s.Peers) == 0 }

// A Group is subjects measured over one grid and shown in one chart panel.
type Group struct {
	Name     string // "mutex", "rw", "ring", "shared"
	Title    string // the panel's title
	Unit     string // what Ops counts: "acq" or "items"
	Axis     string // what Grid counts: "goroutines", "processes", "goroutines (producer + consumer)"
	Grid     []int
	Subjects []Subject
	// ChartX, if set, replaces the chart's x axis label and the grid's
	// numbers (a group of one grid point: the ring's two goroutines).
	ChartX string
	// Processes marks a group whose samples start Grid[i] processes
	// each (the cross-process kinds): Estimate counts their starts.
	Processes bool
	// MinDuration, if longer than Config.Duration, is this group's
	// sample duration (the etcd kinds: a few hundred acquisitions a
	// second).
	MinDuration time.Duration
	// Notes are printed under the group's table: a subject left out, and
	// why.
	Notes []string
	// close, if set, releases what the group's samples share (the etcd
	// member, the sem_t peer's build) when Run ends.
	close func()
}

// sampleDuration is how long each of g's samples lasts under c.
func (g *Group) sampleDuration(c *Config) time.Duration { return max(c.Duration, g.MinDuration) }

// A Measurement is one sample of one subject, as -json prints it (one
// object per line).
type Measurement struct {
	Group        string     `json:"group"`
	Kind         string     `json:"kind"`
	Versus       []string   `json:"versus,omitempty"` // the peers; absent for a peer
	Goroutines   int        `json:"goroutines"`       // processes in the shared group
	Round        int        `json:"round"`            // 1..count
	Section      string     `json:"section"`
	ReadFraction float64    `json:"read_fraction,omitempty"`
	Unit         string     `json:"unit"`
	Ops          int64      `json:"ops"`
	ElapsedNs    int64      `json:"elapsed_ns"`
	OpsPerSec    float64    `json:"ops_per_sec"`
	NsPerOp      float64    `json:"ns_per_op"` // wall time per op across all workers: 1e9 / ops_per_sec
	WaitP50Ns    int64      `json:"wait_p50_ns,omitempty"`
	WaitP99Ns    int64      `json:"wait_p99_ns,omitempty"`
	WaitMaxNs    int64      `json:"wait_max_ns,omitempty"`
	WorkerMax    int64      `json:"worker_max_ops,omitempty"` // most ops by one worker
	WorkerMin    int64      `json:"worker_min_ops,omitempty"` // fewest
	Waits        *Histogram `json:"-"`

	// ServerCPUNsPerOp is the server's CPU time per acquisition (the
	// etcd kinds), 0 where not measured.
	ServerCPUNsPerOp float64 `json:"server_cpu_ns_per_op,omitempty"`
}

// Fairness is WorkerMax/WorkerMin (1 is perfectly fair), 0 where not
// measured; a worker that got nothing counts as 1 for the ratio.
func (m *Measurement) Fairness() float64 {
	if m.WorkerMax == 0 {
		return 0
	}
	return float64(m.WorkerMax) / float64(max(m.WorkerMin, 1))
}

// A Config is one run.
type Config struct {
	Groups       []Group
	Duration     time.Duration // per sample
	Count        int           // rounds
	Section      Section
	ReadFraction float64
	// OnStart, if set, is called before each sample with its index
	// (0-based), the total and a label; OnSample after each with the
	// measurement. Both run on the caller's goroutine.
	OnStart  func(i, total int, label string)
	OnSample func(m Measurement)
}

// Samples returns how many samples c takes.
func (c *Config) Samples() int {
	n := 0
	for _, g := range c.Groups {
		n += len(g.Grid) * len(g.Subjects)
	}
	return n * c.Count
}

// Estimate returns about how long Run takes: every sample's Duration and,
// for a group of Processes, each sample's start of its processes,
// procStart each (ProcStart measures it on this machine), and the common
// start they are given. Calibration and the Go work between samples are
// not counted: they take milliseconds.
func (c *Config) Estimate(procStart time.Duration) time.Duration {
	var d time.Duration
	for _, g := range c.Groups {
		for _, n := range g.Grid {
			sample := g.sampleDuration(c)
			if g.Processes {
				sample += startAhead + time.Duration(n)*procStart
			}
			d += time.Duration(len(g.Subjects)) * sample
		}
	}
	return d * time.Duration(c.Count)
}

// Run measures c and returns every measurement made, in the order made.
// If ctx ends, Run stops within one sample's duration and returns what was
// measured so far with ctx's error (the interrupted sample is dropped); a
// subject that fails (a queue that reordered) ends the run with its error.
func Run(ctx context.Context, c *Config) ([]Measurement, error) {
	p := Params{Section: c.Section, ReadFraction: c.ReadFraction, StepsPerNs: calibrate()}
	for _, g := range c.Groups {
		if g.close != nil {
			defer g.close()
		}
	}
	var out []Measurement
	i, total := 0, c.Samples()
	for round := range c.Count {
		for _, g := range c.Groups {
			for _, n := range g.Grid {
				for k := range g.Subjects {
					s := &g.Subjects[(k+round)%len(g.Subjects)]
					if err := ctx.Err(); err != nil {
						return out, err
					}
					if c.OnStart != nil {
						c.OnStart(i, total, fmt.Sprintf("%s, %d %s, round %d/%d", s.Name, n, g.Axis, round+1, c.Count))
					}
					i++
					p.Goroutines, p.Duration = n, g.sampleDuration(c)
					runtime.GC() // the previous sample's garbage is not this one's cost
					sample, err := s.run(ctx, p)
					if err != nil {
						if ctx.Err() != nil {
							return out, ctx.Err()
						}
						return out, fmt.Errorf("%s, %d %s: %w", s.Name, n, g.Axis, err)
					}
					m := measurement(&g, s, n, round+1, c, sample)
					out = append(out, m)
					if c.OnSample != nil {
						c.OnSample(m)
					}
				}
			}
		}
	}
	return out, nil
}

// measurement turns a sample into its record.
func measurement(g *Group, s *Subject, n, round int, c *Config, sample Sample) Measurement {
	m := Measurement{Group: g.Name, Kind: s.Name, Versus: s.Peers, Goroutines: n, Round: round,
		Section: c.Section.String(), Unit: g.Unit, Ops: sample.Ops, ElapsedNs: int64(sample.Elapsed),
		OpsPerSec: sample.OpsPerSec(), Waits: sample.Waits}
	if g.Name == "rw" {
		m.ReadFraction = c.ReadFraction
	}
	if m.OpsPerSec > 0 {
		m.NsPerOp = 1e9 / m.OpsPerSec
	}
	if sample.ServerCPU > 0 && sample.Ops > 0 {
		m.ServerCPUNsPerOp = float64(sample.ServerCPU) / float64(sample.Ops)
	}
	if w := sample.Waits; w != nil && w.N > 0 {
		m.WaitP50Ns, m.WaitP99Ns, m.WaitMaxNs = w.Quantile(0.5), w.Quantile(0.99), w.Max
	}
	if len(sample.PerWorker) > 1 {
		m.WorkerMin, m.WorkerMax = slices.Min(sample.PerWorker), slices.Max(sample.PerWorker)
	}
	return m
}

// A Summary is one subject at one grid point over all its rounds.
type Summary struct {
	Group, Kind string
	Versus      []string
	Goroutines  int
	Unit        string
	Rounds      int
	// OpsPerSec is the median over the rounds, Lo and Hi the slowest and
	// fastest round.
	OpsPerSec, Lo, Hi float64
	// Ratios[i] is OpsPerSec over that of Versus[i] at the same point
	// (above 1: this subject is faster); 0 where the peer was not measured.
	Ratios []float64
	Waits  *Histogram // all rounds' waits merged; nil where not timed
	// Fairness is the median over the rounds of the most acquisitions by
	// one worker over the fewest; 0 where not measured.
	Fairness float64
	// ServerCPUPerOp is the median over the rounds of the server's CPU
	// time per acquisition, ns; 0 where not measured.
	ServerCPUPerOp float64
}

// Summarize groups measurements by (group, kind, goroutines), in the
// order each first appears, and computes medians and ratios.
func Summarize(ms []Measurement) []Summary {
	type key struct {
		group, kind string
		n           int
	}
	var order []key
	byKey := map[key][]*Measurement{}
	for i := range ms {
		m := &ms[i]
		k := key{m.Group, m.Kind, m.Goroutines}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], m)
	}
	// By group as first seen, then grid point; within a point the
	// subjects stay in their first round's order, the group's own.
	groupRank := map[string]int{}
	for _, k := range order {
		if _, ok := groupRank[k.group]; !ok {
			groupRank[k.group] = len(groupRank)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		ka, kb := order[a], order[b]
		if ka.group != kb.group {
			return groupRank[ka.group] < groupRank[kb.group]
		}
		return ka.n < kb.n
	})
	var out []Summary
	medianOf := map[key]float64{}
	for _, k := range order {
		rs := byKey[k]
		s := Summary{Group: k.group, Kind: k.kind, Versus: rs[0].Versus, Goroutines: k.n, Unit: rs[0].Unit, Rounds: len(rs)}
		var rates, fair, cpu []float64
		for _, m := range rs {
			rates = append(rates, m.OpsPerSec)
			if m.ServerCPUNsPerOp > 0 {
				cpu = append(cpu, m.ServerCPUNsPerOp)
			}
			if f := m.Fairness(); f > 0 {
				fair = append(fair, f)
			}
			if m.Waits != nil {
				if s.Waits == nil {
					s.Waits = new(Histogram)
				}
				s.Waits.Merge(m.Waits)
			}
		}
		s.OpsPerSec, s.Lo, s.Hi = median(rates), slices.Min(rates), slices.Max(rates)
		s.Fairness, s.ServerCPUPerOp = median(fair), median(cpu)
		medianOf[k] = s.OpsPerSec
		out = append(out, s)
	}
	for i := range out {
		s := &out[i]
		for _, v := range s.Versus {
			r := 0.0
			if p := medianOf[key{s.Group, v, s.Goroutines}]; p > 0 {
				r = s.OpsPerSec / p
			}
			s.Ratios = append(s.Ratios, r)
		}
	}
	return out
}

// ErrNoKinds is returned by Select for an empty selection.
var ErrNoKinds = errors.New("no kinds selected")
