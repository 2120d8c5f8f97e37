package etcdlock

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock/etcdtest"
	"github.com/lockword/lockword/internal/locktest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The tests share one embedded single-node server on a loopback port, with
// its data in a temporary directory; each test uses its own prefix. Its
// minimum lease TTL is 1 s (etcdtest), which the owner-death tests wait
// for: they take about 1–2.5 s each and run in parallel.

var endpoints []string

const (
	crashEnv     = "ETCDLOCK_TEST_CRASH" // child: "step,prefix,setup"
	endpointsEnv = "ETCDLOCK_TEST_ENDPOINTS"
	testTTL      = time.Second
	liveTTL      = 20 * time.Second
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashEnv); spec != "" {
		os.Exit(crashChild(spec))
	}
	if os.Getenv(serveEnv) != "" {
		os.Exit(serveChild())
	}
	c, err := etcdtest.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlock tests: starting an embedded etcd:", err)
		os.Exit(1)
	}
	endpoints = c.Endpoints()
	code := m.Run()
	c.Close()
	os.Exit(code)
}

// closedAtEnd is the tail of the new* helpers: it fails t on err, the
// constructor's, and otherwise closes v when t ends and returns it.
func closedAtEnd[T interface{ Close() error }](t testing.TB, v T, err error) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func newClient(t testing.TB, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	return closedAtEnd(t, cli, err)
}

// newMutex makes a Mutex that must not lose its lease: its TTL is long
// enough that a loaded host (keep-alives starved for seconds) does not
// expire it. newDyingMutex makes one that is to die (die, or a killed
// child): the server's shortest TTL, 1 s.
func newMutex(t testing.TB, cli *clientv3.Client, prefix string) *Mutex {
	return newMutexTTL(t, cli, prefix, liveTTL)
}

func newDyingMutex(t testing.TB, cli *clientv3.Client, prefix string) *Mutex {
	return newMutexTTL(t, cli, prefix, testTTL)
}

func newMutexTTL(t testing.TB, cli *clientv3.Client, prefix string, ttl time.Duration) *Mutex {
	t.Helper()
	m, err := NewMutex(context.Background(), cli, prefix, &Options{TTL: ttl})
	return closedAtEnd(t, m, err)
}

// prefix is a fresh lock name for test t.
func prefix(t testing.TB) string {
	return fmt.Sprintf("/lockword-test/%s/%d", t.Name(), time.Now().UnixNano())
}

// parallelClient marks t parallel and returns a client of the test
// cluster and a key prefix of t's own.
func parallelClient(t *testing.T) (*clientv3.Client, string) {
	t.Parallel()
	return newClient(t, endpoints), prefix(t)
}

// waitOneWaiter polls Inspect of the lock at p, every poll, until it
// shows one waiter, and returns that inspection. It stops t, with
// never, if none shows within lockTimeout.
func waitOneWaiter(t *testing.T, cli *clientv3.Client, p string, poll time.Duration, never string) *Info {
	t.Helper()
	deadline := time.Now().Add(lockTimeout)
	for {
		info, err := Inspect(context.Background(), cli, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Waiters) == 1 {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatal(never)
		}
		time.Sleep(poll)
	}
}

// die makes m's holder die as a killed process would: its lease is no
// longer kept alive, so it expires after the TTL, and m is forgotten.
func die(m *Mutex) { m.sess.stop() }

// lockTimeout bounds every wait of these tests: a lease expiry takes at
// most TTL + the server's 0.5 s expiry scan; 20 s is far beyond that on a
// loaded host.
const lockTimeout = 20 * time.Second

func lockCtx(t testing.TB, m *Mutex) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	return m.LockContext(ctx)
}

