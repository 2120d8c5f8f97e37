// Package etcdembed starts etcd servers inside the calling process, on
// loopback ports, with their data in a temporary directory: a single node
// for `lockword torture -lock etcd` without -etcd, and the clusters the
// etcdlock tests and the torture's cluster run need, the server of
// `lockword etcd`, and a Proxy that slows or cuts one endpoint's traffic.
// Package etcdtest is its face for tests, in and outside lockword; the
// etcdlock package itself needs only the client.
//
// The servers run with short raft ticks (so that the smallest lease TTL the
// server grants is 1 s, and a re-election takes a fraction of a second)
// and without fsync: their data lives only as long as the run (a kept
// Config.Dir survives a clean stop, not a power loss), and a
// "killed" member here is a stopped server, whose writes the page cache
// keeps, not a machine that lost power.
package etcdembed

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startTimeout bounds how long a member may take to become ready.
const startTimeout = 30 * time.Second

// Raft timing of the embedded servers: with a 10 ms tick and a 100 ms
// election timeout the server's minimum lease TTL,
// ceil(1.5 × election timeout), is 1 s. A cluster's members use slower
// ticks, so that a loaded host does not start spurious elections.
const (
	singleTickMs, singleElectionMs   = 10, 100
	clusterTickMs, clusterElectionMs = 50, 500
)

// A Cluster is a set of embedded etcd members in one process.
type Cluster struct {
	dir      string
	keep     bool       // dir was given: Close leaves it
	mu       sync.Mutex // guards members[i].etcd: Stop may run while Leader is asked
	members  []*member
	stopping sync.WaitGroup // Stops in progress
}

type member struct {
	name      string
	clientURL string
	cfg       *embed.Config
	etcd      *embed.Etcd // nil once stopped
}

// Config says what StartConfig starts.
type Config struct {
	// Members is the number of members, at least 1.
	Members int
	// Dir holds the members' data and is kept by Close; "" means a new
	// temporary directory, which Close removes.
	Dir string
	// ClientPort and PeerPort are member 0's loopback ports; member i
	// uses ClientPort+i and PeerPort+i. 0 means free ports.
	ClientPort, PeerPort int
}

// Start starts an n-member cluster (n ≥ 1) on free 127.0.0.1 ports, with
// its data in a new temporary directory, and waits until every member is
// ready. Close stops it and removes the directory.
func Start(n int) (*Cluster, error) { return StartConfig(Config{Members: n}) }

// StartConfig starts the cluster cfg describes and waits until every
// member is ready. It refuses overlapping client and peer port ranges.
func StartConfig(cfg Config) (*Cluster, error) {
	n := cfg.Members
	if n < 1 {
		return nil, fmt.Errorf("etcdembed: a cluster needs at least one member, got %d", n)
	}
	if cfg.ClientPort != 0 && cfg.PeerPort != 0 && cfg.ClientPort < cfg.PeerPort+n && cfg.PeerPort < cfg.ClientPort+n {
		return nil, fmt.Errorf("etcdembed: client ports %d-%d overlap peer ports %d-%d", cfg.ClientPort, cfg.ClientPort+n-1, cfg.PeerPort, cfg.PeerPort+n-1)
	}
	tries := 1
	if (cfg.ClientPort == 0 || cfg.PeerPort == 0) && cfg.Dir == "" {
		// A port found free may be taken before the server binds it:
		// try again with fresh ports a few times (not on kept data,
		// which a failed start may have changed).
		tries = 5
	}
	var err error
	for range tries {
		var c *Cluster
		if c, err = start(cfg); err == nil {
			return c, nil
		}
	}
	return nil, err
}

