package etcdlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestErrorsNameTheValue: ErrNotHolder and ErrLeaseLost as the public
// calls of each type return them say which value failed, as its log
// lines do: its prefix and, once SetName has given one, its name (the
// sentinels are shared, so the bare text names nothing). errors.Is still
// sees the sentinel.
func TestErrorsNameTheValue(t *testing.T) {
	cli, p := parallelClient(t)
	ctx := context.Background()
	m, rw, s, e := oneOfEach(t, cli, p)
	check := func(call, prefix, name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", call, err, want)
		}
		msg := err.Error()
		if !strings.Contains(msg, strconv.Quote(prefix)) {
			t.Errorf("%s: %q does not name the prefix %q", call, msg, prefix)
		}
		if name != "" && !strings.Contains(msg, strconv.Quote(name)) {
			t.Errorf("%s: %q does not name %q, set by SetName", call, msg, name)
		}
	}
	for _, name := range []string{"", "orders"} {
		if name != "" {
			m.SetName(name + "-m")
			rw.SetName(name + "-rw")
			s.SetName(name + "-s")
			e.SetName(name + "-e")
		}
		nm := func(suffix string) string {
			if name == "" {
				return ""
			}
			return name + suffix
		}
		_, err := m.Txn(ctx)
		check("Mutex.Txn", p+"/m", nm("-m"), err, ErrNotHolder)
		check("Mutex.UnlockContext", p+"/m", nm("-m"), m.UnlockContext(ctx), ErrNotHolder)
		check("Mutex.MarkConsistentContext", p+"/m", nm("-m"), m.MarkConsistentContext(ctx), ErrNotHolder)
		_, err = rw.Txn(ctx)
		check("RWMutex.Txn", p+"/rw", nm("-rw"), err, ErrNotHolder)
		check("RWMutex.RUnlockContext", p+"/rw", nm("-rw"), rw.RUnlockContext(ctx), ErrNotHolder)
		check("RWMutex.UnlockContext", p+"/rw", nm("-rw"), rw.UnlockContext(ctx), ErrNotHolder)
		_, err = s.Txn(ctx)
		check("Semaphore.Txn", p+"/s", nm("-s"), err, ErrNotHolder)
		check("Semaphore.Release", p+"/s", nm("-s"), s.Release(ctx), ErrNotHolder)
		check("Election.Proclaim", p+"/e", nm("-e"), e.Proclaim(ctx, "v"), ErrNotHolder)
		_, err = e.Txn(ctx)
		check("Election.Txn", p+"/e", nm("-e"), err, ErrNotHolder)
	}
	// Closed, each has lost its lease.
	m.Close()
	rw.Close()
	s.Close()
	check("Mutex.LockContext", p+"/m", "orders-m", m.LockContext(ctx), ErrLeaseLost)
	_, err := m.TryLockContext(ctx)
	check("Mutex.TryLockContext", p+"/m", "orders-m", err, ErrLeaseLost)
	check("RWMutex.RLockContext", p+"/rw", "orders-rw", rw.RLockContext(ctx), ErrLeaseLost)
	check("RWMutex.LockContext", p+"/rw", "orders-rw", rw.LockContext(ctx), ErrLeaseLost)
	check("Semaphore.Acquire", p+"/s", "orders-s", s.Acquire(ctx, 1), ErrLeaseLost)
	e.Close()
	check("Election.Campaign", p+"/e", "orders-e", e.Campaign(ctx, "v"), ErrLeaseLost)
	// Each lost lease's error names its own type (the RWMutex's and the
	// Election's said "the Mutex's lease is lost ... make a new Mutex").
	for typ, err := range map[string]error{"Mutex": m.LockContext(ctx), "RWMutex": rw.RLockContext(ctx),
		"Semaphore": s.Acquire(ctx, 1), "Election": e.Campaign(ctx, "v")} {
		if msg := err.Error(); !strings.Contains(msg, "the "+typ+"'s lease is lost") || !strings.Contains(msg, "make a new "+typ) {
			t.Errorf("%s on a lost lease: %q, want it to name the %s", typ, msg, typ)
		}
	}
}

// oneOfEach makes a Mutex, an RWMutex, a Semaphore of 2 permits and an
// Election under p (p/m, p/rw, p/s, p/e), each on a lease of its own,
// closed at the test's end.
func oneOfEach(t *testing.T, cli *clientv3.Client, p string) (*Mutex, *RWMutex, *Semaphore, *Election) {
	t.Helper()
	ctx := context.Background()
	opts := &Options{TTL: liveTTL}
	m, err := NewMutex(ctx, cli, p+"/m", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	rw, err := NewRWMutex(ctx, cli, p+"/rw", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	s, err := NewSemaphore(ctx, cli, p+"/s", 2, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e, err := NewElection(ctx, cli, p+"/e", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return m, rw, s, e
}

// TestSemOwnerDeadErrorText: a semaphore's owner-death error names the
// semaphore, the permits and the dead holder, still matches
// lockword.ErrOwnerDead, and gives no lock's advice: a semaphore has no
// MarkConsistent to call.
func TestSemOwnerDeadErrorText(t *testing.T) {
	err := error(&SemOwnerDeadError{Semaphore: "/sem/jobs/", Dead: []Holder{{Host: "h1", PID: 41, Lease: 7}}, Permits: 2})
	msg := err.Error()
	if !errors.Is(err, lockword.ErrOwnerDead) {
		t.Errorf("%q does not match lockword.ErrOwnerDead", msg)
	}
	for _, want := range []string{`"/sem/jobs/"`, "2 permits", "h1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %s", msg, want)
		}
	}
	if strings.Contains(msg, "MarkConsistent") {
		t.Errorf("%q tells the caller to call MarkConsistent, which a Semaphore lacks", msg)
	}
}
