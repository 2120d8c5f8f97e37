package lockword

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestUpdateEveryAtomicType(t *testing.T) {
	var i32 atomic.Int32
	if old, new := Update(&i32, func(v int32) int32 { return v - 3 }); old != 0 || new != -3 || i32.Load() != -3 {
		t.Errorf("Int32: %d %d %d", old, new, i32.Load())
	}
	var i64 atomic.Int64
	i64.Store(1 << 40)
	if old, new := Update(&i64, func(v int64) int64 { return v * 2 }); old != 1<<40 || new != 1<<41 {
		t.Errorf("Int64: %d %d", old, new)
	}
	var u32 atomic.Uint32
	Update(&u32, func(v uint32) uint32 { return v | 0x80 })
	var u64 atomic.Uint64
	Update(&u64, func(v uint64) uint64 { return v + 7 })
	var up atomic.Uintptr
	Update(&up, func(v uintptr) uintptr { return v + 1 })
	if u32.Load() != 0x80 || u64.Load() != 7 || up.Load() != 1 {
		t.Errorf("Uint32 %d Uint64 %d Uintptr %d", u32.Load(), u64.Load(), up.Load())
	}
	var b atomic.Bool
	if old, new := Update(&b, func(v bool) bool { return !v }); old || !new || !b.Load() {
		t.Errorf("Bool: %v %v", old, new)
	}
	type config struct{ limit int }
	var p atomic.Pointer[config]
	p.Store(&config{limit: 1})
	_, next := Update(&p, func(c *config) *config { return &config{limit: c.limit + 1} })
	if p.Load() != next || next.limit != 2 {
		t.Errorf("Pointer: %+v", p.Load())
	}
	var v atomic.Value
	v.Store("a")
	if old, new := Update(&v, func(s any) any { return s.(string) + "b" }); old != "a" || new != "ab" {
		t.Errorf("Value: %v %v", old, new)
	}
}

// pairUpdate adds one to both 32-bit halves of x. A lost update leaves the
// total short; the halves always stay equal.
func pairUpdate(v uint64) uint64 { return v + 1<<32 + 1 }

// hammerUpdate runs workers goroutines of iters updates each through
// update and returns the final word.
func hammerUpdate(update func(*atomic.Uint64, func(uint64) uint64), workers, iters int) uint64 {
	defer watchdog("update", 2*time.Minute)()
	var x atomic.Uint64
	var wg sync.WaitGroup
	start := make(chan struct{}) // all workers begin together, so that they overlap
	for range workers {
		wg.Go(func() {
			<-start
			for i := range iters {
				update(&x, pairUpdate)
				if i%256 == 0 {
					spinWork(i % 64) // vary the interleaving
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return x.Load()
}

func TestUpdateHammer(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, workers := range []int{4, 64} {
			t.Run(fmt.Sprintf("procs=%d/workers=%d", procs, workers), func(t *testing.T) {
				withGOMAXPROCS(t, procs)
				iters := scaled(400_000) / workers
				got := hammerUpdate(func(x *atomic.Uint64, f func(uint64) uint64) { Update(x, f) }, workers, iters)
				want := uint64(workers * iters)
				if got>>32 != want || uint32(got) != uint32(want) {
					t.Fatalf("after %d updates: halves %d and %d", want, got>>32, uint32(got))
				}
			})
		}
	}
}

// TestUpdateHammerCatchesBrokenUpdate shows that the hammer's total fails
// for a read-modify-write without compare-and-swap.
func TestUpdateHammerCatchesBrokenUpdate(t *testing.T) {
	withGOMAXPROCS(t, 2)
	// Load, then store without CAS; yielding in between, as a goroutine
	// preempted there would, makes the lost updates show even when the
	// OS lets the workers run only one at a time.
	var n atomic.Int64
	broken := func(x *atomic.Uint64, f func(uint64) uint64) {
		v := x.Load()
		if n.Add(1)%16 == 0 {
			runtime.Gosched()
		}
		x.Store(f(v))
	}
	for round := 0; ; round++ {
		got := hammerUpdate(broken, 4, 50_000)
		if got>>32 != 200_000 {
			t.Logf("caught: %d of 200000 updates survived", got>>32)
			return
		}
		if round == 9 {
			t.Fatal("load-then-store update lost nothing in 10 rounds: the total check cannot fail")
		}
	}
}

func TestUpdateIf(t *testing.T) {
	withGOMAXPROCS(t, 2)
	var tickets atomic.Int64
	tickets.Store(1000)
	var won atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 300 {
				old, new, ok := UpdateIf(&tickets, func(v int64) (int64, bool) { return v - 1, v > 0 })
				if ok {
					won.Add(1)
					if new != old-1 || old <= 0 {
						t.Errorf("UpdateIf took %d -> %d", old, new)
					}
				} else if old != 0 || new != 0 {
					t.Errorf("refused update reported %d -> %d", old, new)
				}
			}
		})
	}
	wg.Wait()
	if won.Load() != 1000 || tickets.Load() != 0 {
		t.Fatalf("%d tickets taken, %d left; want 1000 and 0", won.Load(), tickets.Load())
	}
}

func TestUpdateMaxMin(t *testing.T) {
	withGOMAXPROCS(t, 2)
	var hi, lo atomic.Int64
	hi.Store(-1 << 62)
	lo.Store(1 << 62)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10_000 {
				v := int64((i*7919+w*104729)%20_011) - 10_000
				UpdateMax(&hi, v)
				UpdateMin(&lo, v)
			}
		})
	}
	wg.Wait()
	if hi.Load() != 10_010 || lo.Load() != -10_000 {
		t.Fatalf("max %d min %d, want 10010 and -10000", hi.Load(), lo.Load())
	}
	var u atomic.Uint32
	u.Store(5)
	if old := UpdateMax(&u, 3); old != 5 || u.Load() != 5 {
		t.Fatalf("UpdateMax(3) on 5: old %d now %d", old, u.Load())
	}
	if old := UpdateMin(&u, 3); old != 5 || u.Load() != 3 {
		t.Fatalf("UpdateMin(3) on 5: old %d now %d", old, u.Load())
	}
}

