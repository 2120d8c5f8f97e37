package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// unwatchedSession returns a Session on a fresh lease of liveTTL that
// nothing keeps alive or watches: its Done (and the Lost of every value
// on it) stays open after the lease is revoked, as a real Session's does
// until its next keep-alive (up to a third of the TTL later). The tests
// below make their calls in that window without racing the keep-alive;
// liveTTL outlasts them.
func unwatchedSession(t *testing.T, cli *clientv3.Client) *Session {
	t.Helper()
	g, err := cli.Grant(context.Background(), int64(liveTTL/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return &Session{cli: cli, id: g.ID, ttl: liveTTL, stop: func() {}, done: make(chan struct{})}
}

// tried is a TryLockContext's or TryAcquire's result as one error:
// (true, nil) or (false, nil) on a revoked lease is one too.
func tried(ok bool, err error) error {
	if ok || err == nil {
		return fmt.Errorf("(%v, nil): it took it, or saw it taken", ok)
	}
	return err
}

// TestLeaseLostCallDoesNotFence: a call made on a revoked lease before
// Lost closed writes on that lease, which etcd refuses, and so does its
// clean-up's bump of the fence key. The fence key's version must stay
// what the next call compares: the next call must report ErrLeaseLost,
// not the fence key "changed by another writer" (ErrCorrupt), nor a held
// lock ((false, nil) from TryLockContext); and the fence counter stays
// 0 (a failed comparison asks whether the lease lives, so on LockContext
// the counter, not the error, shows a wrong bump). Every kind that acquires
// through the Mutex's attempt is checked, and the Semaphore, whose
// attempt fences the same way.
func TestLeaseLostCallDoesNotFence(t *testing.T) {
	ctx := context.Background()
	kinds := map[string]func(t *testing.T, cli *clientv3.Client, p string, o *Options) (func() error, func() int64){
		"Mutex.LockContext": func(t *testing.T, cli *clientv3.Client, p string, o *Options) (func() error, func() int64) {
			m, err := NewMutex(ctx, cli, p, o)
			closedAtEnd(t, m, err)
			return func() error { return m.LockContext(ctx) }, func() int64 { return m.fenced }
		},
		"Mutex.TryLockContext": func(t *testing.T, cli *clientv3.Client, p string, o *Options) (func() error, func() int64) {
			m, err := NewMutex(ctx, cli, p, o)
			closedAtEnd(t, m, err)
			return func() error { return tried(m.TryLockContext(ctx)) }, func() int64 { return m.fenced }
		},
		"Semaphore.Acquire": func(t *testing.T, cli *clientv3.Client, p string, o *Options) (func() error, func() int64) {
			s, err := NewSemaphore(ctx, cli, p, 2, o)
			closedAtEnd(t, s, err)
			return func() error { return s.Acquire(ctx, 1) }, func() int64 { return s.fenced }
		},
		"Semaphore.TryAcquire": func(t *testing.T, cli *clientv3.Client, p string, o *Options) (func() error, func() int64) {
			s, err := NewSemaphore(ctx, cli, p, 2, o)
			closedAtEnd(t, s, err)
			return func() error { return tried(s.TryAcquire(ctx, 1)) }, func() int64 { return s.fenced }
		},
		"RWMutex.LockContext": func(t *testing.T, cli *clientv3.Client, p string, o *Options) (func() error, func() int64) {
			rw, err := NewRWMutex(ctx, cli, p, o)
			closedAtEnd(t, rw, err)
			return func() error { return rw.LockContext(ctx) }, func() int64 { return rw.m.fenced }
		},
		"Election.Campaign": func(t *testing.T, cli *clientv3.Client, p string, o *Options) (func() error, func() int64) {
			e, err := NewElection(ctx, cli, p, o)
			closedAtEnd(t, e, err)
			return func() error { return e.Campaign(ctx, "v") }, func() int64 { return e.m.fenced }
		},
	}
	for name, newCall := range kinds {
		t.Run(name, func(t *testing.T) {
			cli, p := parallelClient(t)
			sess := unwatchedSession(t, cli)
			call, fenced := newCall(t, cli, p, &Options{Session: sess})
			if _, err := cli.Revoke(ctx, sess.id); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 2; i++ {
				if err := call(); !errors.Is(err, ErrLeaseLost) || errors.Is(err, lockword.ErrCorrupt) {
					t.Errorf("call %d on a revoked lease, before Lost: %v; want ErrLeaseLost", i, err)
				}
			}
			// What the next attempt would compare, whatever reports it.
			if n := fenced(); n != 0 {
				t.Errorf("fence counter %d after calls on a revoked lease; want 0: no fence key was written", n)
			}
		})
	}
}

// TestLeaseLostAfterFence: a failed call's fence, committed while the
// lease lived, is a key on that lease; when the lease is revoked the key
// goes with it, and the next call's comparison of its version (now 0)
// fails. Before Lost closes, that call must report ErrLeaseLost, not the
// fence key "changed by another writer" (ErrCorrupt).
func TestLeaseLostAfterFence(t *testing.T) {
	// A value's call (to lock or take the one permit) and its handle.
	type value struct {
		call func(context.Context) error
		h    *handle
	}
	kinds := map[string]func(t *testing.T, cli *clientv3.Client, p string, o *Options) value{
		"Mutex": func(t *testing.T, cli *clientv3.Client, p string, o *Options) value {
			m, err := NewMutex(context.Background(), cli, p, o)
			closedAtEnd(t, m, err)
			return value{m.LockContext, &m.handle}
		},
		"Semaphore": func(t *testing.T, cli *clientv3.Client, p string, o *Options) value {
			s, err := NewSemaphore(context.Background(), cli, p, 1, o)
			closedAtEnd(t, s, err)
			return value{func(ctx context.Context) error { return s.Acquire(ctx, 1) }, &s.handle}
		},
	}
	for name, newValue := range kinds {
		t.Run(name, func(t *testing.T) {
			cli, p := parallelClient(t)
			ctx := context.Background()
			if err := newValue(t, cli, p, &Options{TTL: liveTTL}).call(ctx); err != nil {
				t.Fatal(err) // the holder
			}
			sess := unwatchedSession(t, cli)
			v := newValue(t, cli, p, &Options{Session: sess})
			// The time is only how long the call waits for the holder;
			// whenever it ends, its clean-up fences.
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			err := v.call(short)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a call on a held %s: %v, want DeadlineExceeded", name, err)
			}
			v.h.bg.Wait()
			if _, err := cli.Revoke(ctx, sess.id); err != nil {
				t.Fatal(err)
			}
			long, cancel := context.WithTimeout(ctx, lockTimeout)
			defer cancel()
			if err := v.call(long); !errors.Is(err, ErrLeaseLost) || errors.Is(err, lockword.ErrCorrupt) {
				t.Errorf("a call after the fence's lease was revoked, before Lost: %v; want ErrLeaseLost", err)
			}
		})
	}
}
