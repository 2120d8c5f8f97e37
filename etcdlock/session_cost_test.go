package etcdlock

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/etcdlock/etcdtest"
)

// serveEnv makes the test binary a server process for
// TestSessionKeepAliveCost: it prints the endpoint and serves until its
// stdin closes, so that the server's CPU time is its own.
const serveEnv = "ETCDLOCK_TEST_SERVE"

func serveChild() int {
	c, err := etcdtest.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	defer c.Close()
	fmt.Println(c.Endpoints()[0])
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes it
	return 0
}

// cpuTicks returns the user+system time of process pid in clock ticks
// (/proc/PID/stat fields 14 and 15; 100 per second on Linux).
func cpuTicks(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:])) // after "(comm) "
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// TestSessionKeepAliveCost (LOCKWORD_LONG=1, Linux; about a minute)
// measures what 100 locks held by one process cost at rest: on one
// Session against a lease each (TTL 5 s: the client sends each lease's
// keep-alive every third of it), the bytes through a proxy in front of the
// server and the server process's CPU time, each over a 20 s window, with
// an idle window for the baseline (ETCDLOCK_COST_LOCKS=N holds N locks
// instead). It requires the Session to send less
// than a tenth of the per-lease bytes (it sends one keep-alive for all);
// the CPU figures are reported only (a loaded host makes them noisy).
func TestSessionKeepAliveCost(t *testing.T) {
	if os.Getenv("LOCKWORD_LONG") != "1" || runtime.GOOS != "linux" {
		t.Skip("a one-minute measurement: LOCKWORD_LONG=1, Linux")
	}
	const window = 20 * time.Second
	locks := 100
	if n, err := strconv.Atoi(os.Getenv("ETCDLOCK_COST_LOCKS")); err == nil && n > 0 {
		locks = n // a bigger figure for BENCHMARKS.md
	}
	srv := exec.Command(os.Args[0], "-test.run=^$")
	srv.Env = append(os.Environ(), serveEnv+"=1")
	stdin, err := srv.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); srv.Wait() }()
	ep, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	px := etcdtest.NewProxy(t, strings.TrimSpace(ep))
	cli := newClient(t, []string{px.Addr()})
	ctx := context.Background()

	type result struct{ bytesPerSec, cpuPct float64 }
	measure := func() result {
		time.Sleep(2 * time.Second) // past the set-up's requests
		s0, r0 := px.Bytes()
		c0, t0 := cpuTicks(t, srv.Process.Pid), time.Now()
		time.Sleep(window)
		s1, r1 := px.Bytes()
		c1, el := cpuTicks(t, srv.Process.Pid), time.Since(t0).Seconds()
		return result{float64(s1-s0+r1-r0) / el, float64(c1-c0) / el} // 100 ticks/s: ticks/s is % of a core
	}
	hold := func(opts func() *Options) (release func()) {
		var ms []*Mutex
		for i := range locks {
			m, err := NewMutex(ctx, cli, fmt.Sprintf("%s/%d", prefix(t), i), opts())
			if err != nil {
				t.Fatal(err)
			}
			if err := lockCtx(t, m); err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		return func() {
			for _, m := range ms {
				m.Unlock()
				m.Close()
			}
		}
	}
	idle := measure()
	release := hold(func() *Options { return &Options{TTL: DefaultTTL} })
	perLease := measure()
	release()
	s, err := NewSession(ctx, cli, &SessionOptions{TTL: DefaultTTL})
	if err != nil {
		t.Fatal(err)
	}
	release = hold(func() *Options { return &Options{Session: s} })
	session := measure()
	release()
	s.Close()
	for _, r := range []struct {
		name string
		r    result
	}{{"idle (no lease)", idle}, {fmt.Sprintf("%d locks, a lease each", locks), perLease}, {fmt.Sprintf("%d locks, one Session", locks), session}} {
		t.Logf("%-25s %8.0f bytes/s through the proxy, server CPU %5.1f%% of a core", r.name, r.r.bytesPerSec, r.r.cpuPct)
	}
	if session.bytesPerSec*10 > perLease.bytesPerSec {
		t.Errorf("one Session sent %.0f bytes/s, a lease each %.0f: want less than a tenth", session.bytesPerSec, perLease.bytesPerSec)
	}
}
