//go:build linux

package shm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The shared hammers, one table over the robust exclusive kinds, as
// hammer_test.go is for the in-process ones: a plain counter and an owner
// slot in the region, checked inside the critical section, by goroutines
// over several handles (each a "process" with its own owner token) and by
// child processes. TestSharedHammerCatchesBrokenLock proves the checks
// fail on a lock that does nothing. The reader-writer hammers, which add
// an activity word, are sharedrw_test.go's.

// sharedKind is a robust exclusive kind under the shared hammers.
type sharedKind struct {
	name string
	kind string // robustLock's kind
	// processIters is each child goroutine's share of the processes
	// hammer: a ticket handover between processes is a kernel wake-up of
	// a chosen process, so the ticket lock gets fewer rounds.
	processIters int
	// cancelHandles, cancelWorkers and cancelRounds size the cancellation
	// stress; cancelSleepEvery (0: never) makes a holder sleep 100 µs
	// every that many rounds.
	cancelHandles, cancelWorkers, cancelRounds, cancelSleepEvery int
	// atRest reports whether the lock named name in r is free with nobody
	// queued.
	atRest func(r *Region, name string) error
}

// sharedKinds are the kinds under the shared hammers, sized for this run
// (scaled: testing.Short and the race detector shorten them).
func sharedKinds() []sharedKind {
	return []sharedKind{
		{"SharedMutex", "mutex", scaled(200_000) / 3, 2, 8, scaled(100_000) / 10, 500, func(r *Region, name string) error {
			m, _ := r.Mutex(name)
			if w := m.word.Load(); w&ownerMask != 0 {
				return fmt.Errorf("word %#x at rest", w)
			}
			return nil
		}},
		{"SharedTicketMutex", "ticket", scaled(100_000) / 3, 3, 9, scaled(50_000) / 10, 0, func(r *Region, name string) error {
			m, _ := r.TicketMutex(name)
			return queueAtRest(&m.q)
		}},
	}
}

func init() { childModes["hammer"] = childHammer }

// childBytes returns a hammer child's guarded bytes (64 bytes named
// name) and the start word that the parent sets once every child is ready.
func childBytes(r *Region, name string) (data, start []byte, err error) {
	if data, err = r.Bytes(name, 64); err != nil {
		return nil, nil, err
	}
	start, err = r.Bytes("start", 8)
	return data, start, err
}

// awaitStart tells the parent "ready" and waits for its start word: the
// children start together, as a process that ran alone would prove
// nothing about mutual exclusion between processes.
func awaitStart(start []byte) {
	fmt.Println("ready")
	for word32(start, 0).Load() == 0 {
		time.Sleep(time.Millisecond)
	}
}

// childHammer is runSharedHammer's child: it waits for the start word,
// runs sharedHammer on the lock, and prints "violations N". args: path,
// goroutines, iterations, ok or broken (brokenLock), and optionally the
// kind (see robustLock).
func childHammer(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	var l sync.Locker
	kind := "mutex"
	if len(args) > 4 {
		kind = args[4]
	}
	if args[3] == "broken" {
		l = brokenLock{}
	} else if l, err = robustLock(r, kind, "hammer"); err != nil {
		return err
	}
	data, start, err := childBytes(r, "guarded")
	if err != nil {
		return err
	}
	goroutines, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	iters, err := strconv.Atoi(args[2])
	if err != nil {
		return err
	}
	awaitStart(start)
	v := sharedHammer(l, data, goroutines, iters, os.Getpid())
	fmt.Println("violations", v)
	return nil
}

// sharedHammer runs goroutines × iters increments of a counter in shared
// memory under l, with an owner slot (a process-unique id) checked on
// entry and exit, and varied work inside. It returns the violations seen.
// The data is plain memory read and written non-atomically on purpose.
func sharedHammer(l sync.Locker, data []byte, goroutines, iters, pid int) int64 {
	var violations atomic.Int64
	hammerGoroutines(goroutines, iters, pid, func(_ int, id uint64, rnd uint32) {
		l.Lock()
		if n := sharedCritical(data, id, rnd); n != 0 {
			violations.Add(n)
		}
		l.Unlock()
	})
	return violations.Load()
}

