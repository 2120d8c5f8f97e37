package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/locktest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitLogged polls buf until it holds want, for up to lockTimeout.
func waitLogged(buf *locktest.SyncBuffer, want string) {
	for deadline := time.Now().Add(lockTimeout); !strings.Contains(buf.String(), want) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRWMutexStuckReport: a reader waiting for a writer, and a writer
// waiting for a reader, each log one stuck report past the default
// threshold (2 s), naming the lock and the process waited for; before,
// only a writer's wait in the writers' queue was reported. The waiter
// gives up once its report is logged (or after lockTimeout).
func TestRWMutexStuckReport(t *testing.T) {
	for _, writerHolds := range []bool{true, false} {
		t.Run(fmt.Sprintf("writer holds %v", writerHolds), func(t *testing.T) {
			cli, p := parallelClient(t)
			var buf locktest.SyncBuffer
			holder := newRW(t, cli, p, liveTTL)
			waiter, err := NewRWMutex(context.Background(), cli, p, &Options{TTL: liveTTL, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer waiter.Close()
			waiter.SetName("catalog-waiter")
			hold, wait, waitKind := holder.LockContext, waiter.RLockContext, "readers"
			if !writerHolds {
				hold, wait, waitKind = holder.RLockContext, waiter.LockContext, "writers"
			}
			if err := within(t, "hold", hold); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- wait(ctx) }()
			waitLogged(&buf, "stuck threshold")
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the waiting %s: %v", waitKind, err)
			}
			out := buf.String()
			for _, want := range []string{"stuck threshold", p, "name=catalog-waiter", fmt.Sprintf("holder_pid=%d", os.Getpid()), "holder_lease=" + leaseText(holder.Identity().Lease)} {
				if !strings.Contains(out, want) {
					t.Fatalf("stuck report %q lacks %q", out, want)
				}
			}
			if n := strings.Count(out, "stuck threshold"); n != 1 {
				t.Fatalf("%d stuck reports for one wait, want 1:\n%s", n, out)
			}
		})
	}
}

// TestSetName: every etcdlock type takes a name, as every lockword lock
// does; Name gives it back (the prefix until one is set), and the log
// lines name the value by both.
func TestSetName(t *testing.T) {
	cli, p := parallelClient(t)
	m, rw, s, e := oneOfEach(t, cli, p)
	for _, c := range []struct {
		kind   string
		prefix string
		named  interface {
			SetName(string)
			Name() string
		}
		h *handle
	}{
		{"Mutex", p + "/m", m, &m.handle},
		{"RWMutex", p + "/rw", rw, &rw.m.handle},
		{"Semaphore", p + "/s", s, &s.handle},
		{"Election", p + "/e", e, &e.m.handle},
	} {
		if got := c.named.Name(); got != c.prefix {
			t.Errorf("%s: Name before SetName = %q, want the prefix %q", c.kind, got, c.prefix)
		}
		c.named.SetName(c.kind + "-name")
		if got := c.named.Name(); got != c.kind+"-name" {
			t.Errorf("%s: Name = %q after SetName(%q)", c.kind, got, c.kind+"-name")
		}
		if got := fmt.Sprint(c.h.logAttrs()); !strings.Contains(got, c.prefix) || !strings.Contains(got, "name "+c.kind+"-name") {
			t.Errorf("%s: log attributes %s lack the prefix or the name", c.kind, got)
		}
	}
}

// TestElectionStandbyNotStuck: a campaigner waiting behind a leader is a
// standby, waiting by design: it logs no stuck report past the default
// threshold (before, the Election's Mutex reported it every time).
func TestElectionStandbyNotStuck(t *testing.T) {
	cli, p := parallelClient(t)
	leader := newElection(t, cli, p, liveTTL)
	var buf locktest.SyncBuffer
	standby, err := NewElection(context.Background(), cli, p, &Options{TTL: liveTTL, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close()
	if err := within(t, "Campaign", func(ctx context.Context) error { return leader.Campaign(ctx, "a") }); err != nil {
		t.Fatal(err)
	}
	// Past the threshold by a second: long enough for the report, had the
	// standby's timer started within that second of the call.
	ctx, cancel := context.WithTimeout(context.Background(), lockword.DefaultStuckThreshold+time.Second)
	defer cancel()
	if err := standby.Campaign(ctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("standby Campaign: %v, want DeadlineExceeded", err)
	}
	if out := buf.String(); strings.Contains(out, "stuck") {
		t.Fatalf("a standby campaigner logged a stuck report:\n%s", out)
	}
}

// TestRWMutexLockerForms: Lock, Unlock, RLock, RUnlock and RLocker take
// and release what their Context forms do, and Stats counts reads and
// writes together, a read that waited for a writer as slow.
func TestRWMutexLockerForms(t *testing.T) {
	cli, p := parallelClient(t)
	w, r := newRW(t, cli, p, liveTTL), newRW(t, cli, p, liveTTL)
	r.EnableStats()
	w.Lock()
	if w.Token() == 0 {
		t.Fatal("Lock returned without a write hold (Token 0)")
	}
	done := make(chan struct{})
	go func() { r.RLocker().Lock(); close(done) }()
	waitFor(t, "the reader to queue behind the writer", func() bool {
		g, err := cli.Get(context.Background(), p+readerDir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && g.Count == 1
	})
	select {
	case <-done:
		t.Fatal("RLocker().Lock returned while a writer held")
	case <-time.After(100 * time.Millisecond):
	}
	w.Unlock()
	<-done
	r.RLock()
	blocked(t, "LockContext while two reads are held", w.LockContext)
	r.RUnlock()
	r.RLocker().Unlock()
	if err := within(t, "LockContext", w.LockContext); err != nil {
		t.Fatal(err)
	}
	w.Unlock()
	st := r.Stats()
	if st.Acquisitions != 2 || st.SlowPath != 1 || st.Parks < 1 || st.WaitMax < 100*time.Millisecond || st.WaitTotal < st.WaitMax {
		t.Fatalf("reader's Stats = %+v, want 2 acquisitions, 1 slow (waited at least 100 ms)", st)
	}
	locktest.WantPanic(t, "RUnlock without a read hold", "RUnlock of unlocked", r.RUnlock)
}

// TestElectionStats: Stats counts the campaigns won, a standby's as slow
// with its time in reserve.
func TestElectionStats(t *testing.T) {
	cli, p := parallelClient(t)
	a, b := newElection(t, cli, p, liveTTL), newElection(t, cli, p, liveTTL)
	b.EnableStats()
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	if err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	won := make(chan error, 1)
	go func() { won <- b.Campaign(ctx, "b") }()
	time.Sleep(100 * time.Millisecond)
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-won; err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Acquisitions != 1 || st.SlowPath != 1 || st.WaitMax < 100*time.Millisecond {
		t.Fatalf("standby's Stats = %+v, want 1 campaign won, slow, waited at least 100 ms", st)
	}
}

// waitFor polls cond every 10 ms until it holds, failing t after
// lockTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(lockTimeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", lockTimeout, what)
		}
	}
}
