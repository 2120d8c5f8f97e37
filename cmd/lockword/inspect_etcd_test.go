//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	"github.com/lockword/lockword/cmd/lockword/internal/torture"
	"github.com/lockword/lockword/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdTTL is the lease TTL of the torture run below, as in the torture
// package's etcd tests: 2 s, so that keep-alives survive a loaded host.
const etcdTTL = "2s"

func TestInspectEtcd(t *testing.T) {
	t.Parallel()
	ep, cli := startInspectEtcd(t)
	ctx := context.Background()
	const p = "/locks/orders"
	if out, _, status := runCLI(t, "inspect", "-etcd", ep, p); status != exitOK || !clitest.HasLine(out, "State: free") || !clitest.HasLine(out, "Waiters: 0") {
		t.Fatalf("free lock: status %d\n%s", status, out)
	}
	a, err := etcdlock.NewMutex(ctx, cli, p, &etcdlock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := etcdlock.NewMutex(ctx, cli, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- b.LockContext(wctx) }()
	var out string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var status int
		out, _, status = runCLI(t, "inspect", "-etcd", ep, p)
		if status != exitOK {
			t.Fatalf("status %d\n%s", status, out)
		}
		if clitest.HasLine(out, "Waiters: 1") || time.Now().After(deadline) {
			break
		}
	}
	host, _ := os.Hostname()
	for _, line := range []string{
		"State: held",
		fmt.Sprintf("Holder: host %s, PID %d, lease %x", shownName(host), os.Getpid(), a.Identity().Lease),
		fmt.Sprintf("Token: %d", a.Token()),
		"Waiters: 1",
		fmt.Sprintf("  host %s, PID %d, lease %x", shownName(host), os.Getpid(), b.Identity().Lease),
	} {
		if !clitest.HasLine(out, line) {
			t.Errorf("inspect lacks %q:\n%s", line, out)
		}
	}
	if !strings.Contains(out, "Lease TTL left: ") || !strings.Contains(out, "(of 5s)") || !strings.Contains(out, "Held for: ") {
		t.Errorf("inspect lacks the lease TTL or the hold time:\n%s", out)
	}
	cancel()
	<-done
	a.Unlock()
	// torture -etcd on this "real" server: it passes and leaves nothing.
	if out, stderr, status := runCLI(t, "torture", "-ttl", etcdTTL, "-lock", "etcd", "-etcd", ep, "-workers", "3", "-iters", "4"); status != exitOK {
		t.Fatalf("torture -etcd %s: status %d\n%s\n%s", ep, status, out, stderr)
	}
	if r, err := cli.Get(ctx, torture.EtcdDataRoot, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
		t.Fatalf("torture -etcd left %v keys under %s (%v)", r, torture.EtcdDataRoot, err)
	}
	// Unreachable: an error, exit 2, within the timeout.
	start := time.Now()
	if _, stderr, status := runCLI(t, "inspect", "-etcd", "127.0.0.1:1", p); status != exitUsage || !strings.Contains(stderr, "etcd at 127.0.0.1:1") {
		t.Fatalf("unreachable: status %d, stderr %q", status, stderr)
	}
	if d := time.Since(start); d > 3*inspectEtcdTimeout {
		t.Fatalf("unreachable etcd took %v", d)
	}
}
