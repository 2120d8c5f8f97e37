package shm

import "context"

// Housekeeping by Region open and close: the permits of a process that
// died holding them come back even when nobody acquires afterwards (an
// acquirer that finds the semaphore short takes them back too; see
// Semaphore). Each Open, after attaching, and each Close, before
// detaching, reaps the dead entries of every semaphore in the region's
// object table, under that semaphore's guard: so an entry is cleared, and
// its permits freed, exactly once, whoever else reaps at the same moment
// (an acquirer, another process's open or close). Nobody is told: the
// object's dead-holder and recovered counts, and lockword inspect, record
// it.
//
// The guard is only tried (a done context: take it if free, or from a dead
// holder, repairing the counts): a live holder is in a critical section of
// a few stores, and its own call, or a later open or close, reaps instead.
// So an open or close never waits on another process. A semaphore whose
// words are corrupt is left for its users' calls to report.

// reapSemaphores reaps the dead entries of the semaphores among objs, and
// returns the permits it freed. r.mu is held (Close holds it; Open's
// region is not yet shared): the handles it makes are not cached.
func (r *Region) reapSemaphores(objs map[string]regionObject) (permits int64) {
	if r.token == 0 {
		return 0 // not attached: an observer reaps nothing
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for name, o := range objs {
		if o.kind != kindSemaphore || o.size != semObjSize {
			continue
		}
		obj := r.data[o.offset : o.offset+uint64(o.size) : o.offset+uint64(o.size)]
		if word32(obj, semObjPermits).Load() == 0 {
			continue // no handle has recorded a capacity yet: nothing held
		}
		// This process's handle if it has one: its goroutines take the
		// guard one at a time through it (semaphoreguard.go).
		s, ok := r.handles[name].(*Semaphore)
		if !ok {
			s = newSharedSemaphore(r, name, obj)
		}
		if s.lock(done) != nil {
			continue
		}
		var rec semRecovery
		if testSemHousekeepingOff || s.reap(&rec) != nil {
			s.unlock(false, false, nil)
			continue
		}
		// A freed permit or a dead front: wake the front.
		s.unlock(rec.entries != 0, false, nil)
		permits += rec.permits
	}
	return permits
}

// testSemHousekeepingOff, set by tests only, makes open and close reap
// nothing, so that the housekeeping test is shown to fail without it.
var testSemHousekeepingOff bool
