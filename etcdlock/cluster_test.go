package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestMutexQuorumLost: on a three-member cluster, 20 waiters (a client
// and a Mutex each) wait for a held lock while two members stop for
// quorumLoss (every request fails or hangs) and start again. A waiter
// whose LockContext fails retries, as a user would, except the odd ones,
// which give up (keeping their Mutex): what their failed call wrote must
// not strand the others. Every other waiter must then get the lock
// exactly once, without an owner-death report (nobody died), the counter
// must be exact, and no queue key or hold record may be left. Keys
// written by hand under the prefix (outside queue/ and owner) must not
// disturb it.
func TestMutexQuorumLost(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Members(3))
	eps := c.Endpoints()
	p := prefix(t)
	admin := newClient(t, eps)
	for _, k := range []string{"/queue", "/ownerx", "/fence/by-hand", "/notes"} {
		if _, err := admin.Put(context.Background(), p+k, "hostile"); err != nil {
			t.Fatal(err)
		}
	}
	holder := newMutex(t, admin, p)
	if err := lockCtx(t, holder); err != nil {
		t.Fatal(err)
	}
	const waiters = 20
	var gaveUp []*Mutex
	var held, failures, falseDead atomic.Int64
	var slot atomic.Int32
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for id := int32(1); id <= waiters; id++ {
		cli := newClient(t, eps)
		m := newMutex(t, cli, p)
		if id%2 == 1 {
			gaveUp = append(gaveUp, m)
		}
		wg.Go(func() {
			deadline := time.Now().Add(2 * time.Minute)
			for {
				ctx, cancel := context.WithDeadline(context.Background(), deadline)
				err := m.LockContext(ctx)
				cancel()
				if errors.Is(err, lockword.ErrOwnerDead) {
					falseDead.Add(1)
					m.MarkConsistent()
				} else if err != nil {
					failures.Add(1)
					if id%2 == 1 {
						return // gives up
					}
					if errors.Is(err, ErrLeaseLost) {
						// Keep-alives starved past the TTL (a loaded
						// host, the quorum loss): what a user does, a new
						// Mutex on a new lease, and wait again.
						fresh, nerr := NewMutex(context.Background(), cli, p, &Options{TTL: liveTTL})
						if nerr != nil {
							errs <- fmt.Errorf("waiter %d: a new Mutex after its lease was lost: %w", id, nerr)
							return
						}
						m.Close()
						m = fresh
						defer fresh.Close()
						continue
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("waiter %d never got the lock: %w", id, err)
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if !slot.CompareAndSwap(0, id) {
					errs <- fmt.Errorf("waiter %d holds with %d", id, slot.Load())
				}
				if err := increment(m, admin, p+"-counter"); err != nil {
					errs <- err
				}
				held.Add(1)
				slot.Store(0)
				m.Unlock()
				return
			}
		})
	}
	// All 20 queued (or the deadline, reported below).
	for start := time.Now(); time.Since(start) < lockTimeout; time.Sleep(20 * time.Millisecond) {
		if info, err := Inspect(context.Background(), admin, p); err == nil && len(info.Waiters) == waiters {
			break
		}
	}
	leader := c.Leader()
	stopped := []int{(leader + 1) % 3, (leader + 2) % 3}
	for _, i := range stopped {
		if err := c.Stop(i); err != nil {
			t.Fatal(err)
		}
	}
	// Longer than a request's timeout: a clean-up tried during the loss
	// fails.
	time.Sleep(quorumLoss)
	for _, i := range stopped {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	holder.Unlock() // retried in the background while the leader settles
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d waiters served, %d failed LockContext calls retried", held.Load(), failures.Load())
	if falseDead.Load() != 0 {
		t.Errorf("%d owner-death reports, and nobody died", falseDead.Load())
	}
	if held.Load() < waiters/2 {
		t.Errorf("%d waiters served, want at least the %d that retry", held.Load(), waiters/2)
	}
	ctx := context.Background()
	if r, err := admin.Get(ctx, p+"-counter"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != fmt.Sprint(held.Load()) {
		t.Errorf("counter %v, %v; want %d", r, err, held.Load())
	}
	for _, m := range gaveUp {
		m.waitIdle()
	}
	checkFree(t, admin, p)
}

// quorumLoss is how long TestMutexQuorumLost keeps two members of three
// stopped: longer than the 5 s timeout of a request.
const quorumLoss = 7 * time.Second

// checkFree fails t unless the lock at p is free with no queue key left.
func checkFree(t *testing.T, cli *clientv3.Client, p string) {
	t.Helper()
	ctx := context.Background()
	r, err := cli.Txn(ctx).Then(clientv3.OpGet(p+queueDir, clientv3.WithPrefix()), clientv3.OpGet(p+ownerKey)).Commit()
	if err != nil {
		t.Fatal(err)
	}
	for _, resp := range r.Responses {
		for _, kv := range resp.GetResponseRange().Kvs {
			t.Errorf("left behind: %s = %s", kv.Key, kv.Value)
		}
	}
}