func TestMutexLockUnlockToken(t *testing.T) {
	cli, p := parallelClient(t)
	a, b := newMutex(t, cli, p), newMutex(t, cli, p)
	a.EnableStats()
	var last int64
	for i := range 3 {
		m := []*Mutex{a, b}[i%2]
		if err := lockCtx(t, m); err != nil {
			t.Fatal(err)
		}
		if tok := m.Token(); tok <= last {
			t.Fatalf("token %d after %d: not increasing", tok, last)
		} else {
			last = tok
		}
		if b2 := []*Mutex{b, a}[i%2]; b2.TryLock() {
			t.Fatal("TryLock of a held lock succeeded")
		}
		if err := m.Put(context.Background(), p+"-data", strconv.Itoa(i)); err != nil {
			t.Fatalf("guarded Put by the holder: %v", err)
		}
		m.Unlock()
	}
	if !a.TryLock() {
		t.Fatal("TryLock of a free lock failed")
	}
	if a.Token() <= last {
		t.Fatalf("TryLock token %d after %d", a.Token(), last)
	}
	a.Unlock()
	if err := a.Put(context.Background(), p+"-data", "x"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("Put after Unlock: %v, want ErrNotHolder", err)
	}
	if s := a.Stats(); s.Acquisitions != 3 {
		t.Fatalf("stats: %+v, want 3 acquisitions", s)
	}
	locktest.WantPanic(t, "Unlock of an unlocked Mutex", "Unlock of unlocked Mutex", a.Unlock)
}

// TestMutexExcludes hammers one lock from goroutines with a Mutex each
// (more than the cores): a counter in etcd read and written back in two
// round trips, the write guarded, plus an owner slot, must end exact.
func TestMutexExcludes(t *testing.T) {
	cli, p := parallelClient(t)
	const workers, iters = 6, 15
	if err := exclusionRun(t, cli, p, workers, iters, false); err != nil {
		t.Fatal(err)
	}
}

// TestMutexExcludesCheckerFails runs the same checker with a lock that
// does not exclude (every worker skips the lock): it must report lost
// updates or owner-slot violations.
func TestMutexExcludesCheckerFails(t *testing.T) {
	t.Parallel()
	cli := newClient(t, endpoints)
	if err := exclusionRun(t, cli, prefix(t), 6, 15, true); err == nil {
		t.Fatal("the checker found nothing wrong with a lock that does not exclude")
	}
}

