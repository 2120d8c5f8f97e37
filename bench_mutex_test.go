package lockword

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// Benchmarks of issue 11.1, Mutex's starvation bound: every mutual
// exclusion lock beside sync.Mutex in the same benchmark, so that one
// benchstat run compares them (the commands are in BENCHMARKS.md):
//
//	go test -run '^$' -bench 'WaitTail|Starve|ContendedWork' -cpu 2 -count 6 | tee new.txt
//	benchstat -col /kind new.txt
//
// Unlike BenchmarkContended (locktest.BenchContended), which gives each goroutine b.N/goroutines
// acquisitions (so that with an unfair lock the favoured goroutines finish
// early and the rest run uncontended), these shapes share one count of b.N
// acquisitions, kept under the lock, and every goroutine contends until
// it is reached. Besides Macq/s each reports owner-changes/1000 (how often
// the lock passed to another goroutine, per 1,000 acquisitions; 1000 is a
// strict round robin, an unfair lock that lets a goroutine re-lock at once
// shows few) and max/min (the most acquisitions by one goroutine over the
// fewest).

// mutexBenchKinds are the mutual exclusion locks of issue 11.1.
var mutexBenchKinds = []benchKind{
	{"sync", func() sync.Locker { return new(sync.Mutex) }},
	{"mutex", func() sync.Locker { return new(Mutex) }},
	{"spin", func() sync.Locker { return new(SpinMutex) }},
}

// lockShape is locktest's contended workload.
type lockShape = locktest.LockShape

// benchmarkLockShape is locktest.BenchLockShape with p99.9-ms among the
// timed waits, as the in-process tables of BENCHMARKS.md carry it.
func benchmarkLockShape(b *testing.B, l sync.Locker, s lockShape) {
	s.P999 = true
	locktest.BenchLockShape(b, l, s)
}

// workSteps is locktest.WorkSteps: a duration in spinWork steps.
func workSteps(d time.Duration) int { return locktest.WorkSteps(d) }

// BenchmarkWaitTail is the wait of every acquisition, empty critical
// section, nothing between: p50, p99, p99.9 and the worst wait at 2, 4,
// 16 and 64 goroutines. Run it with -benchtime 200ms, 1s and 3s.
func BenchmarkWaitTail(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range mutexBenchKinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.Name, g), func(b *testing.B) {
				benchmarkLockShape(b, k.New(), lockShape{Goroutines: g, TimeWaits: true})
			})
		}
	}
}

// BenchmarkStarve is the lockskew shape: goroutine 0 re-locks in a tight
// loop (Unlock, Lock, nothing between) beside 1 or 3 others that work
// 1 µs between acquisitions; the waits are those of the others, the
// victims of an unfair lock.
func BenchmarkStarve(b *testing.B) {
	for _, others := range []int{1, 3} {
		for _, k := range mutexBenchKinds {
			b.Run(fmt.Sprintf("kind=%s/others=%d", k.Name, others), func(b *testing.B) {
				benchmarkLockShape(b, k.New(), lockShape{
					Goroutines: others + 1, Outside: workSteps(time.Microsecond), TimeWaits: true, Greedy: true,
				})
			})
		}
	}
}

// contendedWorkShapes are BenchmarkContendedWork's critical sections:
// none at all, the 20 steps inside and 100 outside that bench/all.sh has
// always run, and issue 11.1's 100 ns inside with 100 ns or 1 µs outside.
var contendedWorkShapes = []struct {
	name            string
	inside, outside time.Duration
	insideSteps     int // when set, steps instead of durations
	outsideSteps    int
}{
	{name: "none"},
	{name: "in20steps-out100steps", insideSteps: 20, outsideSteps: 100},
	{name: "in100ns-out100ns", inside: 100 * time.Nanosecond, outside: 100 * time.Nanosecond},
	{name: "in100ns-out1us", inside: 100 * time.Nanosecond, outside: time.Microsecond},
}

// BenchmarkContendedWork holds the lock for a short critical section and
// works between acquisitions, a shape closer to real services, at 2, 4,
// 16 and 64 goroutines, every lock beside sync.Mutex.
func BenchmarkContendedWork(b *testing.B) {
	for _, g := range []int{2, 4, 16, 64} {
		for _, k := range benchKinds {
			for _, w := range contendedWorkShapes {
				b.Run(fmt.Sprintf("kind=%s/goroutines=%d/work=%s", k.Name, g, w.name), func(b *testing.B) {
					s := lockShape{Goroutines: g, Inside: w.insideSteps, Outside: w.outsideSteps}
					if w.inside > 0 || w.outside > 0 {
						s.Inside, s.Outside = workSteps(w.inside), workSteps(w.outside)
					}
					benchmarkLockShape(b, k.New(), s)
				})
			}
		}
	}
}
