package torture

// The delayed endpoint of -chaos runs: a TCP forwarder on loopback in
// front of one etcd member that delivers every chunk of bytes a fixed
// delay after reading it, in order (a slow link). A client given both the
// member and this forwarder sends some requests through each, so that a
// request can land after a later one, and after its caller gave up.

import (
	"net"
	"sync"
	"time"
)

type delayLink struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu    sync.Mutex
	conns []net.Conn
}

// startDelayLink listens on a free loopback port and forwards to target.
func startDelayLink(target string, delay time.Duration) (*delayLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &delayLink{ln: ln, target: target, delay: delay}
	go d.serve()
	return d, nil
}

func (d *delayLink) addr() string { return d.ln.Addr().String() }

func (d *delayLink) serve() {
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", d.target)
		if err != nil {
			c.Close() // the member is stopped: the client fails over
			continue
		}
		d.mu.Lock()
		d.conns = append(d.conns, c, s)
		d.mu.Unlock()
		go d.pipe(s, c)
		go d.pipe(c, s)
	}
}

// pipe copies src to dst, each chunk delivered d.delay after it was read.
func (d *delayLink) pipe(dst, src net.Conn) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	ch := make(chan chunk, 4096)
	go func() {
		for c := range ch {
			time.Sleep(time.Until(c.at))
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
			ch <- chunk{time.Now().Add(d.delay), append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			close(ch)
			return
		}
	}
}

// close stops listening and cuts every connection.
func (d *delayLink) close() {
	d.ln.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
}
