package etcdlock

// RWMutex's waits, with their statistics and stuck reports, and its
// sync.Locker forms.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The interfaces RWMutex satisfies, as lockword.RWMutex does.
var (
	_ lockword.ContextLocker = (*RWMutex)(nil)
	_ interface {
		sync.Locker
		RLock()
		RUnlock()
		RLocker() sync.Locker
		RLockContext(context.Context) error
	} = (*RWMutex)(nil)
)

// rwWait is one acquisition of an RWMutex, read or write: when it began,
// whether and how often it waited, and whether its stuck report was made.
type rwWait struct {
	rw       *RWMutex
	start    time.Time
	slow     bool
	parks    uint64
	reported bool
}

func (rw *RWMutex) newWait() *rwWait {
	return &rwWait{rw: rw, start: time.Now()}
}

// acquired counts the acquisition in rw's statistics.
func (w *rwWait) acquired() {
	w.rw.stats.acquired(w.slow, w.parks, time.Since(w.start))
}

// gone waits until kv's key is deleted or changed after revision rev;
// its value names the process waited for (Holder JSON: a read key, a
// queue key, the hold record), which a stuck report names once the
// acquisition has waited past the stuck threshold.
func (w *rwWait) gone(ctx context.Context, kv *mvccKV, rev int64) error {
	w.slow = true
	w.parks++
	rw := w.rw
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := rw.m.cli.Watch(clientv3.WithRequireLeader(wctx), string(kv.Key), clientv3.WithRev(rev+1))
	var stuck <-chan time.Time
	if d := rw.m.stuckThreshold(); d > 0 && !w.reported {
		t := time.NewTimer(max(d-time.Since(w.start), 0))
		defer t.Stop()
		stuck = t.C
	}
	for {
		select {
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || wr.Canceled || len(wr.Events) > 0 {
				return ctx.Err() // nil: look again
			}
		case <-rw.m.lost:
			return ErrLeaseLost
		case <-ctx.Done():
			return ctx.Err()
		case <-stuck:
			stuck, w.reported = nil, true
			w.reportStuck(kv)
		}
	}
}

// reportStuck logs the stuck report of a wait for kv's process.
func (w *rwWait) reportStuck(kv *mvccKV) {
	h := Holder{Lease: kv.Lease}
	if len(kv.Value) > 0 {
		json.Unmarshal(kv.Value, &h) // an unreadable value names only the lease
	} else {
		// A writer that took the lock on its fast path writes no value in
		// its key: the writers' hold record names it.
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		var rec ownerRecord
		if r, err := w.rw.m.cli.Get(ctx, w.rw.m.ownerKey); err == nil && len(r.Kvs) == 1 &&
			json.Unmarshal(r.Kvs[0].Value, &rec) == nil && rec.Key == string(kv.Key) {
			h = rec.Holder
		}
	}
	w.rw.m.log.Warn("etcdlock: still waiting for an etcd RWMutex past the stuck threshold; the process waited for may be slow, stopped, or cut off (its lease ends its hold)",
		append(w.rw.m.logAttrs(), "waited", time.Since(w.start).Round(time.Millisecond), "waiter", w.rw.m.me.String(),
			"waiting_for", string(kv.Key), "holder_host", h.Host, "holder_pid", h.PID, "holder_lease", leaseText(h.Lease))...)
}

// EnableStats starts collecting statistics of rw's acquisitions, read and
// write together (as lockword.RWMutex): an acquisition is slow when it
// waited (a write for the writers before it or for readers, a read for a
// writer), and Parks counts its waits, one per key waited for.
func (rw *RWMutex) EnableStats() {
	rw.m.EnableStats() // the writers' Mutex: whether a write queued
	rw.stats.on.Store(true)
}

// Stats returns rw's statistics since EnableStats.
func (rw *RWMutex) Stats() lockword.Stats {
	s := &rw.stats
	return lockword.Stats{
		Acquisitions: s.acquires.Load(),
		SlowPath:     s.slow.Load(),
		Parks:        s.parks.Load(),
		WaitTotal:    time.Duration(s.waitNs.Load()),
		WaitMax:      time.Duration(s.waitMax.Load()),
	}
}

// SetStuckThreshold sets how long an acquisition of rw, read or write,
// waits before it logs a stuck report (one log/slog warning per
// acquisition, naming the lock and the process it waits for: its host,
// PID and lease); 0 restores lockword.DefaultStuckThreshold, a negative
// value disables the report.
func (rw *RWMutex) SetStuckThreshold(threshold time.Duration) { rw.m.SetStuckThreshold(threshold) }

// SetRepair sets the function that Lock runs, holding the write lock,
// when it takes the lock from a dead writer; nil removes it. See
// Mutex.SetRepair.
func (rw *RWMutex) SetRepair(fn func() error) { rw.m.SetRepair(fn) }

// Lock takes the write lock, waiting until it is available, as
// Mutex.Lock: on a dead writer it runs the repair function (SetRepair),
// or without one (or if it fails) unlocks unrepaired and panics; it
// panics on ErrNotRecoverable, ErrCorrupt and ErrLeaseLost, and retries
// network errors, logging each. Use LockContext where the network may
// fail.
func (rw *RWMutex) Lock() {
	rw.retrying("Lock", func() error {
		err := rw.LockContext(context.Background())
		if errors.Is(err, lockword.ErrOwnerDead) {
			rw.repairOrPanic(err)
			return nil
		}
		return err
	})
}

// repairOrPanic is Mutex.repairOrPanic for the write hold: an unrepaired
// hold released before the panic is no longer rw's.
func (rw *RWMutex) repairOrPanic(dead error) {
	ok := false
	defer func() {
		if !ok {
			rw.writer.Store(0)
		}
	}()
	rw.m.repairOrPanic(dead)
	ok = true
}

// RLock takes a read lock, waiting until it is available. It panics on
// ErrNotRecoverable, ErrCorrupt and ErrLeaseLost, and retries network
// errors, logging each, as Lock. Use RLockContext where the network may
// fail.
func (rw *RWMutex) RLock() {
	rw.retrying("RLock", func() error { return rw.RLockContext(context.Background()) })
}

// retrying runs lock until it returns nil; it panics on the errors that
// retrying cannot cure, and logs and retries the others (the network's),
// backing off from lockRetryMin to lockRetryMax.
func (rw *RWMutex) retrying(what string, lock func() error) {
	pause := lockRetryMin
	for {
		err := lock()
		switch {
		case err == nil:
			return
		case errors.Is(err, lockword.ErrNotRecoverable), errors.Is(err, lockword.ErrCorrupt), errors.Is(err, ErrLeaseLost):
			panic(err)
		}
		rw.m.log.Warn("etcdlock: RWMutex."+what+" failed, retrying", append(rw.m.logAttrs(), "err", err, "retry_in", pause)...)
		time.Sleep(pause)
		pause = min(2*pause, lockRetryMax)
	}
}

// RLocker returns a sync.Locker whose Lock and Unlock are rw's RLock and
// RUnlock, as sync.RWMutex.RLocker.
func (rw *RWMutex) RLocker() sync.Locker { return rlocker{rw} }

type rlocker struct{ rw *RWMutex }

func (r rlocker) Lock()   { r.rw.RLock() }
func (r rlocker) Unlock() { r.rw.RUnlock() }
