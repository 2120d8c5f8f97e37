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

// CheckTornReads is the seqlock check of both packages (Concurrency Kit's
// payload: every consistent snapshot has b == a+1000 and c == a+b). It
// runs writers that call store(a) with rising a, storing {a, a+1000,
// 2a+1000}, and readers that call load until reads snapshots are checked;
// load returns the snapshot's a and whether it was consistent. A
// violation is an inconsistent snapshot (a torn read); Backwards counts a
// reader seeing a older than it saw before (with several writers, the
// store order need not follow a, so only the single-writer check uses
// it). With writers == 0 the writer is another process's.
func CheckTornReads(store func(a uint64), load func() (a uint64, consistent bool), readers, writers, reads int) TornResult {
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
				store(next.Add(1))
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
				a, ok := load()
				if !ok {
					bad++
				}
				if a < last {
					back++
				}
				if a != last {
					distinct++
				}
				last = a
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
