//go:build linux

package shm

import (
	"context"
	"errors"
	"github.com/lockword/lockword"
	"testing"
	"time"
)

// objWords returns the mapped bytes of the named object of r.
func objWords(t *testing.T, r *Region, name string) []byte {
	t.Helper()
	o, ok := r.objects[name]
	if !ok {
		t.Fatalf("no object %q", name)
	}
	return r.data[o.offset : o.offset+uint64(o.size)]
}

// returnsWithin runs fn and fails the test if it has not returned within
// limit. A call that never returns is left running (it cannot be
// stopped); the test fails either way.
func returnsWithin(t *testing.T, what string, limit time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s did not return within %v", what, limit)
		return nil
	}
}

// TestCorruptServingAheadOfNext is issue 12's first finding: serving =
// next + 10 written into a ticket queue in use must not make LockContext
// spin past its context (it did: take claimed a record, saw serving past
// its ticket, undid the claim and retried, never looking at the context).
// The words are provably corrupt, so the error is ErrCorrupt naming the
// object. The same for RWMutex's writers' queue.
func TestCorruptServingAheadOfNext(t *testing.T) {
	for _, kind := range []string{"ticket", "rw"} {
		t.Run(kind, func(t *testing.T) {
			path := tempRegionPath(t)
			r := mustCreate(t, path, 0)
			other := openHandles(t, path, 1)[0]
			var lock, victim func(context.Context) error
			var unlock func()
			switch kind {
			case "ticket":
				a, _ := r.TicketMutex("x")
				b, _ := other.TicketMutex("x")
				lock, unlock, victim = a.LockContext, a.Unlock, b.LockContext
			case "rw":
				a, _ := r.RWMutex("x")
				b, _ := other.RWMutex("x")
				lock, unlock, victim = a.LockContext, a.Unlock, b.LockContext
			}
			if err := lock(context.Background()); err != nil { // in use
				t.Fatal(err)
			}
			obj := objWords(t, r, "x")
			n := word32(obj, ticketObjNext).Load()
			word32(obj, ticketObjServing).Store(n + 10)

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := returnsWithin(t, "LockContext on a corrupt queue", 5*time.Second, func() error { return victim(ctx) })
			if !errors.Is(err, lockword.ErrCorrupt) {
				t.Fatalf("LockContext on serving = next+10: %v after %v, want lockword.ErrCorrupt", err, time.Since(start))
			}
			var ce *lockword.CorruptError
			if !errors.As(err, &ce) || ce.Object != "x" {
				t.Fatalf("error %v does not name the object", err)
			}
			// The holder's Unlock on a queue overwritten under it must
			// not panic as misuse: it held the lock.
			unlock()
			info, err := Inspect(path)
			if err != nil {
				t.Fatal(err)
			}
			if st := info.Objects[0].State; st != "corrupt" || info.Objects[0].Reason == "" {
				t.Fatalf("inspect: state %q reason %q, want corrupt with a reason", st, info.Objects[0].Reason)
			}
		})
	}
}
