package bench

// The shared-queue kind: Grid processes (this binary re-executed, see
// ChildMain) each send fixed-size messages for Params.Duration to this
// process, through an shm MPSC queue or, as the peers, a Unix socket that
// keeps message boundaries, the two a user would pick for many senders
// and one receiver: one SOCK_DGRAM socket that every sender writes to
// (whole messages, no connections; a sender blocks once
// net.unix.max_dgram_qlen datagrams wait, so its figure depends on that
// setting), or a SOCK_SEQPACKET listener with one connection per sender
// (whole messages, bounded by each connection's send buffer instead).
// Two groups, 64 B and 4 KiB messages.
//
// A message is [sender pid u32][pad u32][seq u64][send ns i64][fill...]:
// seq counts from 1 per sender and must arrive in order; one message in
// waitSampleEvery carries its send time (Unix ns, one clock for every
// process), giving the wait per message from Send's call to Receive's
// return; its last byte is byte(seq), a torn-message check. The last
// message of a sender has seq 0 and the count it sent in place of the
// time: the receiver stops once every sender's last message arrived and
// its count matches.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockword/lockword/shm"
)

const (
	sharedQueueName = "bench-mpsc"
	// sharedQueueCapacity is the MPSC queue's record space: 1 MiB, room
	// for about 256 4 KiB messages, near a Unix socket's default buffer
	// (net.core.wmem_default, 208 KiB) times the 4 senders.
	sharedQueueCapacity = 1 << 20
	sharedQueueProcs    = 4 // producer processes, the count
	mpscKind            = "shm.MPSC"
	unixgramKind        = "unix dgram"
	seqpacketKind       = "unix seqpacket"
	msgHeader           = 24 // pid, pad, seq, time
)

// sharedQueueSizes are the message sizes of the groups, in bytes.
var sharedQueueSizes = []int{64, 4096}

func init() {
	Kinds = append(Kinds, Kind{"shared-queue", "shared-queue",
		fmt.Sprintf("shm MPSC queue vs Unix seqpacket and datagram sockets, %d producer processes, 64 B and 4 KiB messages", sharedQueueProcs), true})
	kindSubject["shared-queue"] = mpscKind
}

// sharedQueueGroups are the shared-queue kind's groups, one per size.
func sharedQueueGroups(exe string) []Group {
	var gs []Group
	for _, size := range sharedQueueSizes {
		sub := func(name string, peers []string) Subject {
			return Subject{Name: name, Peers: peers, run: func(ctx context.Context, p Params) (Sample, error) {
				return runSharedQueue(ctx, exe, name, size, p)
			}}
		}
		gs = append(gs, Group{Name: fmt.Sprintf("shared-queue-%dB", size),
			Title: fmt.Sprintf("Cross-process queues, %d B messages, one receiver", size),
			Unit:  "msgs", Axis: "producer processes", Grid: []int{sharedQueueProcs}, Processes: true,
			// The seqpacket socket first: the faster peer, the chart's ratio.
			Subjects: []Subject{sub(unixgramKind, nil), sub(seqpacketKind, nil),
				sub(mpscKind, []string{seqpacketKind, unixgramKind})},
			Notes: []string{dgramNote()}})
	}
	return gs
}

// maxDgramQlenFile holds how many datagrams may wait on a Unix datagram
// socket before its senders block.
const maxDgramQlenFile = "/proc/sys/net/unix/max_dgram_qlen"

// dgramNote says what the datagram socket's figure depends on, with this
// host's setting.
func dgramNote() string {
	qlen := "unknown here"
	if b, err := os.ReadFile(maxDgramQlenFile); err == nil {
		qlen = strings.TrimSpace(string(b)) + " on this host"
	}
	return fmt.Sprintf("unix dgram: a sender blocks once net.unix.max_dgram_qlen datagrams wait (%s), "+
		"so its figure depends on that setting; unix seqpacket: one connection per sender, bounded by its send buffer; "+
		"judge shm.MPSC against the faster socket", qlen)
}

// A queueReceiver is the receiving end of one sample: recv returns the
// next message (in buf's space).
type queueReceiver struct {
	recv  func(ctx context.Context, buf []byte) ([]byte, error)
	close func()
}

// openQueueReceiver is openReceiver, a variable so that tests can break
// the receiving end.
var openQueueReceiver = openReceiver

// openReceiver opens kind's receiving end in dir (a socket) or r; recv
// returns ctx.Err() once ctx is done.
func openReceiver(ctx context.Context, kind, dir string, r *shm.Region) (queueReceiver, error) {
	switch kind {
	case mpscKind:
		c, err := r.MPSCConsumer(sharedQueueName, sharedQueueCapacity)
		if err != nil {
			return queueReceiver{}, err
		}
		return queueReceiver{c.Receive, c.Detach}, nil
	case seqpacketKind:
		return listenSeqpacket(ctx, filepath.Join(dir, "sock"))
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "sock"), Net: "unixgram"})
	if err != nil {
		return queueReceiver{}, err
	}
	// A read deadline is a socket's only cancellation: ctx's end moves
	// it to the past, at no cost per read while ctx lives.
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	return queueReceiver{func(ctx context.Context, buf []byte) ([]byte, error) {
		n, err := conn.Read(buf[:cap(buf)])
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return buf[:n], err
	}, func() { stop(); conn.Close() }}, nil
}

