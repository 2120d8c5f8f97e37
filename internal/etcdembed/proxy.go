package etcdembed

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A Proxy is a TCP forwarder on loopback in front of one etcd endpoint: a
// slow or failing member as its clients see it. Every chunk of bytes is
// delivered the delay after it was read, in order (a slow link, not a slow
// reader); DropReplies discards what the server sends (the requests still
// land: lost responses); Blackhole discards both directions (a partition
// that keeps the connections open, so requests hang). Bytes dropped
// mid-stream break the HTTP/2 framing, so Heal cuts every connection: the
// client reconnects. It counts the bytes it delivers each way.
type Proxy struct {
	ln          net.Listener
	target      string
	delayNs     atomic.Int64
	dropReplies atomic.Bool
	blackhole   atomic.Bool
	sent, recvd atomic.Int64 // bytes delivered to the server, to the client

	mu    sync.Mutex
	conns []net.Conn
}

// NewProxy listens on a free 127.0.0.1 port and forwards each connection
// to target (host:port). Close stops it.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target}
	go p.serve()
	return p, nil
}

// Addr is the address (host:port) clients dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay delays every chunk read from then on by d, each way.
func (p *Proxy) SetDelay(d time.Duration) { p.delayNs.Store(int64(d)) }

// DropReplies makes p discard (on) or deliver (off) what the server sends.
func (p *Proxy) DropReplies(on bool) { p.dropReplies.Store(on) }

// Blackhole makes p discard (on) or deliver (off) both directions.
func (p *Proxy) Blackhole(on bool) { p.blackhole.Store(on) }

// Bytes returns the bytes p delivered so far: to the server (sent) and to
// its clients (received).
func (p *Proxy) Bytes() (sent, received int64) { return p.sent.Load(), p.recvd.Load() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close() // the member is stopped: the client fails over
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(s, c, &p.sent, false)
		go p.pipe(c, s, &p.recvd, true)
	}
}

// pipe copies src to dst, each chunk delivered the delay after it was
// read, counting what it delivers in n.
func (p *Proxy) pipe(dst, src net.Conn, n *atomic.Int64, reply bool) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	ch := make(chan chunk, 4096)
	go func() {
		for c := range ch {
			if w := time.Until(c.at); w > 0 {
				time.Sleep(w)
			}
			if p.blackhole.Load() || reply && p.dropReplies.Load() {
				continue
			}
			if _, err := dst.Write(c.b); err != nil {
				break
			}
			n.Add(int64(len(c.b)))
		}
		dst.Close()
		for range ch {
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			ch <- chunk{time.Now().Add(time.Duration(p.delayNs.Load())), append([]byte(nil), buf[:k]...)}
		}
		if err != nil {
			close(ch)
			return
		}
	}
}

// Cut closes every connection through p: a lost connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Heal delivers everything again and cuts the connections that lost bytes.
func (p *Proxy) Heal() {
	p.blackhole.Store(false)
	p.dropReplies.Store(false)
	p.Cut()
}

// Close stops listening and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
}
