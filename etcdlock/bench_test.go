package etcdlock

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/lockword/lockword/etcdlock/etcdtest"
	"github.com/lockword/lockword/internal/etcdbench"
	"github.com/lockword/lockword/internal/etcdembed"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Benchmarks against etcd's own concurrency.Mutex (benchKinds), peers
// interleaved in one run, on a member without fsync (loopback), so that
// the figures are the locks' round trips and the server's CPU, not a
// disk's. Uncontended: one client locks and unlocks, on TestMain's
// member; the p50 and p99 of one Lock+Unlock are reported. Contended
// shapes: see benchRounds.

// BenchmarkUncontended alternates the peers, one Lock+Unlock each per
// iteration, so that a shared, loaded host slows both alike; it reports
// each one's p50 and p99 and the ratio of the p50s (etcdlock over
// concurrency: the target is at most 1.2).
func BenchmarkUncontended(b *testing.B) {
	cli := newClient(b, endpoints)
	ctx := context.Background()
	ls := make([]etcdbench.Locker, len(benchKinds))
	lat := make([][]time.Duration, len(benchKinds))
	for i, k := range benchKinds {
		l, err := k.New(ctx, cli, prefix(b)+"/"+k.Name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		ls[i] = l
	}
	for b.Loop() {
		for i, l := range ls {
			t0 := time.Now()
			if err := l.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	p50 := make([]float64, len(benchKinds))
	for i, peer := range benchKinds {
		slices.Sort(lat[i])
		p50[i] = float64(lat[i][len(lat[i])/2].Microseconds())
		b.ReportMetric(p50[i], peer.Name+"-p50-µs")
		b.ReportMetric(float64(lat[i][len(lat[i])*99/100].Microseconds()), peer.Name+"-p99-µs")
	}
	b.ReportMetric(p50[0]/p50[1], "p50-ratio")
}

// Contended shapes, on a member in a child process (so that its CPU time
// is the server's alone), the peers interleaved: each of benchRounds
// rounds measures both, in an order rotated each round, b.N acquisitions
// per sample; the medians of the rounds are reported, each peer's
// acquisitions per second, server CPU per acquisition and p99 hand-over
// (from the holder's call to Unlock to the return of the next Lock asked
// for before it), and etcdlock's ratios to the peer.
const benchRounds = 3

// benchKinds are the locks the contended benchmarks compare; a process
// of the 4-process shape makes its handle from them.
var benchKinds = []etcdbench.Kind{
	{Name: "etcdlock", New: func(ctx context.Context, cli *clientv3.Client, p string) (etcdbench.Locker, error) {
		m, err := NewMutex(ctx, cli, p, nil)
		if err != nil {
			return nil, err
		}
		return benchMutex{m}, nil
	}},
	etcdbench.Concurrency,
}

type benchMutex struct{ *Mutex }

func (m benchMutex) Lock(ctx context.Context) error   { return m.LockContext(ctx) }
func (m benchMutex) Unlock(ctx context.Context) error { return m.UnlockContext(ctx) }

// A member child and a bench child run and exit here, before TestMain.
func init() {
	etcdembed.ChildMain()
	etcdbench.ChildMain(benchKinds...)
}

// BenchmarkContended: N goroutines, each with its own etcd client and
// lease, lock and unlock one lock (empty critical section).
func BenchmarkContended(b *testing.B) {
	srv := benchServer(b)
	for _, clients := range []int{1, 8, 16, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchmarkInterleaved(b, func(k etcdbench.Kind, p etcdbench.Params) (etcdbench.Sample, error) {
				return etcdbench.Clients(context.Background(), srv.Endpoints(), k, prefix(b), p)
			}, clients, srv)
		})
	}
}

// BenchmarkProcesses: 4 processes (the test binary re-executed), each
// with its own client and lease, lock and unlock one lock.
func BenchmarkProcesses(b *testing.B) {
	srv := benchServer(b)
	benchmarkInterleaved(b, func(k etcdbench.Kind, p etcdbench.Params) (etcdbench.Sample, error) {
		return etcdbench.Procs(context.Background(), os.Args[0], srv.Endpoints(), k, prefix(b), p)
	}, 4, srv)
}

// benchServer starts a member child for b's benchmarks.
func benchServer(b *testing.B) *etcdembed.Child {
	srv, err := etcdembed.StartChild(os.Args[0])
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	return srv
}

func benchmarkInterleaved(b *testing.B, run func(etcdbench.Kind, etcdbench.Params) (etcdbench.Sample, error), workers int, srv *etcdembed.Child) {
	p := etcdbench.Params{Workers: workers, Count: max(b.N/workers, 1), ServerCPU: srv.CPU}
	acq := make([][]float64, len(benchKinds))
	cpu := make([][]float64, len(benchKinds))
	p99 := make([][]float64, len(benchKinds))
	b.ResetTimer()
	for round := range benchRounds {
		for i := range benchKinds {
			k := (i + round) % len(benchKinds)
			s, err := run(benchKinds[k], p)
			if err != nil {
				b.Fatal(err)
			}
			acq[k] = append(acq[k], s.AcqPerSec())
			cpu[k] = append(cpu[k], float64(s.ServerCPUPerAcq().Microseconds()))
			p99[k] = append(p99[k], float64(s.HandoverQuantile(0.99).Microseconds()))
		}
	}
	b.StopTimer()
	for k, kind := range benchKinds {
		b.ReportMetric(median(acq[k]), kind.Name+"-acq/s")
		b.ReportMetric(median(cpu[k]), kind.Name+"-srv-µs/acq")
		if workers > 1 {
			b.ReportMetric(median(p99[k]), kind.Name+"-handover-p99-µs")
		}
	}
	b.ReportMetric(median(acq[0])/median(acq[1]), "acq-ratio")
	if c := median(cpu[1]); c > 0 {
		b.ReportMetric(median(cpu[0])/c, "srv-cpu-ratio")
	}
}

func median(xs []float64) float64 {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys[len(ys)/2]
}

// TestUncontendedCost (LOCKWORD_LONG=1; a few seconds) prints what one
// uncontended Lock+Unlock costs each peer, counts that do not depend on
// the host's load: the bytes its client sends and receives (through a
// loopback proxy that counts them) and the client's allocations, over
// uncontendedCostN acquisitions after a warm-up, the peers interleaved
// in blocks. BENCHMARKS.md quotes it.
func TestUncontendedCost(t *testing.T) {
	if os.Getenv("LOCKWORD_LONG") != "1" {
		t.Skip("a measurement: LOCKWORD_LONG=1 runs it")
	}
	const uncontendedCostN, block = 2000, 100
	ctx := context.Background()
	type peer struct {
		l              etcdbench.Locker
		px             *etcdtest.Proxy
		sent, received int64
		mallocs, bytes uint64
	}
	ps := make([]*peer, len(benchKinds))
	for i, k := range benchKinds {
		px := etcdtest.NewProxy(t, endpoints[0])
		l, err := k.New(ctx, newClient(t, []string{px.Addr()}), prefix(t)+"/"+k.Name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ps[i] = &peer{l: l, px: px}
	}
	lockUnlock := func(l etcdbench.Locker, n int) {
		for range n {
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range ps {
		lockUnlock(p.l, block) // connections, lease, HPACK tables
	}
	for range uncontendedCostN / block {
		for _, p := range ps {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			s0, r0 := p.px.Bytes()
			lockUnlock(p.l, block)
			s1, r1 := p.px.Bytes()
			runtime.ReadMemStats(&m1)
			p.sent, p.received = p.sent+s1-s0, p.received+r1-r0
			p.mallocs, p.bytes = p.mallocs+m1.Mallocs-m0.Mallocs, p.bytes+m1.TotalAlloc-m0.TotalAlloc
		}
	}
	for i, p := range ps {
		t.Logf("%-17s per Lock+Unlock: %4d bytes sent, %4d received; %3d allocations, %5d bytes (the process's, with the member's share)",
			benchKinds[i].Name, p.sent/uncontendedCostN, p.received/uncontendedCostN, p.mallocs/uncontendedCostN, p.bytes/uncontendedCostN)
	}
}