// hammerGoroutines runs goroutines g = 0..n-1 and waits for them; each
// calls round iters times with its id, unique across processes (pid<<8 |
// g+1), and the next value of its xorshift32 sequence (seeded from the id),
// for cheap per-round variety in the critical section.
func hammerGoroutines(n, iters, pid int, round func(g int, id uint64, rnd uint32)) {
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			id := uint64(pid)<<8 | uint64(g+1)
			rnd := uint32(id) * 2654435761
			for range iters {
				rnd ^= rnd << 13
				rnd ^= rnd >> 17
				rnd ^= rnd << 5
				round(g, id, rnd)
			}
		})
	}
	wg.Wait()
}

// sharedCritical is the shared hammers' exclusive critical section: the
// owner slot data[8:16] set to the holder's id on entry and checked on
// exit, and a plain, non-atomic increment of the counter data[0:8] with
// varied work in between (a yield every 64 rounds, a little spinning every
// 4). It returns the violations it saw.
func sharedCritical(data []byte, id uint64, rnd uint32) (violations int64) {
	if ne.Uint64(data[8:]) != 0 {
		violations++
	}
	ne.PutUint64(data[8:], id)
	v := ne.Uint64(data)
	switch {
	case rnd%64 == 0:
		runtime.Gosched()
	case rnd%4 == 0:
		spinWork(int(rnd>>8) % 64)
	}
	ne.PutUint64(data, v+1)
	if ne.Uint64(data[8:]) != id {
		violations++
	}
	ne.PutUint64(data[8:], 0)
	return violations
}

// A robustLocker is a robust shared lock as the cross-process tests drive
// it: Mutex, TicketMutex, or the write side of RWMutex.
type robustLocker interface {
	Lock()
	Unlock()
	LockContext(context.Context) error
	MarkConsistent() error
}

// robustLock returns the robust lock of kind ("mutex", "ticket", or "rw"
// for an RW mutex's write side) named name in r.
func robustLock(r *Region, kind, name string) (robustLocker, error) {
	switch kind {
	case "mutex":
		return r.Mutex(name)
	case "ticket":
		return r.TicketMutex(name)
	case "rw":
		return r.RWMutex(name)
	}
	return nil, fmt.Errorf("unknown lock kind %q", kind)
}

// runSharedHammer runs procs child processes of goroutines × iters each
// on the lock of kind (see robustLock) and returns the final counter, the
// expected total and the violations.
func runSharedHammer(t *testing.T, kind string, procs, goroutines, iters int, broken bool) (got, want, violations int64) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	data, err := r.Bytes("guarded", 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := robustLock(r, kind, "hammer"); err != nil {
		t.Fatal(err)
	}
	mode := "ok"
	if broken {
		mode = "broken"
	}
	start, err := r.Bytes("start", 8)
	if err != nil {
		t.Fatal(err)
	}
	violations = runHammerChildren(t, start, procs, "hammer", path, strconv.Itoa(goroutines), strconv.Itoa(iters), mode, kind)
	return int64(ne.Uint64(data)), int64(procs * goroutines * iters), violations
}

