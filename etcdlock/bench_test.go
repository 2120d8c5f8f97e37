package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Benchmarks against etcd's own concurrency.Mutex, on the same embedded
// server (TestMain's: one member, loopback, no fsync, so that the figures
// are the locks' round trips, not the disk's), peers interleaved in one
// run. Uncontended: one client locks and unlocks; the p50 and p99 of one
// Lock+Unlock are reported beside the mean. Contended: N clients, each
// with its own lease, lock and unlock one lock; acquisitions per second.

// benchLocker is one lock under benchmark: Lock and Unlock with a context.
type benchLocker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type ourLock struct{ m *Mutex }

func (l ourLock) lock(ctx context.Context) error   { return l.m.LockContext(ctx) }
func (l ourLock) unlock(ctx context.Context) error { return l.m.UnlockContext(ctx) }

type etcdLock struct{ m *concurrency.Mutex }

func (l etcdLock) lock(ctx context.Context) error   { return l.m.Lock(ctx) }
func (l etcdLock) unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

// peers makes a lock of each kind on prefix p, with its own lease.
var peers = []struct {
	name string
	make func(b *testing.B, cli *clientv3.Client, p string) benchLocker
}{
	{"etcdlock", func(b *testing.B, cli *clientv3.Client, p string) benchLocker {
		m, err := NewMutex(context.Background(), cli, p, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
		return ourLock{m}
	}},
	{"concurrency", func(b *testing.B, cli *clientv3.Client, p string) benchLocker {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(DefaultTTL/time.Second)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return etcdLock{concurrency.NewMutex(s, p)}
	}},
}

// BenchmarkUncontended alternates the peers, one Lock+Unlock each per
// iteration, so that a shared, loaded host slows both alike; it reports
// each one's p50 and p99 and the ratio of the p50s (etcdlock over
// concurrency: the target is at most 1.2).
func BenchmarkUncontended(b *testing.B) {
	cli := newClient(b, endpoints)
	ctx := context.Background()
	ls := make([]benchLocker, len(peers))
	lat := make([][]time.Duration, len(peers))
	for i, peer := range peers {
		ls[i] = peer.make(b, cli, prefix(b)+"/"+peer.name)
	}
	for b.Loop() {
		for i, l := range ls {
			t0 := time.Now()
			if err := l.lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := l.unlock(ctx); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	p50 := make([]float64, len(peers))
	for i, peer := range peers {
		slices.Sort(lat[i])
		p50[i] = float64(lat[i][len(lat[i])/2].Microseconds())
		b.ReportMetric(p50[i], peer.name+"-p50-µs")
		b.ReportMetric(float64(lat[i][len(lat[i])*99/100].Microseconds()), peer.name+"-p99-µs")
	}
	b.ReportMetric(p50[0]/p50[1], "p50-ratio")
}

// BenchmarkContended: N clients, each a goroutine with its own etcd
// client and lease, lock and unlock one lock (empty critical section).
// It reports acquisitions per second and the p99 hand-over latency: from
// an Unlock's return to the return of the next acquisition that was
// already waiting when it was made.
func BenchmarkContended(b *testing.B) {
	for _, clients := range []int{1, 8, 16, 50} {
		for _, peer := range peers {
			b.Run(fmt.Sprintf("%s/clients=%d", peer.name, clients), func(b *testing.B) {
				benchmarkContended(b, peer.make, clients)
			})
		}
	}
}

func benchmarkContended(b *testing.B, mk func(*testing.B, *clientv3.Client, string) benchLocker, clients int) {
	p := prefix(b)
	ls := make([]benchLocker, clients)
	for i := range ls {
		ls[i] = mk(b, newClient(b, endpoints), p)
	}
	ctx := context.Background()
	var lastUnlock atomic.Int64 // unix ns of the latest Unlock's return
	handovers := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	t0 := time.Now()
	for i, l := range ls {
		n := b.N/clients + btoi(i < b.N%clients)
		wg.Go(func() {
			for range n {
				asked := time.Now().UnixNano()
				if err := l.lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if u := lastUnlock.Load(); u > asked {
					handovers[i] = append(handovers[i], time.Duration(time.Now().UnixNano()-u))
				}
				if err := l.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				lastUnlock.Store(time.Now().UnixNano())
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "acq/s")
	all := slices.Concat(handovers...)
	if len(all) > 0 {
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "handover-p99-µs")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
