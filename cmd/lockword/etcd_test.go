package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdStartWait bounds a server's start: members wait for each other,
// which takes seconds on a loaded host; 60 s is far beyond it.
const etcdStartWait = 60 * time.Second

// readEtcdBanner reads serve's first lines from r: the endpoints and the
// data directory.
func readEtcdBanner(t *testing.T, r io.Reader) (eps []string, dir string) {
	t.Helper()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(etcdStartWait)
	for eps == nil || dir == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve ended before printing its endpoints and data directory")
			}
			if v, ok := strings.CutPrefix(l, "endpoints: "); ok {
				eps = strings.Split(v, ",")
			}
			if v, ok := strings.CutPrefix(l, "data: "); ok {
				dir, _, _ = strings.Cut(v, " ")
			}
		case <-timeout:
			t.Fatalf("no endpoints printed within %v", etcdStartWait)
		}
	}
	go func() {
		for range lines { // the rest, so that serve's writes do not block
		}
	}()
	return eps, dir
}

// putGet checks that the etcd at eps serves a write (unless put is "")
// and a read of want.
func putGet(t *testing.T, eps []string, put, want string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if put != "" {
		if _, err := cli.Put(ctx, "/lockword-etcd-test", put); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := cli.Get(ctx, "/lockword-etcd-test"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != want {
		t.Fatalf("read back: %v %v, want %q", r, err, want)
	}
}

// serveUntil runs serve with f until the returned stop is called, which
// returns serve's status; eps and dir are what it printed.
func serveUntil(t *testing.T, f etcdFlags) (eps []string, dir string, stop func() int) {
	t.Helper()
	pr, pw := io.Pipe()
	stopc := make(chan struct{})
	status := make(chan int, 1)
	go func() {
		status <- serveEtcd(f, stopc, pw, io.Discard)
		pw.Close()
	}()
	eps, dir = readEtcdBanner(t, pr)
	return eps, dir, func() int { close(stopc); return <-status }
}

// TestEtcdServe: serve prints endpoints that serve etcd requests, and on
// stop removes its data directory, or keeps the one -data named, which a
// later serve serves again; with -members 3 every member is listed.
func TestEtcdServe(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    etcdFlags
	}{
		{"temporary/3 members", etcdFlags{members: 3}},
		{"kept", etcdFlags{members: 1, data: filepath.Join(t.TempDir(), "data")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eps, dir, stop := serveUntil(t, tc.f)
			if len(eps) != tc.f.members {
				t.Errorf("%d endpoints printed, want %d", len(eps), tc.f.members)
			}
			putGet(t, eps, "ok", "ok")
			if s := stop(); s != exitOK {
				t.Fatalf("serve returned %d after stop, want 0", s)
			}
			_, err := os.Stat(dir)
			if kept := err == nil; kept != (tc.f.data != "") {
				t.Fatalf("data directory %s after stop: %v; -data %q", dir, err, tc.f.data)
			}
			if tc.f.data != "" {
				// Served again from the kept directory (on new free
				// ports): the data is there.
				eps, _, stop := serveUntil(t, tc.f)
				putGet(t, eps, "", "ok")
				stop()
			}
		})
	}
}

// clusterData returns a directory that looks like a kept cluster's data
// (-data DIR of a -members 3 run).
func clusterData(t *testing.T) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "m0", "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestEtcdBinaryInterrupt: the built command serves until SIGINT, then
// exits 0 and leaves no data directory.
func TestEtcdBinaryInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := clitest.BuildLockword(t)
	cmd := exec.Command(bin, "etcd")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	eps, dir := readEtcdBanner(t, out)
	putGet(t, eps, "ok", "ok")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lockword etcd after SIGINT: %v, want exit status 0", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data directory %s after SIGINT: %v, want it removed", dir, err)
	}
}
