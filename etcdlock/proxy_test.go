package etcdlock

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A proxy is a TCP forwarder on loopback in front of one etcd endpoint: a
// slow or failing member as its clients see it. Every chunk of bytes is
// delivered delay after it was read, in order (a slow link, not a slow
// reader); dropReplies discards what the server sends (the requests still
// land: lost responses); blackhole discards both directions (a partition
// that keeps the connections open, so requests hang). Bytes dropped
// mid-stream break the HTTP/2 framing, so heal cuts every connection:
// the client reconnects.
type proxy struct {
	ln          net.Listener
	target      string
	delay       atomic.Int64 // ns
	dropReplies atomic.Bool
	blackhole   atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		d, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, d)
		p.mu.Unlock()
		go p.pipe(d, c, false)
		go p.pipe(c, d, true)
	}
}

// pipe copies src to dst, each chunk delivered delay after it was read.
func (p *proxy) pipe(dst, src net.Conn, reply bool) {
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
		}
		dst.Close()
		for range ch {
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ch <- chunk{time.Now().Add(time.Duration(p.delay.Load())), append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			close(ch)
			return
		}
	}
}

// cut closes every connection through p: a lost connection.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// heal delivers everything again and cuts the connections that lost bytes.
func (p *proxy) heal() {
	p.blackhole.Store(false)
	p.dropReplies.Store(false)
	p.cut()
}
