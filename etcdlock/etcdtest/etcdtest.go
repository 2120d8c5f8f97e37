// Package etcdtest starts real etcd servers for tests: one member, or a
// cluster of three, embedded in the test process (etcd's server/v3/embed)
// on free 127.0.0.1 ports, with their data in a temporary directory, and
// a ready client. Nothing is installed or left behind:
//
//	func TestOrders(t *testing.T) {
//		c := etcdtest.Start(t) // stopped and removed when the test ends
//		mu, err := etcdlock.NewMutex(ctx, c.Client(), "/locks/orders", nil)
//		...
//	}
//
// The servers tick fast (a 10 ms raft tick on one member, so the shortest
// lease TTL the server grants is 1 s and owner-death tests are quick;
// 50 ms on three members, so a loaded host does not start spurious
// elections) and do not fsync: a member's data lives as long as the test.
// Stop and Restart take a member away and back (a crashed machine, a
// lost quorum); a Proxy slows, cuts or partitions one endpoint's traffic.
//
// A test binary that imports this package links the etcd server; the
// etcdlock package itself needs only the client.
package etcdtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/etcdembed"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// An Option configures Start and New.
type Option func(*options)

type options struct{ members int }

// Members makes Start and New start a cluster of n members (1 by default;
// 3 tolerates the loss of one).
func Members(n int) Option { return func(o *options) { o.members = n } }

// A Cluster is a running set of embedded etcd members and a client that
// reaches all of them.
type Cluster struct {
	c   *etcdembed.Cluster
	cli *clientv3.Client
}

// Start starts a cluster (one member unless Members says otherwise), waits
// until it is ready and registers its Close with t.Cleanup; it fails t
// (t.Fatal) if the cluster does not start within 30 s.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// New is Start for a caller without a testing.TB (a TestMain that shares
// one server among its tests): the caller must Close the cluster. It
// returns an error if the cluster does not start within 30 s.
func New(opts ...Option) (*Cluster, error) {
	o := options{members: 1}
	for _, opt := range opts {
		opt(&o)
	}
	ec, err := etcdembed.Start(o.members)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		ec.Close()
		return nil, fmt.Errorf("etcdtest: a client: %w", err)
	}
	return &Cluster{c: ec, cli: cli}, nil
}

// Client returns a client connected to every member; Close closes it.
func (c *Cluster) Client() *clientv3.Client { return c.cli }

// Endpoints lists the client addresses (host:port) of the members still
// running, in member order.
func (c *Cluster) Endpoints() []string { return c.c.Endpoints() }

// Leader returns the index of the member that leads now, or -1 if the
// running members know of none (no quorum).
func (c *Cluster) Leader() int { return c.c.Leader() }

// Stop stops member i at once, as if its machine had gone away: it does
// not hand on the leadership, and its clients' connections break. It
// returns an error if member i is not running.
func (c *Cluster) Stop(i int) error { return c.c.Stop(i) }

// Restart starts member i again after Stop, with its data and ports, and
// waits until it has rejoined (which needs a quorum with it). It returns
// an error if member i is running or does not rejoin within 30 s.
func (c *Cluster) Restart(i int) error { return c.c.Restart(i) }

// Close closes the client, stops every member and removes the data.
func (c *Cluster) Close() error {
	c.cli.Close()
	return c.c.Close()
}

// A Proxy is a TCP forwarder on 127.0.0.1 in front of one endpoint, for
// tests of a slow or failing member: a client given Addr instead of (or
// beside) the endpoint sees its traffic delayed or lost as set. Every
// chunk of bytes is delivered the delay after it was read, in order (a
// slow link); it counts the bytes it delivers each way.
type Proxy struct{ p *etcdembed.Proxy }

// NewProxy starts a Proxy to endpoint (host:port), closed when the test
// ends; it fails t if it cannot listen.
func NewProxy(t testing.TB, endpoint string) *Proxy {
	t.Helper()
	p, err := etcdembed.NewProxy(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &Proxy{p}
}

// Addr is the address (host:port) to give a client instead of the
// endpoint.
func (p *Proxy) Addr() string { return p.p.Addr() }

// SetDelay delays every chunk read from now on by d, in both directions.
func (p *Proxy) SetDelay(d time.Duration) { p.p.SetDelay(d) }

// DropReplies discards (on) or delivers again (off) what the server
// sends: its requests still land, their replies are lost.
func (p *Proxy) DropReplies(on bool) { p.p.DropReplies(on) }

// Blackhole discards (on) or delivers again (off) both directions, with
// the connections kept open: requests hang, as in a partition.
func (p *Proxy) Blackhole(on bool) { p.p.Blackhole(on) }

// Cut closes every connection through p now (clients reconnect).
func (p *Proxy) Cut() { p.p.Cut() }

// Heal delivers everything again and cuts the connections that lost
// bytes, whose HTTP/2 framing is broken.
func (p *Proxy) Heal() { p.p.Heal() }

// Bytes returns the bytes p delivered so far: to the server (sent) and to
// its clients (received).
func (p *Proxy) Bytes() (sent, received int64) { return p.p.Bytes() }
