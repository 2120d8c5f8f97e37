//go:build linux

package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/shm"
)

// TestSharedQueueKinds runs each shared-queue subject with 2 producer
// processes (this test binary re-executed) for 30 ms at the smallest
// message: every message must arrive, in order per sender, and the sample
// carries each process's count and sampled waits; each group's note gives
// the host's max_dgram_qlen. About 0.7 s.
func TestSharedQueueKinds(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The datagram socket's figure depends on the host's setting: the
	// table says which it is.
	want := "(unknown here)"
	if qlen, err := os.ReadFile(maxDgramQlenFile); err == nil {
		want = fmt.Sprintf("(%s on this host)", strings.TrimSpace(string(qlen)))
	}
	for _, g := range sharedQueueGroups(exe) {
		if len(g.Notes) != 1 || !strings.Contains(g.Notes[0], want) {
			t.Errorf("%s: notes %q, want one with %q", g.Name, g.Notes, want)
		}
	}
	for _, g := range sharedQueueGroups(exe)[:1] {
		for _, s := range g.Subjects {
			sample, err := s.run(context.Background(), Params{Goroutines: 2, Duration: 30 * time.Millisecond})
			if err != nil {
				t.Fatalf("%s %s: %v", g.Name, s.Name, err)
			}
			if len(sample.PerWorker) != 2 || sample.Ops == 0 || sample.Waits.N == 0 || sample.Elapsed < 30*time.Millisecond {
				t.Errorf("%s %s: %d msgs in %v, per process %v, %d waits", g.Name, s.Name, sample.Ops, sample.Elapsed, sample.PerWorker, sample.Waits.N)
			}
		}
	}
}

// TestSharedQueueSeqpacketChecked sends whole streams from two senders over real
// connections to the seqpacket peer's receiver, queued before the first
// read (the senders' send buffers hold them: no timing): they must arrive
// whole and pass receiveAll's checks, and the same receiver with one
// message dropped must fail them, so that a socket that loses a message
// cannot pass as fast.
func TestSharedQueueSeqpacketChecked(t *testing.T) {
	const size, msgs = 64, 50
	for name, drop := range map[string]int{"good": 0, "drops message 20": 20} {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rx, err := openReceiver(ctx, seqpacketKind, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		for pid := range uint32(2) {
			conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: filepath.Join(dir, "sock"), Net: "unixpacket"})
			if err != nil {
				t.Fatal(err)
			}
			m := make([]byte, size)
			ne.PutUint32(m, 100+pid)
			for seq := uint64(1); seq <= msgs+1; seq++ {
				ne.PutUint64(m[8:], seq%(msgs+1)) // the last is seq 0, with the count
				ne.PutUint64(m[16:], seq/(msgs+1)*msgs)
				m[size-1] = byte(seq)
				if _, err := conn.Write(m); err != nil {
					t.Fatal(err)
				}
			}
			conn.Close() // the receiver sees its end after the messages
		}
		n, recv := 0, rx.recv
		rx.recv = func(ctx context.Context, buf []byte) ([]byte, error) {
			if n++; n == drop {
				recv(ctx, buf)
			}
			return recv(ctx, buf)
		}
		got, err := receiveAll(ctx, rx, size, 2, new(Histogram))
		switch {
		case drop == 0 && (err != nil || got != 2*msgs):
			t.Errorf("%s: %d messages, %v; want %d", name, got, err, 2*msgs)
		case drop != 0 && (err == nil || !strings.Contains(err.Error(), "was due")):
			t.Errorf("%s: %d messages, %v; want a message out of order", name, got, err)
		}
		rx.close()
		cancel()
	}
}

// TestSharedQueueReportsReceiverError breaks the receiving end (each
// message comes one byte short) in a real sample: the error must be the
// check's, not that of the senders the failed sample then stops.
func TestSharedQueueReportsReceiverError(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	defer func(open func(context.Context, string, string, *shm.Region) (queueReceiver, error)) {
		openQueueReceiver = open
	}(openQueueReceiver)
	openQueueReceiver = func(ctx context.Context, kind, dir string, r *shm.Region) (queueReceiver, error) {
		rx, err := openReceiver(ctx, kind, dir, r)
		recv := rx.recv
		rx.recv = func(ctx context.Context, buf []byte) ([]byte, error) {
			m, err := recv(ctx, buf)
			return m[:max(len(m)-1, 0)], err
		}
		return rx, err
	}
	_, err = runSharedQueue(context.Background(), exe, seqpacketKind, 64, Params{Goroutines: 2, Duration: 30 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "a 63-byte message") {
		t.Errorf("a sample whose receiver cuts each message short: %v, want the size check's error", err)
	}
}

// TestSharedQueueChecks feeds the receiver's checks bad streams: each
// must be refused, so that a queue that reorders, tears or loses a
// message cannot pass as fast.
func TestSharedQueueChecks(t *testing.T) {
	const size = 32
	msg := func(seq, at uint64, last byte) []byte {
		m := make([]byte, size)
		ne.PutUint32(m, 7)
		ne.PutUint64(m[8:], seq)
		ne.PutUint64(m[16:], at)
		m[size-1] = last
		return m
	}
	for name, c := range map[string]struct {
		stream [][]byte
		want   string
	}{
		"good":      {[][]byte{msg(1, 0, 1), msg(2, 0, 2), msg(0, 2, 0)}, ""},
		"reordered": {[][]byte{msg(2, 0, 2), msg(1, 0, 1), msg(0, 2, 0)}, "where 1 was due"},
		"torn":      {[][]byte{msg(1, 0, 1), msg(2, 0, 9), msg(0, 2, 0)}, "last byte 9"},
		"lost":      {[][]byte{msg(1, 0, 1), msg(0, 2, 0)}, "sent 2 messages, 1 arrived"},
		"short":     {[][]byte{msg(1, 0, 1)[:size-1]}, "a 31-byte message"},
	} {
		i := 0
		rx := queueReceiver{recv: func(_ context.Context, buf []byte) ([]byte, error) {
			i++
			return append(buf[:0], c.stream[i-1]...), nil
		}}
		_, err := receiveAll(context.Background(), rx, size, 1, new(Histogram))
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// BenchmarkSharedQueue is lockword bench's shared-queue row as a testing.B
// benchmark, by the same code (runSharedQueue), so that the two cannot
// disagree: 4 producer processes (this test binary re-executed, started,
// attached and ready before the sample begins) send for 150 ms from one
// start time, to an MPSC queue or to a Unix datagram socket alike; the
// rate is the messages received over the time from that start to the last
// one's arrival; the seqpacket socket is the other peer. Each b.N is one sample: run it with -benchtime 1x and
// -count for rounds, interleaved with the peer (the quiet-window script
// does). Mmsgs/s is the figure; ns/op is a whole sample's time.
func BenchmarkSharedQueue(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range sharedQueueSizes {
		for _, k := range []struct{ name, kind string }{{"mpsc", mpscKind}, {"unixgram", unixgramKind}, {"seqpacket", seqpacketKind}} {
			b.Run(fmt.Sprintf("%s/%dB", k.name, size), func(b *testing.B) {
				var msgs int64
				var took time.Duration
				for range b.N {
					s, err := runSharedQueue(context.Background(), exe, k.kind, size,
						Params{Goroutines: sharedQueueProcs, Duration: 150 * time.Millisecond})
					if err != nil {
						b.Fatal(err)
					}
					msgs, took = msgs+s.Ops, took+s.Elapsed
				}
				b.ReportMetric(float64(msgs)/took.Seconds()/1e6, "Mmsgs/s")
			})
		}
	}
}
