package etcdtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestProxy: a request through a Proxy with a delay takes at least the
// delay each way (a lower bound, which load cannot break), one through a
// blackholed Proxy does not return before its deadline, and after Heal
// requests pass again; Bytes counts both directions.
func TestProxy(t *testing.T) {
	c := Start(t)
	p := NewProxy(t, c.Endpoints()[0])
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := cli.Get(ctx, "/k")
		return err
	}
	if err := get(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	const delay = 100 * time.Millisecond
	p.SetDelay(delay)
	start := time.Now()
	if err := get(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 2*delay {
		t.Errorf("a request through a %v delay took %v, want at least %v", delay, took, 2*delay)
	}
	p.SetDelay(0)
	p.Blackhole(true)
	if err := get(300 * time.Millisecond); err == nil {
		t.Error("a request through a blackholed proxy succeeded")
	}
	p.Heal()
	if err := get(20 * time.Second); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
	if sent, recvd := p.Bytes(); sent == 0 || recvd == 0 {
		t.Errorf("Bytes = %d sent, %d received, want both counted", sent, recvd)
	}
}

// TestDocExample: docs/etcd.md shows example_test.go verbatim, so that
// the test users copy is one that compiles and passes.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/etcd.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```go\n"+string(src)+"```\n") {
		t.Error("docs/etcd.md does not show etcdlock/etcdtest/example_test.go verbatim in a ```go block")
	}
}
