//go:build linux

package shm

import (
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestInspectQueueSnapshotAgainstRetire: while a ticket held by a dead
// owner is retired on its behalf (the record marked skip-dead, the lock
// marked inconsistent, serving moved on, the next ticket taken, the mark
// cleared by a repair), the lock always has a holder to name: the owner
// itself, or the dead PID an owner-dead lock reports. Inspect must never
// show it free or handed off without one, at any point of the retire: the
// torture supervisor judges whether a killed process held the lock from
// exactly that (a snapshot that read the flags before the retire and
// serving after it showed "free", holder 0, and a killed holder's recovery
// was then counted as a recovery of no holder's death).
//
// The writer goroutine plays the retirer and the next holder with the
// protocol's store order, one retire per microsecond; the test goroutine
// inspects meanwhile. On 2
// cores the old snapshot order was caught within a fraction of a second;
// the test runs for 1 s (LOCKWORD_LONG: 10 s), or until the first torn
// snapshot.
func TestInspectQueueSnapshotAgainstRetire(t *testing.T) {
	r, _, q := forgedTicket(t, "m")
	const deadPID = 4242
	q.deadPID.Store(deadPID)
	q.rec(0).Store(packRecord(0, q.token, recHolding))
	q.next.Store(1)

	run := time.Second
	if os.Getenv("LOCKWORD_LONG") != "" {
		run = 10 * time.Second
	}
	var stop atomic.Bool
	done := make(chan int)
	go func() {
		cycles := 0
		for s := uint32(0); !stop.Load(); s++ {
			q.rec(s).Store(packRecord(s, q.token, recSkippingDead)) // the retirer's CAS
			q.flags.Or(queueInconsistent)
			q.serving.Store(s + 1)
			q.rec(s).Store(0)
			q.rec(s + 1).Store(packRecord(s+1, q.token, recHolding)) // the next holder's claim
			q.next.Store(s + 2)
			q.flags.And(^uint32(queueInconsistent)) // its repair
			cycles++
			// A handover takes a futex wake at least: a microsecond
			// (the inspector's bounded retries assume no faster lock).
			for t0 := time.Now(); time.Since(t0) < time.Microsecond; {
			}
		}
		done <- cycles
	}()
	deadline := time.Now().Add(run)
	inspections := 0
	var torn string
	for time.Now().Before(deadline) && torn == "" {
		info, err := r.Inspect()
		if err != nil {
			t.Fatal(err)
		}
		inspections++
		for _, o := range info.Objects {
			if o.Name != "m" {
				continue
			}
			switch {
			case o.State == "corrupt":
				torn = "corrupt: " + o.Reason
			case o.HolderPID == 0:
				torn = "state " + o.State + ", holder PID 0"
			}
		}
	}
	stop.Store(true)
	cycles := <-done
	if torn != "" {
		t.Fatalf("after %d inspections (%d retires): a snapshot showed %s: it read the lock's words from different moments of one retire", inspections, cycles, torn)
	}
	t.Logf("%d inspections during %d retires, every one named a holder", inspections, cycles)
}
