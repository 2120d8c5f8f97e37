package etcdlock

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func newElection(t testing.TB, cli *clientv3.Client, prefix string, ttl time.Duration) *Election {
	t.Helper()
	e, err := NewElection(context.Background(), cli, prefix, &Options{TTL: ttl})
	return closedAtEnd(t, e, err)
}

func campaign(t testing.TB, e *Election, value string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	return e.Campaign(ctx, value)
}

// TestElectionTerms: one leader at a time, tokens strictly increase,
// Leader and Proclaim show the value, a resigned leader's writes fail.
func TestElectionTerms(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	a, b := newElection(t, cli, p, liveTTL), newElection(t, cli, p, liveTTL)
	if _, err := a.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	if err := campaign(t, a, "a1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Campaign(ctx, "again"); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("second Campaign of a leader: %v, want ErrBadArgument", err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := b.Campaign(short, "b")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || b.Token() != 0 {
		t.Fatalf("Campaign against a leader: %v, token %d; want DeadlineExceeded, not leader", err, b.Token())
	}
	if err := a.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	term, err := b.Leader(ctx)
	if err != nil || term.Token != a.Token() || term.Value != "a2" || term.Leader != a.Identity() {
		t.Fatalf("Leader = %+v, %v; want token %d, value a2, leader %v", term, err, a.Token(), a.Identity())
	}
	if err := a.Put(ctx, p+"-data", "a"); err != nil {
		t.Fatalf("leader's guarded write: %v", err)
	}
	first := a.Token()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, p+"-data", "late"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("resigned leader's write: %v, want ErrNotHolder", err)
	}
	if _, err := Leader(ctx, cli, p); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader after Resign: %v, want ErrNoLeader", err)
	}
	if err := campaign(t, b, "b"); err != nil {
		t.Fatalf("Campaign after a clean Resign: %v, want nil", err)
	}
	if b.Token() <= first {
		t.Fatalf("token %d after %d: tokens must increase", b.Token(), first)
	}
}

// TestElectionDeposedLeader: a leader whose lease ends while it believes
// it leads (a pause, a partition: here its lease is revoked under it) is
// deposed; its late writes fail, the next leader gets ErrOwnerDead, and
// the election stays usable after it (Campaign marked it consistent).
func TestElectionDeposedLeader(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	a, b, c := newElection(t, cli, p, liveTTL), newElection(t, cli, p, liveTTL), newElection(t, cli, p, liveTTL)
	if err := campaign(t, a, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(a.Identity().Lease)); err != nil {
		t.Fatal(err)
	}
	err := campaign(t, b, "b")
	var od *OwnerDeadError
	if !errors.Is(err, lockword.ErrOwnerDead) || !errors.As(err, &od) || od.Dead != a.Identity() {
		t.Fatalf("Campaign after a death in office: %v, want ErrOwnerDead naming %v", err, a.Identity())
	}
	// Campaign marked the lock consistent itself: its text must not ask
	// the caller to (it did, and Election has no MarkConsistent).
	if msg := err.Error(); strings.Contains(msg, "MarkConsistent") || !strings.Contains(msg, "leads") {
		t.Errorf("Campaign after a death in office: %q asks for MarkConsistent or does not say it leads", msg)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after %d", b.Token(), a.Token())
	}
	if err := b.Put(ctx, p+"-data", "b"); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, p+"-data", "a, late"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("deposed leader's write: %v, want ErrNotHolder", err)
	}
	if err := a.Proclaim(ctx, "a, late"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("deposed leader's Proclaim: %v, want ErrNotHolder", err)
	}
	if g, err := cli.Get(ctx, p+"-data"); err != nil || string(g.Kvs[0].Value) != "b" {
		t.Fatalf("data = %v, %v; want b", g, err)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := campaign(t, c, "c"); err != nil {
		t.Fatalf("Campaign after the repaired term resigned: %v, want nil", err)
	}
}

// TestElectionCancelledCampaign: a Campaign that gives up leaves nothing
// and is never elected later, even when its attempt is cut short at once.
func TestElectionCancelledCampaign(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	a, b := newElection(t, cli, p, liveTTL), newElection(t, cli, p, liveTTL)
	if err := campaign(t, a, "a"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, time.Millisecond, 200 * time.Millisecond} {
		cctx, cancel := context.WithTimeout(ctx, d)
		err := b.Campaign(cctx, "b")
		cancel()
		if err == nil || errors.Is(err, lockword.ErrOwnerDead) {
			t.Fatalf("Campaign within %v against a leader: %v, want an error", d, err)
		}
	}
	b.m.waitIdle()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a late write of b's would land by now
	if term, err := Leader(ctx, cli, p); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("after the cancelled campaigns and a's Resign: leader %+v, %v; want none", term, err)
	}
	if info, err := Inspect(ctx, cli, p); err != nil || info.State != StateFree || len(info.Waiters) != 0 {
		t.Fatalf("Inspect = %+v, %v; want free, no waiters", info, err)
	}
}

