//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	"github.com/lockword/lockword/etcdlock"
	"github.com/lockword/lockword/internal/etcdembed"
)

// observerGoneWait bounds the wait for an observer's key to go: at once
// after its context ends (a background delete), or after its lease's TTL
// (2 s) plus the server's expiry scan once it is cut off. 30 s is far
// more than a loaded host needs; the test waits no longer than it takes.
const observerGoneWait = 30 * time.Second

// observersShown runs inspect -etcd on p, text and -json, and returns
// the observers the text lists (the lines below "  observers: N") and the
// JSON's "observers" list (two reads: they may differ while one leaves).
func observersShown(t *testing.T, ep, p string) (lines []string, js []map[string]any) {
	t.Helper()
	out, stderr, status := runCLI(t, "inspect", "-etcd", ep, p)
	if status != exitOK {
		t.Fatalf("inspect: status %d\n%s%s", status, out, stderr)
	}
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "  observers: "):
			in = true
		case in && strings.HasPrefix(l, "    "):
			lines = append(lines, strings.TrimSpace(l))
		default:
			in = false
		}
	}
	jout, stderr, status := runCLI(t, "inspect", "-etcd", ep, "-json", p)
	if status != exitOK {
		t.Fatalf("inspect -json: status %d\n%s%s", status, jout, stderr)
	}
	if strings.Contains(jout, "null") || strings.Contains(jout, "0001-01-01") {
		t.Errorf("-json prints a null or a zero time:\n%s", jout)
	}
	var m struct {
		Observers []map[string]any `json:"observers"`
	}
	if err := json.Unmarshal([]byte(jout), &m); err != nil {
		t.Fatalf("inspect -json: %v\n%s", err, jout)
	}
	return lines, m.Observers
}

// waitObserverGone polls inspect until no observer of p has lease.
func waitObserverGone(t *testing.T, ep, p string, lease int64) {
	t.Helper()
	want := fmt.Sprintf("lease %x", lease)
	for deadline := time.Now().Add(observerGoneWait); ; time.Sleep(20 * time.Millisecond) {
		lines, js := observersShown(t, ep, p)
		if !strings.Contains(strings.Join(lines, "\n"), want) && !hasLease(js, lease) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("observer on %s still listed %v later: %q", want, observerGoneWait, lines)
		}
	}
}

// hasLease reports whether -json's observers have one on lease.
func hasLease(js []map[string]any, lease int64) bool {
	for _, o := range js {
		if o["lease"] == float64(lease) {
			return true
		}
	}
	return false
}

// observing starts e.Observe and waits for its first record when the
// election has a leader; cancel ends it.
func observing(t *testing.T, e *etcdlock.Election, leader bool) (cancel func(), ch <-chan etcdlock.Term) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Observe(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if leader {
		<-ch
	}
	return cancel, ch
}

// TestInspectEtcdObservers: an Election's Observe shows in inspect -etcd,
// text and -json, as an observer of the election (host, PID, lease, the
// Election's name, since when), and leaves it when Observe's context ends
// and when its lease expires (its process cut off from etcd). Timing
// assumption: only that the server expires a lease within
// observerGoneWait of its last keep-alive.
func TestInspectEtcdObservers(t *testing.T) {
	t.Parallel()
	ep, cli := startInspectEtcd(t)
	ctx := context.Background()
	const p = "/elections/observed"
	opts := &etcdlock.Options{TTL: 20 * time.Second}
	leader, err := etcdlock.NewElection(ctx, cli, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	if err := leader.Campaign(ctx, "db-1:5432"); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	listed := func(t *testing.T, e *etcdlock.Election, name string) {
		t.Helper()
		lines, js := observersShown(t, ep, p)
		want := fmt.Sprintf("host %s, PID %d, lease %x", shownName(host), os.Getpid(), e.Identity().Lease)
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, want) && strings.Contains(l, name) && strings.Contains(l, "since ")
		}
		if !found {
			out, _, _ := runCLI(t, "inspect", "-etcd", ep, p)
			t.Fatalf("inspect does not list the observer %q named %q:\n%s", want, name, out)
		}
		if !hasLease(js, e.Identity().Lease) {
			t.Fatalf("-json does not list the observer on lease %x: %v", e.Identity().Lease, js)
		}
		for _, o := range js {
			if o["lease"] == float64(e.Identity().Lease) && (o["name"] != name || o["pid"] != float64(os.Getpid()) || o["since"] == nil) {
				t.Errorf("-json observer %v, want name %q, PID %d, a since", o, name, os.Getpid())
			}
		}
	}

	t.Run("ctx ends", func(t *testing.T) {
		e, err := etcdlock.NewElection(ctx, cli, p, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		e.SetName("dashboard")
		cancel, ch := observing(t, e, true)
		listed(t, e, "dashboard")
		cancel()
		for range ch {
		}
		waitObserverGone(t, ep, p, e.Identity().Lease)
	})

	t.Run("lease expires", func(t *testing.T) {
		px, err := etcdembed.NewProxy(strings.Split(ep, ",")[0])
		if err != nil {
			t.Fatal(err)
		}
		defer px.Close()
		pcli, err := newEtcdClient([]string{px.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		defer pcli.Close()
		e, err := etcdlock.NewElection(ctx, pcli, p, &etcdlock.Options{TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		e.SetName("cut-off")
		cancel, _ := observing(t, e, true)
		defer cancel()
		listed(t, e, "cut-off")
		px.Blackhole(true) // its keep-alives stop: the lease expires on the server
		waitObserverGone(t, ep, p, e.Identity().Lease)
	})

	// No observer: the list is empty, [] in -json, and the leader is
	// still shown.
	if lines, js := observersShown(t, ep, p); len(lines) != 0 || js == nil {
		t.Errorf("after the observers left: %q, %v; want none, []", lines, js)
	}
	if out, _, _ := runCLI(t, "inspect", "-etcd", ep, p); !clitest.HasLine(out, "  value: db-1:5432") {
		t.Errorf("inspect lost the leader:\n%s", out)
	}
}