// ---- Benchmarks: a shared counter, with and without a lock ----
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench 'Counter' -cpu 2 -benchtime 200ms -count 5 .
//
// ns/op is wall time per increment across all goroutines; Mops/s its
// inverse. work is spinWork steps inside the update (f, or the critical
// section) and outside, between updates.

type counterKind struct {
	name string
	make func() func(work int) // returns an increment of one shared counter
}

var counterKinds = []counterKind{
	{"atomic-add", func() func(int) {
		x := new(paddedUint64)
		return func(work int) { spinWork(work); x.v.Add(1) }
	}},
	{"update", func() func(int) {
		x := new(paddedUint64)
		return func(work int) { Update(&x.v, func(v uint64) uint64 { return v + uint64(spinWork(work)&0) + 1 }) }
	}},
	{"mutex", lockedCounter(func() sync.Locker { return new(Mutex) })},
	{"spin", lockedCounter(func() sync.Locker { return new(SpinMutex) })},
	{"sync", lockedCounter(func() sync.Locker { return new(sync.Mutex) })},
}

type paddedUint64 struct {
	_ [falseSharingRange]byte
	v atomic.Uint64
	_ [falseSharingRange]byte
}

func lockedCounter(newLock func() sync.Locker) func() func(int) {
	return func() func(int) {
		p := &paddedLocker{l: newLock()}
		n := new(struct {
			_ [falseSharingRange]byte
			v uint64
			_ [falseSharingRange]byte
		})
		return func(work int) {
			p.l.Lock()
			n.v += uint64(spinWork(work)&0) + 1
			p.l.Unlock()
		}
	}
}

func benchmarkCounter(b *testing.B, inc func(int), goroutines, workInside, workOutside int) {
	runShared(b, goroutines, "Mops/s", func(g, n int) {
		for range n {
			inc(workInside)
			spinWork(workOutside)
		}
	})
}

// BenchmarkCounter: the update is one add (f trivial).
func BenchmarkCounter(b *testing.B) {
	for _, g := range []int{1, 2, 4, 16} {
		for _, k := range counterKinds {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.name, g), func(b *testing.B) {
				benchmarkCounter(b, k.make(), g, 0, 0)
			})
		}
	}
}

// BenchmarkCounterSlowUpdate: the update itself takes about 200 ns of work
// (f, or the critical section): where a CAS loop wastes retries.
func BenchmarkCounterSlowUpdate(b *testing.B) {
	for _, g := range []int{2, 16} {
		for _, k := range counterKinds[1:] {
			b.Run(fmt.Sprintf("kind=%s/goroutines=%d", k.name, g), func(b *testing.B) {
				benchmarkCounter(b, k.make(), g, 200, 0)
			})
		}
	}
}

// BenchmarkUncontendedUpdate is the cost of one increment with nobody else
// around, for each kind of counter.
func BenchmarkUncontendedUpdate(b *testing.B) {
	for _, k := range counterKinds {
		b.Run("kind="+k.name, func(b *testing.B) {
			inc := k.make()
			for b.Loop() {
				inc(0)
			}
		})
	}
}
