package etcdlock

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

type mvccKV = mvccpb.KeyValue

// stats are a Mutex's contention statistics, counted by this Mutex (this
// process's acquisitions through it), as lockword.Stats.
type stats struct {
	on       atomic.Bool
	acquires atomic.Uint64
	slow     atomic.Uint64
	parks    atomic.Uint64
	waitNs   atomic.Int64
	waitMax  atomic.Int64
}

func (s *stats) acquired(slow bool, parks uint64, wait time.Duration) {
	if !s.on.Load() {
		return
	}
	s.acquires.Add(1)
	if !slow {
		return
	}
	s.slow.Add(1)
	s.parks.Add(parks)
	s.waitNs.Add(int64(wait))
	for {
		old := s.waitMax.Load()
		if int64(wait) <= old || s.waitMax.CompareAndSwap(old, int64(wait)) {
			return
		}
	}
}

// EnableStats starts collecting statistics of m's acquisitions: an
// acquisition is slow when the lock was not free, so that it queued; Parks
// counts the waits on the key queued before ours.
func (m *Mutex) EnableStats() { m.stats.on.Store(true) }

// Stats returns m's statistics since EnableStats.
func (m *Mutex) Stats() lockword.Stats {
	return lockword.Stats{
		Acquisitions: m.stats.acquires.Load(),
		SlowPath:     m.stats.slow.Load(),
		Parks:        m.stats.parks.Load(),
		WaitTotal:    time.Duration(m.stats.waitNs.Load()),
		WaitMax:      time.Duration(m.stats.waitMax.Load()),
	}
}

// SetStuckThreshold sets how long a waiter of m waits before it logs a
// stuck report (one log/slog warning per wait, naming the lock and the
// holder's host, PID and lease, and how long it has held);
// 0 restores lockword.DefaultStuckThreshold, a negative value disables
// the report.
func (m *Mutex) SetStuckThreshold(threshold time.Duration) { m.stuckNs.Store(int64(threshold)) }

func (m *Mutex) stuckThreshold() time.Duration {
	switch d := time.Duration(m.stuckNs.Load()); {
	case d == 0:
		return lockword.DefaultStuckThreshold
	case d < 0:
		return 0
	default:
		return d
	}
}

// reportStuck logs the stuck report of a wait that began at start.
func (m *Mutex) reportStuck(ctx context.Context, start time.Time) {
	args := append(m.logAttrs(), "waited", time.Since(start).Round(time.Millisecond), "waiter", m.me.String())
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if r, err := m.cli.Get(rctx, m.ownerKey); err == nil && len(r.Kvs) == 1 {
		var rec ownerRecord
		if json.Unmarshal(r.Kvs[0].Value, &rec) == nil {
			args = append(args, "holder_host", rec.Host, "holder_pid", rec.PID,
				"holder_lease", leaseText(rec.Lease), "holder_state", rec.State,
				"held_for", time.Since(time.Unix(0, rec.SinceUnixNs)).Round(time.Millisecond))
		}
	}
	m.log.Warn("etcdlock: still waiting for an etcd lock past the stuck threshold; the holder may be slow, stopped, or cut off (its lease ends its hold)", args...)
}
