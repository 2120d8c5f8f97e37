package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// sessionTTL is long enough that a loaded host does not expire a
// session by itself, short enough that a revocation by another client is
// seen at the next keep-alive (a third of it) within a second.
const sessionTTL = 3 * time.Second

func newSession(t testing.TB, cli *clientv3.Client, opts *SessionOptions) *Session {
	t.Helper()
	s, err := NewSession(context.Background(), cli, opts)
	return closedAtEnd(t, s, err)
}

func onSession(t testing.TB, cli *clientv3.Client, prefix string, s *Session) *Mutex {
	t.Helper()
	m, err := NewMutex(context.Background(), cli, prefix, &Options{Session: s})
	return closedAtEnd(t, m, err)
}

// waitLost waits for m.Lost, failing t after lockTimeout.
func waitLost(t testing.TB, m *Mutex, what string) {
	t.Helper()
	select {
	case <-m.Lost():
	case <-time.After(lockTimeout):
		t.Fatalf("%s: Lost of %s did not fire within %v", what, m.Name(), lockTimeout)
	}
}

// TestSessionLost: three Mutexes on one Session hold three locks, a
// waiter (its own lease, its own client) waits for each; then the
// session's lease is lost: revoked by another client, by Close, or
// expired while a partition (a blackholed proxy between the session's
// client and the server) stopped its keep-alives past the TTL. Each Mutex
// must be told (Lost), each guarded write must fail with ErrNotHolder and
// write nothing, and each waiter must get its lock with ErrOwnerDead.
func TestSessionLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, admin *clientv3.Client, s *Session, px *etcdtest.Proxy)
	}{
		{"revoked", func(t *testing.T, admin *clientv3.Client, s *Session, _ *etcdtest.Proxy) {
			if _, err := admin.Revoke(context.Background(), s.Lease()); err != nil {
				t.Fatal(err)
			}
		}},
		{"closed", func(t *testing.T, _ *clientv3.Client, s *Session, _ *etcdtest.Proxy) {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", func(t *testing.T, admin *clientv3.Client, s *Session, px *etcdtest.Proxy) {
			px.Blackhole(true)
			// The client gives the lease up one TTL after its last
			// renewal; the server expires it at about the same time, and
			// deletes its keys at its next expiry scan (0.5 s): wait for
			// both, then heal, so that the guarded writes reach it.
			select {
			case <-s.Done():
			case <-time.After(lockTimeout):
				t.Fatalf("Done not closed %v into the partition", lockTimeout)
			}
			deadline := time.Now().Add(lockTimeout)
			for {
				r, err := admin.TimeToLive(context.Background(), s.Lease())
				if err == nil && r.TTL == -1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("lease not expired at the server %v into the partition: %v %v", lockTimeout, r, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			px.Heal()
			// Heal broke the client's connections: reconnect (a read is
			// retried; the guarded write, a transaction, would not be).
			ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
			defer cancel()
			if _, err := s.cli.Get(ctx, "/"); err != nil {
				t.Fatalf("after the partition healed: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin, p := parallelClient(t)
			px := etcdtest.NewProxy(t, endpoints[0])
			cli := newClient(t, []string{px.Addr()})
			s := newSession(t, cli, &SessionOptions{TTL: sessionTTL})
			waited := make(chan error, 3)
			var held []*Mutex
			for i := range 3 {
				name := fmt.Sprintf("%s/%d", p, i)
				m := onSession(t, cli, name, s)
				if m.Identity().Lease != int64(s.Lease()) {
					t.Fatalf("Mutex %d has lease %x, its Session %x", i, m.Identity().Lease, int64(s.Lease()))
				}
				if err := lockCtx(t, m); err != nil {
					t.Fatal(err)
				}
				held = append(held, m)
				w := newMutex(t, newClient(t, endpoints), name)
				go func() { waited <- lockCtx(t, w) }()
				waitOneWaiter(t, admin, name, 10*time.Millisecond, "the waiter never queued")
			}
			tc.lose(t, admin, s, px)
			for i, m := range held {
				waitLost(t, m, tc.name)
				key := fmt.Sprintf("%s/data/%d", p, i)
				ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
				err := m.Put(ctx, key, "late")
				cancel()
				if !errors.Is(err, ErrNotHolder) {
					t.Errorf("guarded write of Mutex %d after its session was lost: %v, want ErrNotHolder", i, err)
				}
				if r, err := admin.Get(context.Background(), key); err != nil || r.Count != 0 {
					t.Errorf("the refused write of Mutex %d: %v, %d keys", i, err, r.Count)
				}
			}
			for range held {
				if err := <-waited; !errors.Is(err, lockword.ErrOwnerDead) {
					t.Errorf("next holder after the session was lost: %v, want ErrOwnerDead", err)
				}
			}
		})
	}
}

// TestSessionMutexClose: closing one Mutex on a Session ends its hold as
// a death would (the next holder gets ErrOwnerDead, its guarded writes
// fail) and nothing else: the Session and another Mutex's hold on it go
// on. An idle Mutex's Close leaves no key of it.
func TestSessionMutexClose(t *testing.T) {
	cli, p := parallelClient(t)
	s := newSession(t, cli, &SessionOptions{TTL: liveTTL})
	a, b := onSession(t, cli, p+"/a", s), onSession(t, cli, p+"/b", s)
	for _, m := range []*Mutex{a, b} {
		if err := lockCtx(t, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitLost(t, a, "Close")
	if err := a.Put(context.Background(), p+"/data", "late"); !errors.Is(err, ErrNotHolder) {
		t.Errorf("guarded write after Close: %v, want ErrNotHolder", err)
	}
	if err := lockCtx(t, newMutex(t, cli, p+"/a")); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Errorf("next holder after Close of a holding Mutex on a Session: %v, want ErrOwnerDead", err)
	}
	if isClosed(s.Done()) || b.leaseLost() {
		t.Fatal("closing one Mutex ended its Session")
	}
	if err := b.Put(context.Background(), p+"/data", "b"); err != nil {
		t.Errorf("guarded write of the other Mutex on the Session: %v", err)
	}
	b.Unlock()
	idle := onSession(t, cli, p+"/idle", s)
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := cli.Get(context.Background(), p+"/idle/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || r.Count != 0 {
		t.Errorf("an idle Mutex's Close left %d keys (%v)", r.Count, err)
	}
}

// TestSessionAdopt: a Session adopts a lease granted elsewhere: its
// Mutexes' keys are attached to that lease and its TTL is the lease's.
// Bad combinations are refused with ErrBadArgument, a lease that does
// not exist (or a lost Session) with ErrLeaseLost.
func TestSessionAdopt(t *testing.T) {
	cli, p := parallelClient(t)
	g, err := cli.Grant(context.Background(), int64(liveTTL/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli, &SessionOptions{Lease: g.ID})
	if s.Lease() != g.ID || s.TTL() != liveTTL {
		t.Fatalf("adopted session: lease %x TTL %v, want %x %v", int64(s.Lease()), s.TTL(), int64(g.ID), liveTTL)
	}
	m := onSession(t, cli, p, s)
	if err := lockCtx(t, m); err != nil {
		t.Fatal(err)
	}
	ttl, err := cli.TimeToLive(context.Background(), g.ID, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ttl.Keys, func(k []byte) bool { return string(k) == m.queueKey }) {
		t.Errorf("the adopted lease's keys %q lack the Mutex's queue key %s", ttl.Keys, m.queueKey)
	}
	m.Unlock()

	ctx := context.Background()
	if _, err := NewSession(ctx, cli, &SessionOptions{Lease: g.ID, TTL: time.Second}); !errors.Is(err, ErrBadArgument) {
		t.Errorf("TTL with Lease: %v, want ErrBadArgument", err)
	}
	if _, err := NewMutex(ctx, cli, p, &Options{Session: s, TTL: time.Second}); !errors.Is(err, ErrBadArgument) {
		t.Errorf("TTL with Session: %v, want ErrBadArgument", err)
	}
	if _, err := NewSession(ctx, nil, nil); !errors.Is(err, ErrBadArgument) {
		t.Errorf("nil client: %v, want ErrBadArgument", err)
	}
	if _, err := NewSession(ctx, cli, &SessionOptions{Lease: 0x7eadbeef}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("adopting a lease that does not exist: %v, want ErrLeaseLost", err)
	}
	s.Close()
	if _, err := NewMutex(ctx, cli, p, &Options{Session: s}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("NewMutex on a closed Session: %v, want ErrLeaseLost", err)
	}
}

// TestCloseTwice: a second Close of a Mutex, a Semaphore or a Session, whose
// lease an earlier Close revoked, returns nil, not etcd's "requested lease
// not found".
func TestCloseTwice(t *testing.T) {
	cli, p := parallelClient(t)
	m := newMutex(t, cli, p+"/m")
	sem, err := NewSemaphore(context.Background(), cli, p+"/sem", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli, &SessionOptions{TTL: liveTTL})
	for name, c := range map[string]interface{ Close() error }{"Mutex": m, "Semaphore": sem, "Session": s} {
		if err := c.Close(); err != nil {
			t.Fatalf("%s: first Close: %v", name, err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("%s: second Close: %v, want nil", name, err)
		}
	}
}
