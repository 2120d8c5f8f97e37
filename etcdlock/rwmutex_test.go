package etcdlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func newRW(t testing.TB, cli *clientv3.Client, prefix string, ttl time.Duration) *RWMutex {
	t.Helper()
	rw, err := NewRWMutex(context.Background(), cli, prefix, &Options{TTL: ttl})
	return closedAtEnd(t, rw, err)
}

// blocked asserts that f (an acquisition) does not return nil within
// 300 ms: the time is only how long the test looks, any answer but
// DeadlineExceeded fails it.
func blocked(t *testing.T, what string, f func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := f(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: %v, want it to wait (DeadlineExceeded)", what, err)
	}
}

func within(t *testing.T, what string, f func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	return f(ctx)
}

// TestRWMutexReadersShareWritersExclude (after etcd's recipes.RWMutex
// test): readers hold together, a writer waits for them, readers that
// come after a waiting writer wait for it, and the writer's guarded write
// lands only while it holds.
func TestRWMutexReadersShareWritersExclude(t *testing.T) {
	cli, p := parallelClient(t)
	r1, r2, w, r3 := newRW(t, cli, p, liveTTL), newRW(t, cli, p, liveTTL), newRW(t, cli, p, liveTTL), newRW(t, cli, p, liveTTL)
	for _, r := range []*RWMutex{r1, r2} {
		if err := within(t, "RLock", r.RLockContext); err != nil {
			t.Fatal(err)
		}
	}
	blocked(t, "Lock while two readers hold", w.LockContext)
	wdone := make(chan error, 1)
	go func() { wdone <- within(t, "Lock", w.LockContext) }()
	waitOneWaiterOrHolder(t, cli, p)
	blocked(t, "RLock behind a waiting writer", r3.RLockContext)
	r1.RUnlock()
	r2.RUnlock()
	if err := <-wdone; err != nil {
		t.Fatal(err)
	}
	if err := w.Put(context.Background(), p+"-data", "w"); err != nil {
		t.Fatal(err)
	}
	blocked(t, "RLock while the writer holds", r3.RLockContext)
	w.Unlock()
	if err := w.Put(context.Background(), p+"-data", "late"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("write after Unlock: %v, want ErrNotHolder", err)
	}
	if err := within(t, "RLock", r3.RLockContext); err != nil {
		t.Fatal(err)
	}
	r3.RUnlock()
	if info, err := Inspect(context.Background(), cli, p); err != nil || info.State != StateFree || len(info.Waiters) != 0 {
		t.Fatalf("after all: %+v, %v; want free", info, err)
	}
}

// waitOneWaiterOrHolder waits until a writer has queued (or holds) at p.
func waitOneWaiterOrHolder(t *testing.T, cli *clientv3.Client, p string) {
	t.Helper()
	for deadline := time.Now().Add(lockTimeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if info, err := Inspect(context.Background(), cli, p); err == nil && (info.State == StateHeld || len(info.Waiters) > 0) {
			return
		}
	}
	t.Fatal("the writer never queued")
}

// TestRWMutexDeadReader: a reader that dies holding is dropped when its
// lease expires; the writer gets the lock without an owner-death report.
func TestRWMutexDeadReader(t *testing.T) {
	cli, p := parallelClient(t)
	r, w := newRW(t, cli, p, testTTL), newRW(t, cli, p, liveTTL)
	if err := within(t, "RLock", r.RLockContext); err != nil {
		t.Fatal(err)
	}
	die(r.m)
	if err := within(t, "Lock", w.LockContext); err != nil {
		t.Fatalf("Lock after a reader died: %v, want nil", err)
	}
	w.Unlock()
}