// runSharedQueue measures one queue kind with p.Goroutines producer
// processes of size-byte messages.
func runSharedQueue(ctx context.Context, exe, kind string, size int, p Params) (s Sample, err error) {
	if size < msgHeader {
		return s, fmt.Errorf("%s: message size %d is under the %d-byte header", kind, size, msgHeader)
	}
	dir, err := os.MkdirTemp("", "lockword-bench-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(dir)
	r, err := shm.Create(filepath.Join(dir, "region"), 2*sharedQueueCapacity, nil)
	if err != nil {
		return s, err
	}
	defer r.Close()
	// The children's result lines come once each has sent its last
	// message; one that fails instead ends the receive loop.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rx, err := openQueueReceiver(rctx, kind, dir, r)
	if err != nil {
		return s, err
	}
	defer rx.close()
	g, start, err := startChildren(ctx, exe, childSpec{Kind: kind, Dir: dir, Duration: p.Duration, Size: size}, p.Goroutines)
	defer g.Close()
	if err != nil {
		return s, err
	}
	sent := make([]int64, p.Goroutines)
	results := make(chan error, 1)
	go func() {
		err := g.Results(func(i int, line []byte) error {
			var res childResult
			err := json.Unmarshal(line, &res)
			sent[i] = res.Ops
			return err
		})
		if err != nil {
			cancel() // a child failed: its last message will not come
		}
		results <- err
	}()
	s.Waits = new(Histogram)
	s.Ops, err = receiveAll(rctx, rx, size, p.Goroutines, s.Waits)
	s.Elapsed = time.Since(start)
	if err != nil {
		// Decided before Close: stopping the senders fails them too, and
		// cancels rctx, which must not hide the receiver's error.
		childFirst := ctx.Err() == nil && rctx.Err() != nil
		g.Close() // the senders may be blocked on a full queue
		if rerr := <-results; rerr != nil && childFirst {
			return s, rerr
		}
		return s, fmt.Errorf("%s: %w", kind, err)
	}
	if err := <-results; err != nil {
		return s, err
	}
	if err := g.Wait(); err != nil {
		return s, err
	}
	s.PerWorker = sent
	var total int64
	for _, n := range sent {
		total += n
	}
	if total != s.Ops {
		return s, fmt.Errorf("%s: the producers sent %d messages, %d arrived", kind, total, s.Ops)
	}
	return s, nil
}

// receiveAll receives until each of senders sent its last message, checks
// each sender's order and count and each message's size and last byte,
// and records the sampled waits; it returns the messages received.
func receiveAll(ctx context.Context, rx queueReceiver, size, senders int, waits *Histogram) (int64, error) {
	type sender struct{ next, got uint64 }
	from := map[uint32]*sender{}
	buf := make([]byte, 0, max(size, 64<<10))
	var n int64
	for done := 0; done < senders; {
		m, err := rx.recv(ctx, buf)
		if err != nil {
			return n, err
		}
		if len(m) != size {
			return n, fmt.Errorf("a %d-byte message, want %d", len(m), size)
		}
		pid, seq, at := ne.Uint32(m), ne.Uint64(m[8:]), int64(ne.Uint64(m[16:]))
		sd := from[pid]
		if sd == nil {
			sd = &sender{next: 1}
			from[pid] = sd
		}
		if seq == 0 { // the last: at is the count sent
			if uint64(at) != sd.got {
				return n, fmt.Errorf("process %d sent %d messages, %d arrived", pid, at, sd.got)
			}
			done++
			continue
		}
		if seq != sd.next || m[len(m)-1] != byte(seq) {
			return n, fmt.Errorf("process %d: message %d (last byte %d) arrived where %d was due", pid, seq, m[len(m)-1], sd.next)
		}
		if at != 0 {
			waits.Record(time.Now().UnixNano() - at)
		}
		sd.next++
		sd.got++
		n++
	}
	return n, nil
}

// queueChild is one producer process of the shared-queue kind.
func queueChild(spec childSpec, r *shm.Region, stdin io.Reader, stdout io.Writer) error {
	var send func(msg []byte) error
	switch spec.Kind {
	case mpscKind:
		p, err := r.MPSCProducer(sharedQueueName, sharedQueueCapacity)
		if err != nil {
			return err
		}
		defer p.Close()
		send = func(msg []byte) error { return p.Send(context.Background(), msg) }
	case unixgramKind, seqpacketKind:
		// Each sender has a socket of its own: a connection to the
		// seqpacket listener, or a datagram socket aimed at the
		// receiver's.
		network := "unixgram"
		if spec.Kind == seqpacketKind {
			network = "unixpacket"
		}
		conn, err := net.DialUnix(network, nil, &net.UnixAddr{Name: filepath.Join(spec.Dir, "sock"), Net: network})
		if err != nil {
			return err
		}
		defer conn.Close()
		send = func(msg []byte) error { _, err := conn.Write(msg); return err }
	default:
		return fmt.Errorf("unknown kind %q", spec.Kind)
	}
	if spec.Size < msgHeader {
		return fmt.Errorf("message size %d is under the %d-byte header", spec.Size, msgHeader)
	}
	end, err := awaitStart(spec, stdin, stdout)
	if err != nil {
		return err
	}
	msg := make([]byte, spec.Size)
	ne.PutUint32(msg, uint32(os.Getpid()))
	res := childResult{Waits: new(Histogram)}
	for seq := uint64(1); ; seq++ {
		var at int64
		if seq%waitSampleEvery == 1 { // the clock also says when to stop
			t := time.Now()
			if !t.Before(end) {
				break
			}
			at = t.UnixNano()
		}
		ne.PutUint64(msg[8:], seq)
		ne.PutUint64(msg[16:], uint64(at))
		msg[len(msg)-1] = byte(seq)
		if err := send(msg); err != nil {
			return err
		}
		res.Ops++
	}
	ne.PutUint64(msg[8:], 0)
	ne.PutUint64(msg[16:], uint64(res.Ops))
	if err := send(msg); err != nil {
		return err
	}
	res.EndNs = time.Now().UnixNano()
	return json.NewEncoder(stdout).Encode(&res)
}