func start(want Config) (*Cluster, error) {
	n := want.Members
	dir, keep := want.Dir, want.Dir != ""
	if keep {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	} else {
		var err error
		if dir, err = os.MkdirTemp("", "lockword-etcd-"); err != nil {
			return nil, err
		}
	}
	c := &Cluster{dir: dir, keep: keep}
	ports, err := freePorts(2 * n)
	if err != nil {
		c.removeDir()
		return nil, err
	}
	for i := range n {
		if want.ClientPort != 0 {
			ports[2*i] = want.ClientPort + i
		}
		if want.PeerPort != 0 {
			ports[2*i+1] = want.PeerPort + i
		}
	}
	var initial []string
	for i := range n {
		m := &member{name: fmt.Sprintf("m%d", i), clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])}
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		initial = append(initial, m.name+"="+peer)
		cfg := embed.NewConfig()
		cfg.Name = m.name
		cfg.Dir = fmt.Sprintf("%s/%s", dir, m.name)
		cu, pu := mustURL(m.clientURL), mustURL(peer)
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.TickMs, cfg.ElectionMs = singleTickMs, singleElectionMs
		if n > 1 {
			cfg.TickMs, cfg.ElectionMs = clusterTickMs, clusterElectionMs
		}
		cfg.UnsafeNoFsync = true
		cfg.LogLevel = "error"
		cfg.LogOutputs = []string{"/dev/null"}
		cfg.InitialClusterToken = fmt.Sprintf("lockword-%d", ports[0])
		m.cfg = cfg
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
	}
	// Members of a new cluster wait for each other: start them all, then
	// wait for each.
	for _, m := range c.members {
		if m.etcd, err = embed.StartEtcd(m.cfg); err != nil {
			c.Close()
			return nil, fmt.Errorf("etcdembed: starting member %s: %w", m.name, err)
		}
	}
	for _, m := range c.members {
		select {
		case <-m.etcd.Server.ReadyNotify():
		case err := <-m.etcd.Err():
			c.Close()
			return nil, fmt.Errorf("etcdembed: member %s failed: %w", m.name, err)
		case <-time.After(startTimeout):
			c.Close()
			return nil, fmt.Errorf("etcdembed: member %s not ready within %v", m.name, startTimeout)
		}
	}
	return c, nil
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err) // our own literal
	}
	return *u
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// Endpoints lists the client addresses (host:port) of the members still
// running.
func (c *Cluster) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var eps []string
	for _, m := range c.members {
		if m.etcd != nil {
			eps = append(eps, strings.TrimPrefix(m.clientURL, "http://"))
		}
	}
	return eps
}

// Leader returns the index of the member that is the raft leader now, or
// -1 if the running members know of none.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.etcd == nil {
			continue
		}
		lead := m.etcd.Server.Leader()
		for j, o := range c.members {
			if o.etcd != nil && o.etcd.Server.MemberID() == lead {
				return j
			}
		}
	}
	return -1
}

// Stop stops member i at once, as if its machine had gone away: raft
// stops without handing on the leadership (HardStop), then its listeners
// close, breaking its clients' connections; the others elect a new leader
// if it led.
func (c *Cluster) Stop(i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.members) || c.members[i].etcd == nil {
		c.mu.Unlock()
		return errors.New("etcdembed: no such running member")
	}
	e := c.members[i].etcd
	c.members[i].etcd = nil
	c.stopping.Add(1)
	c.mu.Unlock()
	defer c.stopping.Done()
	e.Server.HardStop()
	e.Close()
	return nil
}

// Restart starts member i again after Stop, with its data and ports, and
// waits until it is ready: it has rejoined, which needs a quorum of the
// members running with it.
func (c *Cluster) Restart(i int) error {
	c.stopping.Wait() // a Stop still closing its listeners
	c.mu.Lock()
	if i < 0 || i >= len(c.members) || c.members[i].etcd != nil {
		c.mu.Unlock()
		return errors.New("etcdembed: no such stopped member")
	}
	m := c.members[i]
	c.mu.Unlock()
	e, err := embed.StartEtcd(m.cfg)
	if err != nil {
		return fmt.Errorf("etcdembed: restarting member %s: %w", m.name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdembed: member %s failed: %w", m.name, err)
	case <-time.After(startTimeout):
		e.Close()
		return fmt.Errorf("etcdembed: member %s not ready within %v", m.name, startTimeout)
	}
	c.mu.Lock()
	m.etcd = e
	c.mu.Unlock()
	return nil
}

// Close stops every member and removes the data directory.
func (c *Cluster) Close() error {
	c.mu.Lock()
	var running []*embed.Etcd
	for _, m := range c.members {
		if m.etcd != nil {
			running = append(running, m.etcd)
			m.etcd = nil
		}
	}
	c.mu.Unlock()
	for _, e := range running {
		e.Close()
	}
	c.stopping.Wait() // a Stop still closing its member
	return c.removeDir()
}

// HasData reports whether dir holds the data of a cluster started with
// Config.Dir = dir.
func HasData(dir string) bool {
	_, err := os.Stat(fmt.Sprintf("%s/m0/member", dir))
	return err == nil
}

// Dir returns the directory that holds the members' data.
func (c *Cluster) Dir() string { return c.dir }

func (c *Cluster) removeDir() error {
	if c.keep {
		return nil
	}
	return os.RemoveAll(c.dir)
}
