package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/shm"
)

// hostileWait bounds how long an acquirer may take to report a record no
// valid history writes: it must report, not wait for its deadline
// (lockTimeout, far longer).
const hostileWait = 5 * time.Second

func TestMutexBadArguments(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		prefix string
		ttl    time.Duration
		nilCli bool
	}{
		{"nil client", p, 0, true},
		{"largest TTL", p, math.MaxInt64, false},
		{"negative TTL", p, -time.Second, false},
		{"empty name", "", 0, false},
		{"root", "/", 0, false},
		{"name inside another lock's queue", p + "/queue", 0, false},
		{"name inside another lock's fence keys", p + "/fence/x", 0, false},
	} {
		c2 := cli
		if c.nilCli {
			c2 = nil
		}
		m, err := NewMutex(ctx, c2, c.prefix, &Options{TTL: c.ttl})
		if !errors.Is(err, ErrBadArgument) {
			if m != nil {
				m.Close()
			}
			t.Errorf("NewMutex, %s: %v, want ErrBadArgument", c.name, err)
		}
	}
	// "/p" and "/p/" are one lock.
	a, b := newMutex(t, cli, p), newMutex(t, cli, p+"/")
	if a.Name() != b.Name() {
		t.Fatalf("names %q and %q", a.Name(), b.Name())
	}
	if err := lockCtx(t, a); err != nil {
		t.Fatal(err)
	}
	if b.TryLock() {
		t.Fatalf("%q and %q are two locks", p, p+"/")
	}
	a.Unlock()
}

// TestMutexCorruptRecord: a hold record no valid history writes is
// reported as ErrCorrupt to every acquirer (none waits to its deadline),
// each one's queue key removed, and Reinitialize clears it.
func TestMutexCorruptRecord(t *testing.T) {
	cli, p := parallelClient(t)
	if _, err := cli.Put(context.Background(), p+"/owner", "not json"); err != nil {
		t.Fatal(err)
	}
	a, b := newMutex(t, cli, p), newMutex(t, cli, p)
	for _, m := range []*Mutex{a, b} {
		expectCorrupt(t, m, "hold record")
	}
	b.waitIdle()
	info, err := Inspect(context.Background(), cli, p)
	if err != nil || info.State != StateCorrupt || len(info.Waiters) != 0 || len(info.Corrupt) != 1 {
		t.Fatalf("Inspect: %+v, %v; want corrupt, no waiters", info, err)
	}
	if err := a.Reinitialize(); err != nil {
		t.Fatal(err)
	}
	if err := lockCtx(t, b); err != nil {
		t.Fatalf("lock after Reinitialize: %v", err)
	}
	if err := a.Reinitialize(); !errors.Is(err, shm.ErrRegionBusy) {
		t.Fatalf("Reinitialize of a held lock: %v, want ErrRegionBusy", err)
	}
	b.Unlock()
}

// TestMutexForeignQueueKey: a key under P/queue/ that no Mutex writes
// (without a lease, or not named after its lease) would block every
// acquirer for ever; it is reported as ErrCorrupt naming the key, Inspect
// says so, and Reinitialize removes it.
func TestMutexForeignQueueKey(t *testing.T) {
	for _, key := range []string{"/queue/by-hand", "/queue/00000000000000aa-0badcafe"} {
		t.Run(strings.ReplaceAll(key, "/", "_"), func(t *testing.T) {
			cli, p := parallelClient(t)
			if _, err := cli.Put(context.Background(), p+key, "{}"); err != nil {
				t.Fatal(err)
			}
			m := newMutex(t, cli, p)
			expectCorrupt(t, m, p+key)
			m.waitIdle()
			info, err := Inspect(context.Background(), cli, p)
			if err != nil || info.State != StateCorrupt || len(info.Corrupt) != 1 || !strings.Contains(info.Corrupt[0], p+key) || len(info.Waiters) != 0 {
				t.Fatalf("Inspect: %+v, %v; want corrupt naming %s, no waiters", info, err, p+key)
			}
			if err := m.Reinitialize(); err != nil {
				t.Fatal(err)
			}
			if err := lockCtx(t, m); err != nil {
				t.Fatalf("lock after Reinitialize: %v", err)
			}
			m.Unlock()
		})
	}
}

// expectCorrupt locks m and wants ErrCorrupt mentioning what, within
// hostileWait.
func expectCorrupt(t *testing.T, m *Mutex, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hostileWait)
	defer cancel()
	t0 := time.Now()
	err := m.LockContext(ctx)
	var ce *lockword.CorruptError
	if !errors.Is(err, lockword.ErrCorrupt) || !errors.As(err, &ce) || !strings.Contains(err.Error(), what) {
		t.Fatalf("LockContext after %v: %v, want ErrCorrupt naming %s", time.Since(t0), err, what)
	}
	if !strings.Contains(fmt.Sprint(err), m.Name()) {
		t.Fatalf("%v does not name the lock", err)
	}
}