// TestElectionObserve: an observer sees every term once, in order, with
// proclamations in their term, even one that reads only at the end.
func TestElectionObserve(t *testing.T) {
	cli, p := parallelClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	a := newElection(t, cli, p, liveTTL)
	if err := a.Campaign(ctx, "a0"); err != nil {
		t.Fatal(err)
	}
	live, err := Observe(ctx, cli, p)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := a.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []Term
	got := <-live // the current leader first
	want = append(want, got)
	for i := range 3 {
		e := newElection(t, cli, p, liveTTL)
		if i == 0 {
			if err := a.Proclaim(ctx, "a1"); err != nil {
				t.Fatal(err)
			}
			want = append(want, <-live)
		}
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Campaign(ctx, "next"); err != nil {
			t.Fatal(err)
		}
		want = append(want, <-live)
		a = e
	}
	for i, w := range want {
		if i > 0 && (w.Token < want[i-1].Token || w.Revision <= want[i-1].Revision) {
			t.Fatalf("live observer: %+v after %+v: out of order", w, want[i-1])
		}
	}
	if want[0].Value != "a0" || want[1].Value != "a1" || want[1].Token != want[0].Token || want[2].Token <= want[1].Token {
		t.Fatalf("live observer saw %+v", want)
	}
	for i, w := range want {
		select {
		case g := <-slow:
			if g.Token != w.Token || g.Revision != w.Revision || g.Value != w.Value || g.Gap {
				t.Fatalf("slow observer's record %d: %+v, want %+v", i, g, w)
			}
		case <-ctx.Done():
			t.Fatalf("slow observer: record %d never came", i)
		}
	}
	select {
	case g := <-slow:
		t.Fatalf("slow observer: record %+v after the last term", g)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestElectionNilContext: a nil context is an error, not a panic; a lock
// name that would put its keys among an RWMutex's readers is refused.
func TestElectionNilContext(t *testing.T) {
	cli, p := parallelClient(t)
	e, rw := newElection(t, cli, p, liveTTL), newRW(t, cli, p+"-rw", liveTTL)
	for name, err := range map[string]error{
		"Campaign": e.Campaign(nil, "v"), "Proclaim": e.Proclaim(nil, "v"), "Resign": e.Resign(nil),
		"Put": e.Put(nil, "k", "v"), "RLockContext": rw.RLockContext(nil), "LockContext": rw.LockContext(nil),
		"RUnlockContext": rw.RUnlockContext(nil), "UnlockContext": rw.UnlockContext(nil), "RW Put": rw.Put(nil, "k", "v"),
	} {
		if !errors.Is(err, lockword.ErrNilContext) {
			t.Errorf("%s(nil): %v, want ErrNilContext", name, err)
		}
	}
	if _, err := Leader(nil, cli, p); !errors.Is(err, lockword.ErrNilContext) {
		t.Errorf("Leader(nil): %v", err)
	}
	if _, err := Readers(nil, cli, p); !errors.Is(err, lockword.ErrNilContext) {
		t.Errorf("Readers(nil): %v", err)
	}
	if _, err := Observers(nil, cli, p); !errors.Is(err, lockword.ErrNilContext) {
		t.Errorf("Observers(nil): %v", err)
	}
	if ch, err := e.Observe(nil); ch != nil || !errors.Is(err, lockword.ErrNilContext) {
		t.Errorf("Election.Observe(nil): %v", err)
	}
	for _, name := range []string{p + "/readers", p + "/rfence/x", p + "/observers"} {
		if _, err := NewMutex(context.Background(), cli, name, nil); !errors.Is(err, ErrBadArgument) {
			t.Errorf("NewMutex(%q): %v, want ErrBadArgument (its keys would count as an RWMutex's readers or an election's observers)", name, err)
		}
	}
}

// TestObserveNotEtcd: Observe against an endpoint that is not etcd (it
// answers HTTP) returns an error naming the endpoint within its first
// read's bound (5 s), not when its context ends (a minute here).
func TestObserveNotEtcd(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	cli := newClient(t, []string{ln.Addr().String()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	ch, err := Observe(ctx, cli, "/obs")
	// observeFirstWait, and 5 s for a loaded host to schedule the return.
	if took := time.Since(t0); ch != nil || err == nil || took > observeFirstWait+5*time.Second || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("Observe against a non-etcd endpoint: %v, %v after %v; want no channel and an error naming %s within %v",
			ch, err, took.Round(time.Millisecond), ln.Addr(), observeFirstWait)
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		cli  *clientv3.Client
		p    string
		want error
	}{
		{"nil context", nil, cli, "/obs", lockword.ErrNilContext},
		{"nil client", ctx, nil, "/obs", ErrBadArgument},
		{"bad name", ctx, cli, "/", ErrBadArgument},
	} {
		if ch, err := Observe(c.ctx, c.cli, c.p); ch != nil || !errors.Is(err, c.want) {
			t.Errorf("Observe, %s: %v, %v; want %v", c.name, ch, err, c.want)
		}
	}
}
