package etcdlock

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestElectionFailover measures Election failover (BENCHMARKS.md): a
// leader dies (its lease is no longer kept alive, which is what etcd sees
// of a killed process), and the clock runs until a campaigner already
// waiting has been elected and made its first fenced write. Trials run
// 10 at a time, each on its own election. It runs with LOCKWORD_LONG=1
// only (about 30 s); it checks only that every failover completed and
// took at least two thirds of the TTL (the lease runs from its last
// keep-alive, sent every TTL/3, not from the death), since its figures
// depend on the host. With 30 and 20 trials, p99 is the second slowest.
func TestElectionFailover(t *testing.T) {
	if os.Getenv("LOCKWORD_LONG") != "1" {
		t.Skip("a measurement: LOCKWORD_LONG=1 runs it")
	}
	for _, c := range []struct {
		ttl    time.Duration
		trials int
	}{{time.Second, 30}, {5 * time.Second, 20}} {
		var mu sync.Mutex
		var got []time.Duration
		for batch := 0; batch < c.trials; batch += 10 {
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() {
					d := failoverOnce(t, c.ttl)
					mu.Lock()
					got = append(got, d)
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		slices.Sort(got)
		q := func(p float64) time.Duration { return got[int(p*float64(len(got)-1))].Round(time.Millisecond) }
		t.Logf("TTL %v: %d failovers: p50 %v, p99 %v, max %v, min %v", c.ttl, len(got), q(0.5), q(0.99), got[len(got)-1].Round(time.Millisecond), got[0].Round(time.Millisecond))
		if got[0] < c.ttl*2/3 {
			t.Errorf("a failover took %v, under the TTL %v: the leader's lease did not end it", got[0], c.ttl)
		}
	}
}

func failoverOnce(t *testing.T, ttl time.Duration) time.Duration {
	cli := newClient(t, endpoints)
	p := prefix(t)
	a, b := newElection(t, cli, p, ttl), newElection(t, cli, p, liveTTL)
	if err := campaign(t, a, "a"); err != nil {
		t.Error(err)
		return 0
	}
	elected := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), lockTimeout+ttl)
		defer cancel()
		if err := b.Campaign(ctx, "b"); err == nil {
			t.Error("failover: the new leader was not told of the death in office")
		}
		if err := b.Put(ctx, p+"-data", "b"); err != nil {
			t.Error(err)
		}
		elected <- time.Now()
	}()
	waitOneWaiter(t, cli, p, 10*time.Millisecond, "the campaigner never queued")
	died := time.Now()
	die(a.m)
	return (<-elected).Sub(died)
}