// runHammerChildren starts procs children of mode with args, lets them
// go together through the start word once all are ready (awaitStart),
// and returns the sum of the violations they print.
func runHammerChildren(t *testing.T, start []byte, procs int, mode string, args ...string) (violations int64) {
	var children []*child
	for range procs {
		children = append(children, startChild(t, mode, args...))
	}
	for _, c := range children {
		c.expect(t, "ready")
	}
	word32(start, 0).Store(1)
	for _, c := range children {
		v, err := strconv.ParseInt(c.expect(t, "violations "), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		violations += v
		c.wait(t)
	}
	return violations
}

// TestSharedHammerProcesses: more processes than cores, several
// goroutines each, a plain counter and an owner slot in the region.
func TestSharedHammerProcesses(t *testing.T) {
	for _, k := range sharedKinds() {
		t.Run(k.name, func(t *testing.T) {
			procs := max(4, runtime.NumCPU()+2)
			iters := k.processIters
			got, want, violations := runSharedHammer(t, k.kind, procs, 3, iters, false)
			t.Logf("%d processes × 3 goroutines × %d: counter %d, want %d, violations %d", procs, iters, got, want, violations)
			if got != want || violations != 0 {
				t.Fatalf("counter %d, want %d; %d owner-slot violations", got, want, violations)
			}
		})
	}
}

// TestSharedHammerCatchesBrokenLock: the same checks, with a lock that
// does nothing, must report lost updates and owner-slot violations.
func TestSharedHammerCatchesBrokenLock(t *testing.T) {
	got, want, violations := runSharedHammer(t, "mutex", 3, 2, 20_000, true)
	t.Logf("broken lock: counter %d, want %d, violations %d", got, want, violations)
	if got == want {
		t.Error("broken lock: no lost updates: the counter check cannot fail")
	}
	if violations == 0 {
		t.Error("broken lock: no owner-slot violations: the owner check cannot fail")
	}
}

// TestSharedHammerHandles: goroutines over four handles, with the plain
// counter and the owner slot, GOMAXPROCS 1 and 2.
func TestSharedHammerHandles(t *testing.T) {
	for _, k := range sharedKinds() {
		for _, procs := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/procs=%d", k.name, procs), func(t *testing.T) {
				withGOMAXPROCS(t, procs)
				path := tempRegionPath(t)
				r := mustCreate(t, path, 0)
				hs := append(openHandles(t, path, 3), r)
				data, _ := r.Bytes("guarded", 64)
				var wg sync.WaitGroup
				var violations atomic.Int64
				// Every handover between handles is a kernel sleep and
				// wake-up of another thread of this process: slow on two
				// cores, so fewer rounds than in-process locks get.
				iters := scaled(10_000)
				for i, h := range hs {
					m, err := robustLock(h, k.kind, "t")
					if err != nil {
						t.Fatal(err)
					}
					wg.Go(func() { violations.Add(sharedHammer(m, data, 4, iters, 1000+i)) })
				}
				wg.Wait()
				want := uint64(len(hs) * 4 * iters)
				if got := ne.Uint64(data); got != want || violations.Load() != 0 {
					t.Fatalf("counter %d, want %d; %d owner-slot violations", got, want, violations.Load())
				}
				if err := k.atRest(r, "t"); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestSharedCancelStress mixes plain waiters with waiters whose deadlines
// end at random moments, over several handles: no cancellation may
// strand the others or stall the queue, and the counter stays exact.
func TestSharedCancelStress(t *testing.T) {
	for _, k := range sharedKinds() {
		t.Run(k.name, func(t *testing.T) {
			defer watchdog(k.name+" cancellation stress", 2*time.Minute)()
			path := tempRegionPath(t)
			r := mustCreate(t, path, 0)
			hs := append(openHandles(t, path, k.cancelHandles-1), r)
			data, _ := r.Bytes("data", 16)
			var acquired, cancelled, violations atomic.Int64
			var wg sync.WaitGroup
			rounds := k.cancelRounds
			for w := 1; w <= k.cancelWorkers; w++ {
				m, err := robustLock(hs[w%len(hs)], k.kind, "m")
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					for i := range rounds {
						if w%3 == 0 {
							ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%300)*time.Microsecond)
							err := m.LockContext(ctx)
							cancel()
							if err != nil {
								cancelled.Add(1)
								continue
							}
						} else {
							m.Lock()
						}
						if ne.Uint64(data[8:]) != 0 {
							violations.Add(1)
						}
						ne.PutUint64(data[8:], uint64(w))
						ne.PutUint64(data, ne.Uint64(data)+1)
						if k.cancelSleepEvery != 0 && i%k.cancelSleepEvery == 0 {
							time.Sleep(100 * time.Microsecond)
						}
						if ne.Uint64(data[8:]) != uint64(w) {
							violations.Add(1)
						}
						ne.PutUint64(data[8:], 0)
						acquired.Add(1)
						m.Unlock()
					}
				})
			}
			wg.Wait()
			if int64(ne.Uint64(data)) != acquired.Load() || violations.Load() != 0 {
				t.Fatalf("counter %d, acquisitions %d, violations %d", ne.Uint64(data), acquired.Load(), violations.Load())
			}
			if err := k.atRest(r, "m"); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d acquisitions, %d cancelled", acquired.Load(), cancelled.Load())
		})
	}
}
