//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/etcdlock"
	"github.com/lockword/lockword/internal/etcdembed"
	"github.com/lockword/lockword/shm"
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

// TestInspectJSONNoNull: every -json view of inspect, on empty and fresh
// objects, holds no null and no zero time anywhere in its tree (the help
// promises [] for an empty list): a region with no object, one with a
// fresh object of each kind and no process attached, and on etcd a free
// Mutex, an RWMutex, an Election without a leader and a Semaphore nobody
// holds.
func TestInspectJSONNoNull(t *testing.T) {
	t.Parallel()
	views := map[string][]string{}
	empty := filepath.Join(t.TempDir(), "empty")
	kinds := filepath.Join(t.TempDir(), "kinds")
	for _, path := range []string{empty, kinds} {
		r, err := shm.Create(path, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if path == kinds {
			if err := makeEveryKind(r); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
		views["region "+filepath.Base(path)] = []string{"inspect", "-json", "-all", path}
	}
	ep, cli := startInspectEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := &etcdlock.Options{TTL: 20 * time.Second}
	rw, err := etcdlock.NewRWMutex(ctx, cli, "/rw", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	e, err := etcdlock.NewElection(ctx, cli, "/election", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := etcdlock.NewSemaphore(ctx, cli, "/sem", 2, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/free", "/rw", "/election", "/sem"} {
		views["etcd "+p] = []string{"inspect", "-etcd", ep, "-json", p}
	}
	for what, args := range views {
		out, stderr, status := runCLI(t, args...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); status != exitOK || err != nil {
			t.Fatalf("%s: status %d, %v\n%s%s", what, status, err, out, stderr)
		}
		for _, bad := range jsonNulls(v, "") {
			t.Errorf("%s: -json has %s:\n%s", what, bad, out)
		}
	}
}

// makeEveryKind creates one object of each kind in r.
func makeEveryKind(r *shm.Region) error {
	for _, mk := range []func() error{
		func() error { _, err := r.Mutex("mutex"); return err },
		func() error { _, err := r.RWMutex("rw"); return err },
		func() error { _, err := r.TicketMutex("ticket"); return err },
		func() error { _, err := r.Cond("cond"); return err },
		func() error { _, err := shm.NewSeqLock[int64](r, "seqlock"); return err },
		func() error { _, err := r.Semaphore("sem", 3); return err },
		func() error { _, err := shm.Value[int64](r, "value"); return err },
		func() error {
			p, err := r.RingProducer("ring", shm.MinSharedRingCapacity)
			if err == nil {
				p.Close()
			}
			return err
		},
		func() error {
			p, err := r.MPSCProducer("mpsc", shm.MinMPSCCapacity)
			if err == nil {
				p.Close()
			}
			return err
		},
	} {
		if err := mk(); err != nil {
			return err
		}
	}
	return nil
}

// jsonNulls returns where v (decoded JSON, at path) holds a null or a
// zero time.
func jsonNulls(v any, path string) []string {
	var bad []string
	switch v := v.(type) {
	case nil:
		bad = append(bad, "null at "+path)
	case string:
		if strings.HasPrefix(v, "0001-01-01") {
			bad = append(bad, "a zero time at "+path)
		}
	case map[string]any:
		for k, e := range v {
			bad = append(bad, jsonNulls(e, path+"."+k)...)
		}
	case []any:
		for i, e := range v {
			bad = append(bad, jsonNulls(e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return bad
}
