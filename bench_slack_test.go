package lockword

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkParallelShapes are the four shapes of Go's own sync.Mutex
// benchmarks (BenchmarkMutex, MutexSlack, MutexWork, MutexWorkSlack),
// written here for every lock beside sync.Mutex: b.RunParallel's
// goroutines lock and unlock an empty critical section, one per processor
// or, slack, ten per processor (more goroutines than processors, so that
// a hand-over to a waiter that is not running shows), with or without
// about 100 steps of arithmetic between acquisitions (work). ns/op is
// the time per acquisition over all goroutines. The command is in
// BENCHMARKS.md:
//
//	go test -run '^$' -bench 'BenchmarkParallelShapes' -cpu 2 -count 6 | tee shapes.txt
//	benchstat -col /kind shapes.txt
func BenchmarkParallelShapes(b *testing.B) {
	parallelShapeKinds := append(mutexBenchKinds[:len(mutexBenchKinds):len(mutexBenchKinds)],
		benchKind{"ticket", func() sync.Locker { return new(TicketMutex) }})
	for _, shape := range []struct {
		name        string
		slack, work bool
	}{
		{"plain", false, false},
		{"slack", true, false},
		{"work", false, true},
		{"workslack", true, true},
	} {
		for _, k := range parallelShapeKinds {
			b.Run(fmt.Sprintf("shape=%s/kind=%s", shape.name, k.Name), func(b *testing.B) {
				p := &paddedLocker{l: k.New()}
				if shape.slack {
					b.SetParallelism(10)
				}
				b.RunParallel(func(pb *testing.PB) {
					x := 1
					for pb.Next() {
						p.l.Lock()
						p.l.Unlock()
						if shape.work {
							for range 100 {
								x = x*3 + 1 // a dependent chain the compiler keeps
							}
						}
					}
					sink += x & 0 // keep x live without a data race
				})
			})
		}
	}
}
