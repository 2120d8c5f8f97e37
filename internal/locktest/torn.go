package locktest

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// TornResult is what CheckTornReads saw.
type TornResult struct {
	Reads, Violations, Backwards int
	Distinct                     int // distinct values seen by reader 0
}

// TornPayload is the Concurrency Kit seqlock payload: every consistent
// snapshot has B == A+1000 and C == A+B. Each package's tests declare
// their own payload type of this shape (P of CheckTornReads), so that
// their literals stay positional.
type TornPayload struct{ A, B, C uint64 }

// Consistent is whether p is a snapshot that some store wrote whole.
func (p TornPayload) Consistent() bool { return p.B == p.A+1000 && p.C == p.A+p.B }

// CheckTornReads is the seqlock check of both packages. It runs writers
// that store consistent payloads with rising A, and readers that load
// until reads snapshots are checked. A violation is an inconsistent
// snapshot (a torn read); Backwards counts a reader seeing A older than
// it saw before (with several writers, the store order need not follow
// A, so only the single-writer check uses it). With writers == 0 the
// writer is another process's.
func CheckTornReads[P ~struct{ A, B, C uint64 }](store func(P), load func() P, readers, writers, reads int) TornResult {
	defer Watchdog("seqlock", 3*time.Minute)()
	var res TornResult
	var stop atomic.Bool
	var next atomic.Uint64 // values handed to writers; stores of several writers are serialized
	var wwg, rwg sync.WaitGroup
	writing := make(chan struct{}) // closed after the first store: readers overlap the writers
	var once sync.Once
	for range writers {
		wwg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				a := next.Add(1)
				store(P{a, a + 1000, 2*a + 1000})
				once.Do(func() { close(writing) })
				if i%128 == 0 {
					runtime.Gosched() // let readers in when GOMAXPROCS=1
				}
			}
		})
	}
	if writers > 0 {
		<-writing // with none here, the writer is another process's
	}
	var violations, backwards atomic.Int64
	per := reads / readers
	for r := range readers {
		rwg.Go(func() {
			last, distinct, bad, back := uint64(0), 0, 0, 0
			for i := range per {
				if i%1024 == 0 {
					runtime.Gosched() // let the writer in when GOMAXPROCS=1
				}
				p := TornPayload(load())
				if !p.Consistent() {
					bad++
				}
				if p.A < last {
					back++
				}
				if p.A != last {
					distinct++
				}
				last = p.A
			}
			violations.Add(int64(bad))
			backwards.Add(int64(back))
			if r == 0 {
				res.Distinct = distinct
			}
		})
	}
	rwg.Wait()
	stop.Store(true)
	wwg.Wait()
	res.Reads = per * readers
	res.Violations = int(violations.Load())
	res.Backwards = int(backwards.Load())
	return res
}
