//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	"github.com/lockword/lockword/etcdlock"
	"github.com/lockword/lockword/internal/etcdembed"
)

// TestInspectEtcdSemaphore: inspect -etcd on a semaphore's name shows the
// permits in use and each holder's.
func TestInspectEtcdSemaphore(t *testing.T) {
	t.Parallel()
	c, err := etcdembed.Start(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli, err := newEtcdClient(c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const p = "/sem/jobs"
	s, err := etcdlock.NewSemaphore(ctx, cli, p, 3, &etcdlock.Options{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	out, _, status := runCLI(t, "inspect", "-etcd", strings.Join(c.Endpoints(), ","), p)
	if status != exitOK || !clitest.HasLine(out, "Permits in use: 2 of 3") || !clitest.HasLine(out, "Holders: 1") || !clitest.HasLine(out, "Waiters: 0") {
		t.Fatalf("status %d\n%s", status, out)
	}
}
