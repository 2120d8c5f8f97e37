package etcdtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock"
	"github.com/lockword/lockword/etcdlock/etcdtest"
)

// TestOrdersLock shows a test of one's own etcdlock code on a real etcd:
// a holder dies mid-update, and the next one is told and repairs.
func TestOrdersLock(t *testing.T) {
	c := etcdtest.Start(t) // one member; etcdtest.Members(3) for a cluster
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := etcdlock.NewMutex(ctx, c.Client(), "/locks/orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Put(ctx, "/orders/42", "half-written"); err != nil {
		t.Fatal(err)
	}
	first.Close() // dies holding: its lease is revoked

	next, err := etcdlock.NewMutex(ctx, c.Client(), "/locks/orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := next.LockContext(ctx); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("after a holder died: %v, want ErrOwnerDead", err)
	}
	if err := next.Put(ctx, "/orders/42", "repaired"); err != nil {
		t.Fatal(err)
	}
	if err := next.MarkConsistent(); err != nil {
		t.Fatal(err)
	}
	next.Unlock()
	if err := first.Put(ctx, "/orders/42", "late"); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Fatalf("a dead holder's write: %v, want ErrNotHolder", err)
	}
}
