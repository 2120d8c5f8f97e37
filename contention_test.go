package lockword

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkContentionProfile is the contention profile's cost: contended
// throughput at 16 goroutines with the profile off and sampling one wait
// in 100, for a lock that registers its waits (Mutex) and one that sleeps
// with a note (TicketMutex). Run the rates interleaved and compare them
// with benchstat (BENCHMARKS.md). Rate 1 samples every wait: its excess
// over rate 0 is the cost of one sampled wait.
func BenchmarkContentionProfile(b *testing.B) {
	for _, rate := range []int{0, 100, 1} {
		for _, k := range []struct {
			name string
			new  func() sync.Locker
		}{
			{"Mutex", func() sync.Locker { return new(Mutex) }},
			{"TicketMutex", func() sync.Locker { return new(TicketMutex) }},
		} {
			b.Run(fmt.Sprintf("kind=%s/rate=%d", k.name, rate), func(b *testing.B) {
				defer SetContentionProfileRate(SetContentionProfileRate(rate))
				benchmarkLockShape(b, k.new(), lockShape{Goroutines: 16, Inside: 20, Outside: 100})
			})
		}
	}
}
