package lockword

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Benchmarks of every lock against its standard-library peer, in one file so
// that one benchstat run compares them (see BENCHMARKS.md):
//
//	go test -run '^$' -bench . -cpu 2 -count 10 | tee new.txt
//	benchstat -col /kind new.txt
//
// ns/op is wall time per acquisition across all goroutines (the inverse of
// throughput); Macq/s is millions of acquisitions per second.

type benchKind struct {
	name string
	new  func() sync.Locker
}

var benchKinds = []benchKind{
	{"sync", func() sync.Locker { return new(sync.Mutex) }},
	{"mutex", func() sync.Locker { return new(Mutex) }},
	{"spin", func() sync.Locker { return new(SpinMutex) }},
}

// paddedLocker keeps the lock alone on its cache lines, so that false
// sharing with the benchmark's own variables does not pollute the figure.
type paddedLocker struct {
	_ [128]byte
	l sync.Locker
	_ [128]byte
}

// spinWork burns roughly n small steps of CPU, to model work inside and
// outside the critical section.
//
//go:noinline
func spinWork(n int) int {
	x := 1
	for i := 0; i < n; i++ {
		x = x*31 + i
	}
	return x
}

var sink int

// benchmarkUncontended measures one goroutine's Lock+Unlock.
func benchmarkUncontended(b *testing.B, l sync.Locker) {
	p := &paddedLocker{l: l}
	for b.Loop() {
		p.l.Lock()
		p.l.Unlock()
	}
}

// benchmarkContended runs goroutines that share b.N acquisitions of one
// lock, doing workInside steps while holding it and workOutside between.
func benchmarkContended(b *testing.B, l sync.Locker, goroutines, workInside, workOutside int) {
	p := &paddedLocker{l: l}
	var wg sync.WaitGroup
	start := make(chan struct{})
	per, extra := b.N/goroutines, b.N%goroutines
	for g := range goroutines {
		n := per
		if g < extra {
			n++
		}
		wg.Go(func() {
			local := 0
			<-start
			for range n {
				p.l.Lock()
				local += spinWork(workInside)
				p.l.Unlock()
				local += spinWork(workOutside)
			}
			sink += local & 0 // keep local live without a data race
		})
	}
	b.ResetTimer()
	t0 := time.Now()
	close(start)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds()/1e6, "Macq/s")
}

func BenchmarkUncontended(b *testing.B) {
	for _, k := range benchKinds {
		b.Run("kind="+k.name, func(b *testing.B) { benchmarkUncontended(b, k.new()) })
	}
}

func BenchmarkContended(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range benchKinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.name, g), func(b *testing.B) {
				benchmarkContended(b, k.new(), g, 0, 0)
			})
		}
	}
}

// BenchmarkContendedWork holds the lock for a short critical section and
// works between acquisitions, a shape closer to real services.
func BenchmarkContendedWork(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range benchKinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.name, g), func(b *testing.B) {
				benchmarkContended(b, k.new(), g, 20, 100)
			})
		}
	}
}