// TestRWMutexDeadWriter: a writer that dies holding keeps readers out
// until the next writer, told with ErrOwnerDead, has repaired; its late
// write fails.
func TestRWMutexDeadWriter(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	d, w, r := newRW(t, cli, p, testTTL), newRW(t, cli, p, liveTTL), newRW(t, cli, p, liveTTL)
	if err := within(t, "Lock", d.LockContext); err != nil {
		t.Fatal(err)
	}
	die(d.m)
	for deadline := time.Now().Add(lockTimeout); ; time.Sleep(20 * time.Millisecond) {
		// The lease expires (TTL + the 0.5 s scan): the data may be half written.
		if info, err := Inspect(ctx, cli, p); err == nil && info.State == StateOwnerDead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead writer's lease never expired")
		}
	}
	blocked(t, "RLock of a dead writer's data", r.RLockContext)
	rdone := make(chan error, 1)
	go func() { rdone <- within(t, "RLock", r.RLockContext) }()
	err := within(t, "Lock", w.LockContext)
	if !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("Lock after a writer died: %v, want ErrOwnerDead", err)
	}
	if err := d.Put(ctx, p+"-data", "dead, late"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("dead writer's late write: %v, want ErrNotHolder", err)
	}
	if err := w.Put(ctx, p+"-data", "repaired"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-rdone:
		t.Fatalf("a reader got in during the repair: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := w.MarkConsistent(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-rdone:
		t.Fatalf("a reader got in after MarkConsistent, before Unlock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	w.Unlock()
	if err := <-rdone; err != nil {
		t.Fatalf("RLock after the repair: %v", err)
	}
	r.RUnlock()
}

// TestRWMutexCancelled: an RLockContext or LockContext that gives up
// leaves no key, whatever moment it is cut at.
func TestRWMutexCancelled(t *testing.T) {
	cli, p := parallelClient(t)
	w, r := newRW(t, cli, p, liveTTL), newRW(t, cli, p, liveTTL)
	if err := within(t, "Lock", w.LockContext); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, time.Millisecond, 50 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err := r.RLockContext(ctx)
		cancel()
		if err == nil {
			t.Fatalf("RLock within %v while a writer holds: nil", d)
		}
	}
	r.m.waitIdle()
	time.Sleep(100 * time.Millisecond) // a late put would have landed
	g, err := cli.Get(context.Background(), p+readerDir, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || g.Count != 0 {
		t.Fatalf("reader keys left after cancelled RLocks: %v, %v", g, err)
	}
	w.Unlock()
}

// TestRWMutexExcludes (after etcd's recipes.RWMutex test, with
// lockword's activity word): goroutines, each with its own RWMutex, read
// and write at random; inside, +1 per reader and +10000 per writer must
// show either readers only or one writer.
func TestRWMutexExcludes(t *testing.T) {
	cli, p := parallelClient(t)
	if n := rwActivityRun(t, cli, p, 5, 8, false); n != 0 {
		t.Fatalf("%d activity-word violations", n)
	}
}

// TestRWMutexExcludesCheckerFails: the same run with readers that do not
// wait (a broken lock) must show violations.
func TestRWMutexExcludesCheckerFails(t *testing.T) {
	cli, p := parallelClient(t)
	// A run whose lockless readers happened to miss every writer proves
	// nothing (a loaded host spaces them out): up to 3 runs.
	for attempt := 1; rwActivityRun(t, cli, p, 5, 8, true) == 0; attempt++ {
		if attempt == 3 {
			t.Fatal("readers that ignore the writer went unnoticed in 3 runs")
		}
	}
}

func rwActivityRun(t *testing.T, cli *clientv3.Client, p string, workers, iters int, broken bool) int64 {
	var activity, violations atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		rw := newRW(t, cli, p, liveTTL)
		wg.Go(func() {
			for j := range iters {
				if (i+j)%3 == 0 {
					if err := within(t, "Lock", rw.LockContext); err != nil {
						t.Error(err)
						return
					}
					if activity.Add(10000) != 10000 {
						violations.Add(1)
					}
					time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
					activity.Add(-10000)
					rw.Unlock()
					continue
				}
				if !broken {
					if err := within(t, "RLock", rw.RLockContext); err != nil {
						t.Error(err)
						return
					}
				}
				if activity.Add(1) >= 10000 {
					violations.Add(1)
				}
				time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
				activity.Add(-1)
				if !broken {
					rw.RUnlock()
				}
			}
		})
	}
	wg.Wait()
	return violations.Load()
}

// TestRWMutexForeignKeys: a key in the writers' queue, or under
// readers/, that no Mutex or RWMutex writes (misnamed, or without a
// lease) would hold every reader (or writer) behind it for ever;
// RLockContext (or LockContext) reports it as ErrCorrupt naming the key
// well before its deadline (hostileWait), and leaves no read key (or
// queue key) behind.
func TestRWMutexForeignKeys(t *testing.T) {
	for _, key := range []string{"/queue/zz", "/queue/00000000000000aa-0badcafe", "/readers/zz", "/readers/00000000000000aa-0badcafe-1"} {
		t.Run(strings.ReplaceAll(key, "/", "_"), func(t *testing.T) {
			cli, p := parallelClient(t)
			if _, err := cli.Put(context.Background(), p+key, "x"); err != nil {
				t.Fatal(err)
			}
			rw := newRW(t, cli, p, DefaultTTL)
			acquire, what, left := rw.RLockContext, "RLockContext", readerDir
			if strings.HasPrefix(key, readerDir) {
				acquire, what, left = rw.LockContext, "LockContext", queueDir
			}
			ctx, cancel := context.WithTimeout(context.Background(), hostileWait)
			defer cancel()
			t0 := time.Now()
			err := acquire(ctx)
			var ce *lockword.CorruptError
			if !errors.Is(err, lockword.ErrCorrupt) || !errors.As(err, &ce) || !strings.Contains(err.Error(), p+key) {
				t.Fatalf("%s after %v: %v, want ErrCorrupt naming %s", what, time.Since(t0), err, p+key)
			}
			rw.m.waitIdle()
			r, err := cli.Get(context.Background(), p+left, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil || r.Count != 0 {
				t.Fatalf("keys under %s left after the failed %s: %v, %v", left, what, r, err)
			}
		})
	}
}

// TestRWMutexReaderFenced: a reader's guarded write lands while its read
// hold lasts, and a reader paused past its lease (here: its lease
// revoked, as the expiry does) has its late write refused once a writer
// has taken the lock and written: the reader's fence. Before, a reader
// had no guarded write at all (Put was the writer's only).
func TestRWMutexReaderFenced(t *testing.T) {
	cli, p := parallelClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	data := p + "-data"
	reader, writer := newRW(t, cli, p, liveTTL), newRW(t, cli, p, liveTTL)
	if err := reader.Put(ctx, data, "reader"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("a reader's guarded write with no hold: %v, want ErrNotHolder", err)
	}
	if err := reader.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := reader.Put(ctx, data, "reader"); err != nil {
		t.Fatalf("a reader's guarded write while it holds: %v", err)
	}
	rtok := reader.RToken()
	if rtok == 0 {
		t.Fatal("RToken is 0 while a read lock is held")
	}
	// The pause: the reader's lease ends while it holds (it does not know).
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(reader.Identity().Lease)); err != nil {
		t.Fatal(err)
	}
	if err := writer.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := writer.Put(ctx, data, "writer"); err != nil {
		t.Fatal(err)
	}
	if wtok := writer.Token(); wtok <= rtok {
		t.Errorf("writer's token %d is not above the reader's %d before it", wtok, rtok)
	}
	// The reader resumes, believing it still holds.
	if err := reader.Put(ctx, data, "late reader"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("a paused reader's late write: %v, want ErrNotHolder", err)
	}
	writer.Unlock()
	r, err := cli.Get(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "writer" {
		t.Fatalf("%s = %q, want the writer's value", data, r.Kvs)
	}
}
