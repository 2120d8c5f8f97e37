package bench

// Semaphore throughput and wait tail of lockword's Semaphore against
// golang.org/x/sync/semaphore.Weighted, in one run so that the ratios hold:
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench SemaphorePeers -cpu 2 -benchtime 200ms -count 6 ./bench
//
// Uncontended: one goroutine, Acquire(1)+Release(1). Contended: 4 permits,
// G goroutines each acquiring 1 and doing a little work while holding it
// (the shape of a pool of 4 connections). The wait tail is one Acquire in
// 32 timed, p99 and max reported beside ns/op.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"golang.org/x/sync/semaphore"
)

var semSink atomic.Int64

type semPeer struct {
	name string
	new  func(n int64) (acquire func(ctx context.Context, n int64) error, release func(n int64))
}

var semPeers = []semPeer{
	{"xsync-sem", func(n int64) (func(context.Context, int64) error, func(int64)) {
		s := semaphore.NewWeighted(n)
		return s.Acquire, s.Release
	}},
	{"lockword", func(n int64) (func(context.Context, int64) error, func(int64)) {
		s := lockword.NewSemaphore(n)
		return s.Acquire, s.Release
	}},
}

func BenchmarkSemaphorePeers(b *testing.B) {
	for _, p := range semPeers {
		b.Run(fmt.Sprintf("uncontended/%s", p.name), func(b *testing.B) {
			acquire, release := p.new(1)
			ctx := context.Background()
			for b.Loop() {
				acquire(ctx, 1)
				release(1)
			}
		})
	}
	for _, g := range []int{4, 16, 64} {
		for _, p := range semPeers {
			b.Run(fmt.Sprintf("permits=4/G=%d/%s", g, p.name), func(b *testing.B) {
				benchmarkSemContended(b, p, 4, g)
			})
		}
	}
}

// benchmarkSemContended: goroutines share b.N acquisitions of 1 permit of
// permits, with 10 steps of work while holding it.
func benchmarkSemContended(b *testing.B, p semPeer, permits int64, goroutines int) {
	acquire, release := p.new(permits)
	ctx := context.Background()
	per := b.N/goroutines + 1
	waits := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range goroutines {
		wg.Go(func() {
			var mine []time.Duration
			sum := 0
			for k := range per {
				if k%32 == 0 {
					start := time.Now()
					acquire(ctx, 1)
					mine = append(mine, time.Since(start))
				} else {
					acquire(ctx, 1)
				}
				sum += rwWork(10)
				release(1)
			}
			waits[i] = mine
			semSink.Add(int64(sum))
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(waits...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-wait-ns")
		b.ReportMetric(float64(all[len(all)-1].Nanoseconds()), "max-wait-ns")
	}
}
