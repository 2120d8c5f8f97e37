//go:build linux

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/etcdlock"
	"github.com/lockword/lockword/internal/etcdembed"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// startInspectEtcd starts an embedded etcd member for t, stopped when t
// ends, and returns its endpoints (as -etcd takes them) and a client.
func startInspectEtcd(t *testing.T) (string, *clientv3.Client) {
	t.Helper()
	c, err := etcdembed.Start(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cli, err := newEtcdClient(c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return strings.Join(c.Endpoints(), ","), cli
}

// TestInspectEtcdJSONNoNull: inspect -etcd -json of a free lock, a held
// one and an election prints no null and no zero time: empty lists are
// [], absent values are left out.
func TestInspectEtcdJSONNoNull(t *testing.T) {
	t.Parallel()
	ep, cli := startInspectEtcd(t)
	ctx := context.Background()
	check := func(what, p string, want ...string) map[string]any {
		t.Helper()
		out, stderr, status := runCLI(t, "inspect", "-etcd", ep, "-json", p)
		if status != exitOK {
			t.Fatalf("%s: status %d\n%s%s", what, status, out, stderr)
		}
		if strings.Contains(out, "null") || strings.Contains(out, "0001-01-01") {
			t.Errorf("%s: -json prints a null or a zero time:\n%s", what, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: -json lacks %s:\n%s", what, w, out)
			}
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		return m
	}
	check("free lock", "/locks/free", `"waiters":[]`, `"corrupt":[]`, `"readers":[]`)
	m, err := etcdlock.NewMutex(ctx, cli, "/locks/held", &etcdlock.Options{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	check("held lock", "/locks/held", `"waiters":[]`, `"held_since":"`)
	e, err := etcdlock.NewElection(ctx, cli, "/elections/db", &etcdlock.Options{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Campaign(ctx, "db-1:5432"); err != nil {
		t.Fatal(err)
	}
	got := check("election", "/elections/db", `"value":"db-1:5432"`)
	out, _, _ := runCLI(t, "inspect", "-etcd", ep, "/elections/db")
	for _, l := range []string{"Election leader: ", "  value: db-1:5432", "  lease TTL left: "} {
		if !strings.Contains(out, l) {
			t.Errorf("inspect of an election lacks %q:\n%s", l, out)
		}
	}
	rw, err := etcdlock.NewRWMutex(ctx, cli, "/locks/rw", &etcdlock.Options{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if err := rw.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	check("RW lock", "/locks/rw", `"readers":[{"host":`, `"waiters":[]`)
	out, _, _ = runCLI(t, "inspect", "-etcd", ep, "/locks/rw")
	if !strings.Contains(out, "RW readers: 1 ") {
		t.Errorf("inspect of a read-held RWMutex lacks its reader:\n%s", out)
	}
	el, ok := got["election"].(map[string]any)
	if !ok || el["token"] != float64(e.Token()) {
		t.Fatalf("election view %v, want token %d", got["election"], e.Token())
	}
}