func exclusionRun(t *testing.T, cli *clientv3.Client, p string, workers, iters int, broken bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counter := p + "-counter"
	var owner, violations int
	var omu sync.Mutex // guards owner and violations: the slot, not the lock
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for id := 1; id <= workers; id++ {
		m := newMutex(t, cli, p)
		wg.Go(func() {
			for range iters {
				if !broken {
					if err := m.LockContext(ctx); err != nil {
						errs <- err
						return
					}
				}
				omu.Lock()
				if owner != 0 {
					violations++
				}
				owner = id
				omu.Unlock()
				r, err := cli.Get(ctx, counter)
				if err != nil {
					errs <- err
					return
				}
				v := 0
				if len(r.Kvs) == 1 {
					v, _ = strconv.Atoi(string(r.Kvs[0].Value))
				}
				put := func() error { _, err := cli.Put(ctx, counter, strconv.Itoa(v+1)); return err }
				if !broken {
					put = func() error { return m.Put(ctx, counter, strconv.Itoa(v+1)) }
				}
				if err := put(); err != nil {
					errs <- err
					return
				}
				omu.Lock()
				if owner != id {
					violations++
				}
				owner = 0
				omu.Unlock()
				if !broken {
					m.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, err := cli.Get(ctx, counter)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := strconv.Atoi(string(r.Kvs[0].Value))
	if got != workers*iters || violations != 0 {
		return fmt.Errorf("counter %d, want %d; %d owner-slot violations", got, workers*iters, violations)
	}
	return nil
}

func TestMutexOwnerDeadNotRecoverable(t *testing.T) {
	cli, p := parallelClient(t)
	a := newDyingMutex(t, cli, p)
	if err := lockCtx(t, a); err != nil {
		t.Fatal(err)
	}
	aTok := a.Token()
	die(a)
	b := newMutex(t, cli, p)
	err := lockCtx(t, b)
	var od *OwnerDeadError
	if !errors.Is(err, lockword.ErrOwnerDead) || !errors.As(err, &od) {
		t.Fatalf("lock after the holder died: %v, want ErrOwnerDead", err)
	}
	if od.Dead.PID != os.Getpid() || od.Dead.Lease != a.Identity().Lease {
		t.Fatalf("OwnerDeadError names %v, want %v", od.Dead, a.Identity())
	}
	if b.Token() <= aTok {
		t.Fatalf("token %d after the dead holder's %d", b.Token(), aTok)
	}
	info, err := Inspect(context.Background(), cli, p)
	if err != nil || info.State != StateRepairing {
		t.Fatalf("Inspect: %+v, %v; want %q", info, err, StateRepairing)
	}
	b.Unlock() // without MarkConsistent
	// Persistent: a fresh client and Mutex see it too.
	c := newMutex(t, newClient(t, endpoints), p)
	if err := lockCtx(t, c); !errors.Is(err, lockword.ErrNotRecoverable) {
		t.Fatalf("lock after an unrepaired unlock: %v, want ErrNotRecoverable", err)
	}
	if c.TryLock() {
		t.Fatal("TryLock took a not-recoverable lock")
	}
	if info, err := Inspect(context.Background(), cli, p); err != nil || info.State != StateNotRecoverable || len(info.Waiters) != 0 {
		t.Fatalf("Inspect: %+v, %v; want %q, no waiters", info, err, StateNotRecoverable)
	}
	// Reinitialize is the way back, for every process.
	if err := c.Reinitialize(); err != nil {
		t.Fatalf("Reinitialize of a not-recoverable lock: %v", err)
	}
	if err := lockCtx(t, b); err != nil {
		t.Fatalf("lock after Reinitialize: %v", err)
	}
	b.Unlock()
}

func TestMutexOwnerDeadRepaired(t *testing.T) {
	cli, p := parallelClient(t)
	a := newDyingMutex(t, cli, p)
	if err := lockCtx(t, a); err != nil {
		t.Fatal(err)
	}
	die(a)
	b := newMutex(t, cli, p)
	if err := lockCtx(t, b); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("got %v, want ErrOwnerDead", err)
	}
	if err := b.MarkConsistent(); err != nil {
		t.Fatal(err)
	}
	b.Unlock()
	if err := lockCtx(t, b); err != nil {
		t.Fatalf("lock after a repair: %v", err)
	}
	b.Unlock()
	// Lock (sync.Locker) runs the repair function.
	c := newDyingMutex(t, cli, p)
	if err := lockCtx(t, c); err != nil {
		t.Fatal(err)
	}
	die(c)
	repaired := false
	b.SetRepair(func() error { repaired = true; return nil })
	b.Lock()
	if !repaired {
		t.Fatal("Lock took the lock from a dead holder without running the repair function")
	}
	b.Unlock()
	if err := lockCtx(t, b); err != nil {
		t.Fatalf("lock after Lock's repair: %v", err)
	}
	b.Unlock()
}

// TestMutexFencing: a holder "paused" past its lease (its keep-alive
// stops, the process goes on believing it holds) must not be able to
// write once a successor holds, and its token is lower.
func TestMutexFencing(t *testing.T) {
	cli, p := parallelClient(t)
	a := newDyingMutex(t, cli, p)
	if err := lockCtx(t, a); err != nil {
		t.Fatal(err)
	}
	// Stop keeping the lease alive without telling a: a pause.
	a.sess.stop()
	b := newMutex(t, cli, p)
	if err := lockCtx(t, b); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("got %v, want ErrOwnerDead", err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("successor's token %d not above %d", b.Token(), a.Token())
	}
	ctx := context.Background()
	if err := a.Put(ctx, p+"-data", "late"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("late guarded write: %v, want ErrNotHolder", err)
	}
	if err := a.MarkConsistentContext(ctx); err != nil && !errors.Is(err, ErrNotHolder) {
		t.Fatal(err)
	}
	if err := a.UnlockContext(ctx); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("late Unlock: %v, want ErrNotHolder", err)
	}
	if err := b.Put(ctx, p+"-data", "b"); err != nil {
		t.Fatal(err)
	}
	if r, _ := cli.Get(ctx, p+"-data"); len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "b" {
		t.Fatalf("data %v, want b", r.Kvs)
	}
	// The late unlock did not disturb the successor's record.
	if info, err := Inspect(ctx, cli, p); err != nil || info.State != StateRepairing || info.Token != b.Token() {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}
	if err := b.MarkConsistent(); err != nil {
		t.Fatal(err)
	}
	b.Unlock()
}

// TestMutexLost: a lease revoked from outside (as etcd does when it
// expires) closes Lost, and the Mutex refuses to lock again.
func TestMutexLost(t *testing.T) {
	t.Parallel()
	cli := newClient(t, endpoints)
	m := newMutex(t, cli, prefix(t))
	if _, err := cli.Revoke(context.Background(), clientv3.LeaseID(m.Identity().Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
	case <-time.After(lockTimeout):
		t.Fatal("Lost not closed after the lease was revoked")
	}
	if err := lockCtx(t, m); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("lock with a lost lease: %v, want ErrLeaseLost", err)
	}
}

func TestMutexContextAndInspect(t *testing.T) {
	cli, p := parallelClient(t)
	a, b := newMutex(t, cli, p), newMutex(t, cli, p)
	if err := lockCtx(t, a); err != nil {
		t.Fatal(err)
	}
	// The waiter gives up once Inspect has seen it: a deadline fixed
	// before the call (300 ms, once) can pass first on a loaded host.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.LockContext(ctx) }()
	info := waitOneWaiter(t, cli, p, 10*time.Millisecond, "the waiter never showed in Inspect")
	if info.State != StateHeld || info.Holder.Lease != a.Identity().Lease || info.Token != a.Token() ||
		info.Waiters[0].Lease != b.Identity().Lease || info.LeaseTTL < 0 || info.LeaseGranted != a.TTL() {
		t.Fatalf("Inspect: %+v", info)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext cancelled: %v", err)
	}
	b.waitIdle() // the clean-up of a call whose context ended runs in the background
	if info, err := Inspect(context.Background(), cli, p); err != nil || len(info.Waiters) != 0 {
		t.Fatalf("the abandoned waiter's key is left: %+v, %v", info, err)
	}
	a.Unlock()
	if info, err := Inspect(context.Background(), cli, p); err != nil || info.State != StateFree {
		t.Fatalf("Inspect after Unlock: %+v, %v", info, err)
	}
	if err := lockCtx(t, b); err != nil {
		t.Fatalf("the waiter that gave up cannot lock: %v", err)
	}
	b.Unlock()
	if err := b.LockContext(nil); !errors.Is(err, lockword.ErrNilContext) { //nolint:staticcheck // the point
		t.Fatalf("nil context: %v", err)
	}
}

func TestMutexStuckReport(t *testing.T) {
	cli, p := parallelClient(t)
	var buf locktest.SyncBuffer
	a := newMutex(t, cli, p)
	b, err := NewMutex(context.Background(), cli, p, &Options{TTL: liveTTL, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.SetStuckThreshold(100 * time.Millisecond)
	b.SetName("orders-writer")
	if err := lockCtx(t, a); err != nil {
		t.Fatal(err)
	}
	// The waiter gives up once its report is logged: the report's look
	// at the holder runs under the waiter's context, and a deadline fixed
	// before the call (400 ms, once) cut it short on a loaded host.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.LockContext(ctx) }()
	for deadline := time.Now().Add(lockTimeout); !strings.Contains(buf.String(), "stuck threshold") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	a.Unlock()
	out := buf.String()
	for _, want := range []string{"stuck threshold", p, "name=orders-writer", fmt.Sprintf("holder_pid=%d", os.Getpid()), "holder_lease=" + leaseText(a.Identity().Lease), "held_for="} {
		if !strings.Contains(out, want) {
			t.Fatalf("stuck report %q lacks %q", out, want)
		}
	}
}

// TestMutexUnreachable: with etcd unreachable every call returns an
// error when its context ends; none hangs or panics.
func TestMutexUnreachable(t *testing.T) {
	t.Parallel()
	cli := newClient(t, []string{"127.0.0.1:1"}) // nothing listens on port 1
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := NewMutex(ctx, cli, "/x", nil)
	if err == nil {
		t.Fatal("NewMutex with etcd unreachable succeeded")
	}
	// The error says where it asked: the client's own says only that the
	// context ended.
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("NewMutex with etcd unreachable: %q, want the context's error naming the endpoint", err)
	}
}

// Crash points: a child process (this test binary) stops at one step of
// Lock, Unlock or MarkConsistent and is SIGKILLed there; the next
// acquirer must read the state it left correctly.
type crashCase struct {
	step  string
	setup string // "": free lock; "held": the parent holds it (child queues); "dead": its holder died
	want  error  // what the next acquirer gets: nil, ErrOwnerDead, ErrNotRecoverable
}

func TestMutexCrashPoints(t *testing.T) {
	for _, c := range []crashCase{
		{"lock-queued", "held", nil},
		{"lock-held", "", lockword.ErrOwnerDead},
		{"lock-held", "held", lockword.ErrOwnerDead},
		{"unlock-before", "", lockword.ErrOwnerDead},
		{"unlock-after", "", nil},
		{"mark-before", "dead", lockword.ErrOwnerDead},
		{"mark-after", "dead", lockword.ErrOwnerDead},
		{"unlock-after", "dead-unmarked", lockword.ErrNotRecoverable},
	} {
		t.Run(c.step+"/"+c.setup, func(t *testing.T) {
			t.Parallel()
			if err := crashAt(t, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMutexCrashPointsCheckerFails: with a lock broken on purpose (a claim
// that takes a dead holder's record as free), the crash-point check of a
// holder killed holding must fail.
func TestMutexCrashPointsCheckerFails(t *testing.T) {
	testIgnoreDeadOwner.Store(true) // the next acquirer, in this process, is the broken one
	defer testIgnoreDeadOwner.Store(false)
	if err := crashAt(t, crashCase{"lock-held", "", lockword.ErrOwnerDead}); err == nil {
		t.Fatal("the crash-point check passed a lock that does not report owner death")
	}
}

// crashAt runs one crash case and returns what is wrong with the next
// acquirer's result.
func crashAt(t *testing.T, c crashCase) error {
	cli := newClient(t, endpoints)
	p := prefix(t)
	var first *Mutex
	switch c.setup {
	case "held":
		first = newMutex(t, cli, p)
		if err := lockCtx(t, first); err != nil {
			t.Fatal(err)
		}
	case "dead", "dead-unmarked":
		d := newDyingMutex(t, cli, p)
		if err := lockCtx(t, d); err != nil {
			t.Fatal(err)
		}
		die(d)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+c.step+","+p+","+c.setup, endpointsEnv+"="+strings.Join(endpoints, ","))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	at := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "AT ") {
				at <- s.Text()
				return
			}
		}
		close(at)
	}()
	if first != nil {
		// Let the child queue behind us, then step aside.
		waitOneWaiter(t, cli, p, 5*time.Millisecond, "the child never queued")
		if c.step != "lock-queued" {
			first.Unlock()
		}
	}
	select {
	case s, ok := <-at:
		if !ok || s != "AT "+c.step {
			t.Fatalf("child: %q, stderr %s", s, stderr.String())
		}
	case <-time.After(lockTimeout):
		t.Fatalf("child never reached %s; stderr %s", c.step, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if c.step == "lock-queued" {
		first.Unlock()
	}
	next := newMutex(t, cli, p)
	err = lockCtx(t, next)
	if err == nil || errors.Is(err, lockword.ErrOwnerDead) {
		defer next.Unlock()
		defer next.MarkConsistent()
	}
	if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
		return fmt.Errorf("next acquirer after a kill at %s: %v, want %v", c.step, err, c.want)
	}
	return nil
}

// crashChild runs in the child process of TestMutexCrashPoints: it locks
// (and, per step, unlocks or marks consistent), stopping for ever at step.
func crashChild(spec string) int {
	f := strings.SplitN(spec, ",", 3)
	step, p, setup := f[0], f[1], f[2]
	testHook = func(s string) {
		if s == step {
			fmt.Println("AT " + s)
			select {} // wait for the SIGKILL
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv(endpointsEnv), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	m, err := NewMutex(ctx, cli, p, &Options{TTL: testTTL})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = m.LockContext(ctx)
	if errors.Is(err, lockword.ErrOwnerDead) && setup == "dead" {
		err = m.MarkConsistent()
	} else if errors.Is(err, lockword.ErrOwnerDead) && setup == "dead-unmarked" {
		err = nil
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	m.Unlock()
	fmt.Fprintln(os.Stderr, "child: finished without reaching", step)
	return 1
}

// TestDependencies: the package needs etcd's client only; the embedded
// server (internal/etcdembed, and etcdtest on it) is for tests and the
// lockword command.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "go.etcd.io/etcd/server/") || strings.HasPrefix(p, "go.etcd.io/raft/") || p == "github.com/lockword/lockword/internal/etcdembed" || p == "github.com/lockword/lockword/etcdlock/etcdtest" {
			t.Errorf("etcdlock depends on %s", p)
		}
	}
}
