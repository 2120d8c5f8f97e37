package lockword

import (
	"fmt"
	"sync"
	"testing"
)

// Cond's benchmarks, in the shape of Go's sync.Cond benchmarks: a barrier
// of waiters+1 goroutines on one lock and one condition variable. Each
// goroutine, b.N times, takes the lock and arrives; the last to arrive
// starts the next round with Broadcast, the others Wait. So every round is
// one Broadcast that wakes waiters goroutines, each of which then takes
// the lock. The peers are in the same benchmark (impl=), so that one
// benchstat run compares them; the commands are in BENCHMARKS.md:
//
//	go test -run '^$' -bench 'BenchmarkCond$' -cpu 2 -count 6 | tee cond.txt
//	benchstat -col /impl cond.txt
//
// impl=sync.Cond is sync.Cond over sync.Mutex; impl=Cond+sync.Mutex is
// ours over the same lock (the difference is the condition variable's
// own); impl=Cond+Mutex is ours over our Mutex; impl=sync.Cond+Mutex is
// sync.Cond over our Mutex (against Cond+Mutex: the condition variable's
// cost when the lock is ours; against sync.Cond: the lock's).

// condBenchImpls are the condition variables compared, each with its lock.
var condBenchImpls = []struct {
	name string
	new  func() (sync.Locker, condVar)
}{
	{"sync.Cond", func() (sync.Locker, condVar) { l := new(sync.Mutex); return l, sync.NewCond(l) }},
	{"Cond+sync.Mutex", func() (sync.Locker, condVar) { l := new(sync.Mutex); return l, NewCond(l) }},
	{"Cond+Mutex", func() (sync.Locker, condVar) { l := new(Mutex); return l, NewCond(l) }},
	{"sync.Cond+Mutex", func() (sync.Locker, condVar) { l := new(Mutex); return l, sync.NewCond(l) }},
}

func BenchmarkCond(b *testing.B) {
	for _, waiters := range []int{1, 2, 4, 8, 16, 32} {
		for _, impl := range condBenchImpls {
			b.Run(fmt.Sprintf("waiters=%d/impl=%s", waiters, impl.name), func(b *testing.B) {
				l, c := impl.new()
				benchmarkCondBarrier(b, l, c, waiters)
			})
		}
	}
}

// benchmarkCondBarrier runs the barrier of waiters+1 goroutines on l and c
// for b.N rounds per goroutine. A goroutine that has done its rounds ends
// the barrier for everyone (stop) and wakes them, since a round may then
// never fill.
func benchmarkCondBarrier(b *testing.B, l sync.Locker, c condVar, waiters int) {
	arrived := 0  // guarded by l
	stop := false // guarded by l
	var wg sync.WaitGroup
	for range waiters + 1 {
		wg.Go(func() {
			for range b.N {
				l.Lock()
				if stop {
					l.Unlock()
					break
				}
				arrived++
				if arrived == waiters+1 {
					arrived = 0
					c.Broadcast()
				} else {
					c.Wait() // a Cond never returns spuriously: no loop needed
				}
				l.Unlock()
			}
			l.Lock()
			stop = true
			c.Broadcast()
			l.Unlock()
		})
	}
	wg.Wait()
}
