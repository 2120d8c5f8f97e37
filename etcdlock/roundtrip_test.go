package etcdlock

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// countingKV counts the KV requests (reads and transactions) sent
// through a client: watches and lease keep-alives are streams, not
// counted.
type countingKV struct {
	clientv3.KV
	n *atomic.Int64
}

func (c countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.n.Add(1)
	return c.KV.Get(ctx, key, opts...)
}

func (c countingKV) Txn(ctx context.Context) clientv3.Txn {
	c.n.Add(1)
	return c.KV.Txn(ctx)
}

// TestMutexContendedRequests: two Mutexes hand the lock back and forth,
// each Lock made while the other holds, and the count of requests each
// contended Lock sends is checked against the type's "Round trips": the
// queuing transaction, the read that the key before ours is still there
// (after the watch on it exists), the claim; no fast-path try, which
// under contention only fails. No timing assumption: each holder waits
// until Inspect shows the other queued before it unlocks (waiting for
// the unlock's answer), and the stuck report, whose read a slow wait
// adds, is off.
func TestMutexContendedRequests(t *testing.T) {
	t.Parallel()
	p := prefix(t)
	var counts [2]atomic.Int64
	var ms [2]*Mutex
	for i := range ms {
		cli := newClient(t, endpoints)
		cli.KV = countingKV{cli.KV, &counts[i]}
		ms[i] = newMutex(t, cli, p)
		// The stuck report (a read of the hold record, after a wait of
		// DefaultStuckThreshold, 2 s) is a diagnostic, not one of the
		// counted round trips; a loaded host stretches a wait past it.
		ms[i].SetStuckThreshold(-1)
	}
	check := newClient(t, endpoints)
	if err := lockCtx(t, ms[0]); err != nil {
		t.Fatal(err)
	}
	const handovers, warmUp = 12, 2 // each Mutex's first contended Lock tries the fast path
	var perLock [2][]int64
	for h := range handovers {
		holder, waiter := ms[h%2], h%2^1
		before := counts[waiter].Load()
		got := make(chan error, 1)
		go func() { got <- lockCtx(t, ms[waiter]) }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for {
			info, err := Inspect(ctx, check, p)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			if len(info.Waiters) == 1 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		// UnlockContext, not Unlock: Unlock gives up waiting after 1 s
		// and retries in the background, and on a loaded host such a
		// retry lands while this Mutex makes its next, counted, Lock.
		uctx, ucancel := context.WithTimeout(context.Background(), lockTimeout)
		err := holder.UnlockContext(uctx)
		ucancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if h >= warmUp {
			perLock[waiter] = append(perLock[waiter], counts[waiter].Load()-before)
		}
	}
	ms[handovers%2].Unlock()
	for i, ns := range perLock {
		for _, n := range ns {
			if n != 3 {
				t.Errorf("Mutex %d: contended Locks sent %v requests each; want 3 (queue, check, claim)", i, ns)
				break
			}
		}
	}
}

// TestMutexRecordJSON: the hold record built by hand is byte for byte
// what json.Marshal writes of an ownerRecord (the format other processes
// read), for each state, with and without a token, and for a host name
// that JSON escapes; and building it costs one allocation (json.Marshal
// took three: it runs on every acquisition, in the client beside the
// member at one client). Not parallel: AllocsPerRun counts the whole
// process's allocations.
func TestMutexRecordJSON(t *testing.T) {
	m, err := NewMutex(context.Background(), newClient(t, endpoints), prefix(t)+`/a"b`, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, host := range []string{m.me.Host, `h"<&>` + "\u2028\x01"} {
		m.me.Host = host
		b, _ := json.Marshal(m.me)
		m.meJSON = string(b)
		for _, state := range []string{stateHeld, stateInconsistent, stateNotRecoverable} {
			for _, token := range []int64{0, 1, 1 << 62} {
				got := m.recordJSON(state, token)
				var rec ownerRecord
				if err := json.Unmarshal([]byte(got), &rec); err != nil {
					t.Fatalf("%s: %v", got, err)
				}
				want, _ := json.Marshal(ownerRecord{State: state, Key: m.queueKey, Token: token, Holder: m.me, SinceUnixNs: rec.SinceUnixNs})
				if got != string(want) {
					t.Errorf("record\n got %s\nwant %s", got, want)
				}
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { m.recordJSON(stateHeld, 12345) }); n > 1 {
		t.Errorf("recordJSON: %v allocations, want 1", n)
	}
}

// TestMutexFastPathKeyValue: the key the fast path creates carries no
// value (the hold record, written in the same transaction, names the
// holder: an uncontended Lock sends 60-odd bytes less), and Inspect still
// names the holder in full, and a waiter queued behind it from its key.
func TestMutexFastPathKeyValue(t *testing.T) {
	cli, p := parallelClient(t)
	a, b := newMutex(t, cli, p), newMutex(t, cli, p)
	if !a.TryLock() {
		t.Fatal("TryLock of a free lock failed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	g, err := cli.Get(ctx, a.queueKey)
	if err != nil || len(g.Kvs) != 1 {
		t.Fatalf("the holder's queue key: %v, %v", g, err)
	}
	if v := g.Kvs[0].Value; len(v) != 0 {
		t.Errorf("the fast path's queue key holds %q; want no value", v)
	}
	got := make(chan error, 1)
	go func() { got <- b.LockContext(ctx) }()
	for {
		info, err := Inspect(ctx, cli, p)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != StateHeld || info.Holder == nil || *info.Holder != a.Identity() {
			t.Fatalf("Inspect: %+v; want held by %v", info, a.Identity())
		}
		if len(info.Waiters) == 1 {
			if info.Waiters[0] != b.Identity() {
				t.Fatalf("waiter %v; want %v", info.Waiters[0], b.Identity())
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.Unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	b.Unlock()
}
