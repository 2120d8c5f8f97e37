package etcdlock

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/lockword/lockword/etcdlock/etcdtest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitObservers polls Observers of the election at p until it lists n,
// and returns them; it stops t if that takes lockTimeout (a background
// delete takes one round trip).
func waitObservers(t *testing.T, e *Election, n int) []Observer {
	t.Helper()
	for deadline := time.Now().Add(lockTimeout); ; time.Sleep(10 * time.Millisecond) {
		obs, err := Observers(context.Background(), e.m.cli, e.m.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(obs) == n {
			return obs
		}
		if time.Now().After(deadline) {
			t.Fatalf("Observers = %+v, want %d of them within %v", obs, n, lockTimeout)
		}
	}
}

// TestElectionObserverKeyNeutral: observer keys never change who leads
// or the term token: with observers registered before and during the
// terms (a campaigner and a standby among them, and a key under
// P/observers/ that no Observe wrote), campaigns elect whom they would
// without them, Leader's token is the Mutex's hold's, and Inspect,
// Readers and InspectSemaphore see no waiter, reader, corruption or
// permits of theirs. (A key among the queue's would block the first
// campaign; among the readers', Readers would list it.)
func TestElectionObserverKeyNeutral(t *testing.T) {
	cli, p := parallelClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	a, b, watcher := newElection(t, cli, p, liveTTL), newElection(t, cli, p, liveTTL), newElection(t, cli, p, liveTTL)
	for _, e := range []*Election{watcher, a} {
		if _, err := e.Observe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, p+observerDir+"by-hand", "not an observer's"); err != nil {
		t.Fatal(err)
	}
	if err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	check := func(leader *Election) {
		t.Helper()
		term, err := Leader(ctx, cli, p)
		if err != nil || term.Token != leader.Token() || term.Leader != leader.Identity() || term.Token != leader.m.Token() {
			t.Fatalf("Leader = %+v, %v; want token %d (the hold's %d), leader %v", term, err, leader.Token(), leader.m.Token(), leader.Identity())
		}
		info, err := Inspect(ctx, cli, p)
		if err != nil || info.State != StateHeld || info.Token != leader.Token() || *info.Holder != leader.Identity() || len(info.Waiters) != 0 || len(info.Corrupt) != 0 {
			t.Fatalf("Inspect = %+v, %v; want held by %v with token %d, no waiter, nothing corrupt", info, err, leader.Identity(), leader.Token())
		}
		if rs, err := Readers(ctx, cli, p); err != nil || len(rs) != 0 {
			t.Fatalf("Readers = %+v, %v; want none", rs, err)
		}
		if si, err := InspectSemaphore(ctx, cli, p); err != nil || si.Permits != 0 || len(si.Corrupt) != 0 || len(si.Holders)+len(si.Waiters) != 0 {
			t.Fatalf("InspectSemaphore = %+v, %v; want no semaphore", si, err)
		}
	}
	check(a)
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	err := b.Campaign(short, "b")
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign behind a leader, observers about: %v, want DeadlineExceeded", err)
	}
	if _, err := b.Observe(ctx); err != nil { // a standby observes
		t.Fatal(err)
	}
	first := a.Token()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Campaign(ctx, "b"); err != nil {
		t.Fatalf("Campaign after a clean Resign, observers about: %v, want nil", err)
	}
	check(b)
	if b.Token() <= first {
		t.Fatalf("token %d after %d", b.Token(), first)
	}
	if obs := waitObservers(t, a, 4); obs[2].Lease != 0 || !obs[2].Since.IsZero() {
		t.Fatalf("the key written by hand is listed as %+v, want its lease (none) only", obs[2])
	}
}

// TestElectionObserveRegisters: each Election.Observe registers its own
// key (host, PID, lease, SetName's name, since when); the key is deleted
// when Observe's context ends, and when its channel closes because its
// Election was closed on a Session whose lease lives on (so the lease
// would not remove it); Observe of a closed Election fails.
func TestElectionObserveRegisters(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	s := newSession(t, cli, &SessionOptions{TTL: liveTTL})
	e, err := NewElection(ctx, cli, p, &Options{Session: s})
	if err != nil {
		t.Fatal(err)
	}
	e.SetName("panel")
	before := time.Now()
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	first, err := e.Observe(octx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, o := range waitObservers(t, e, 2) {
		if o.Holder != (Holder{Host: host, PID: os.Getpid(), Lease: int64(s.id)}) || o.Name != "panel" || o.Since.Before(before.Add(-time.Second)) || o.Since.After(time.Now()) {
			t.Fatalf("observer %+v; want host %s, PID %d, the Session's lease %x, name panel, since the call", o, host, os.Getpid(), int64(s.id))
		}
	}
	cancel()
	for range first {
	}
	waitObservers(t, e, 1)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-second:
		if open {
			t.Fatal("a record after Close, with no leader")
		}
	case <-time.After(lockTimeout):
		t.Fatalf("Observe's channel still open %v after its Election's Close", lockTimeout)
	}
	waitObservers(t, e, 0)
	if _, err := e.Observe(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Observe of a closed Election: %v, want ErrLeaseLost", err)
	}
}

// TestElectionObserveLateRegistration: an Observe that gives up (its
// context ends) before etcd has answered its registration, sent through a
// delayed link, leaves no observer behind: the put lands late, and is
// deleted once it has (a watch sees the put, then the delete, long before
// the lease would end). Timing assumption: none; the 300 ms delay only
// makes the put land after the 50 ms context, on any host.
func TestElectionObserveLateRegistration(t *testing.T) {
	cli, p := parallelClient(t)
	px := etcdtest.NewProxy(t, endpoints[0])
	e := newElection(t, newClient(t, []string{px.Addr()}), p, liveTTL)
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	events := cli.Watch(ctx, p+observerDir, clientv3.WithPrefix())
	px.SetDelay(300 * time.Millisecond)
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	ch, err := e.Observe(short)
	cancelShort()
	if ch != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Observe through a 300 ms link with 50 ms to go: %v, %v; want DeadlineExceeded", ch, err)
	}
	var seen []mvccpb.Event_EventType
	for wr := range events {
		for _, ev := range wr.Events {
			seen = append(seen, ev.Type)
		}
		if len(seen) >= 2 {
			break
		}
	}
	if len(seen) != 2 || seen[0] != mvccpb.PUT || seen[1] != mvccpb.DELETE {
		t.Fatalf("observer key events %v within %v; want the late put, then its delete", seen, lockTimeout)
	}
}
