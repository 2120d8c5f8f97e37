package etcdlock

import (
	"context"
	"errors"
	"testing"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLeaseLostCallDoesNotFence: a call made on a revoked lease before
// Lost closed writes on that lease, which etcd refuses, and so does its
// clean-up's bump of the fence key. The fence key's version must stay
// what the next call compares: the next call must report ErrLeaseLost,
// not the fence key "changed by another writer" (ErrCorrupt), nor a held
// lock ((false, nil) from TryLockContext). Every kind that acquires
// through the Mutex's attempt is checked.
//
// Timing assumption: Lost closes at the first keep-alive after the
// revocation, which the client sends every third of the TTL (liveTTL: 6.7
// s); two calls take far less. A try in which Lost closed before the
// second call returned proves nothing and is made again, on a fresh value.
func TestLeaseLostCallDoesNotFence(t *testing.T) {
	ctx := context.Background()
	// A kind makes a fresh value and returns its call, lease and Lost.
	type kind func(t *testing.T, cli *clientv3.Client, p string) (call func() error, lease int64, lost <-chan struct{})
	kinds := map[string]kind{
		"Mutex.LockContext": func(t *testing.T, cli *clientv3.Client, p string) (func() error, int64, <-chan struct{}) {
			m := newMutex(t, cli, p)
			return func() error { return lockCtx(t, m) }, m.Identity().Lease, m.Lost()
		},
		"Mutex.TryLockContext": func(t *testing.T, cli *clientv3.Client, p string) (func() error, int64, <-chan struct{}) {
			m := newMutex(t, cli, p)
			return func() error {
				ok, err := m.TryLockContext(ctx)
				if ok || err == nil {
					return errors.New("(true or false, nil): it took the lock or saw it held")
				}
				return err
			}, m.Identity().Lease, m.Lost()
		},
		"RWMutex.LockContext": func(t *testing.T, cli *clientv3.Client, p string) (func() error, int64, <-chan struct{}) {
			rw := newRW(t, cli, p, liveTTL)
			return func() error { return rw.LockContext(ctx) }, rw.Identity().Lease, rw.Lost()
		},
		"Election.Campaign": func(t *testing.T, cli *clientv3.Client, p string) (func() error, int64, <-chan struct{}) {
			e := newElection(t, cli, p, liveTTL)
			return func() error { return campaign(t, e, "v") }, e.Identity().Lease, e.Lost()
		},
	}
	for name, newValue := range kinds {
		t.Run(name, func(t *testing.T) {
			cli, p := parallelClient(t)
			const tries = 3
			for try := range tries {
				call, lease, lost := newValue(t, cli, p)
				if _, err := cli.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
					t.Fatal(err)
				}
				first, second := call(), call()
				if isClosed(lost) {
					t.Logf("try %d: Lost closed before the second call returned; again", try+1)
					continue
				}
				for i, err := range []error{first, second} {
					if !errors.Is(err, ErrLeaseLost) || errors.Is(err, lockword.ErrCorrupt) {
						t.Errorf("call %d on a revoked lease, before Lost: %v; want ErrLeaseLost", i+1, err)
					}
				}
				return
			}
			t.Fatalf("Lost closed before the second call in each of %d tries: no call was made on a revoked lease before Lost", tries)
		})
	}
}
