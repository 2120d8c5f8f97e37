//go:build linux

package bench

// Messages from one process to another: lockword's shared byte ring
// (RingProducer in a child process, RingConsumer here) against a Unix
// domain socket, the peer Go programs use today, in the same run. Issue 5's
// target is 64-byte messages at ≥ 10× the socket's rate; 4 KiB messages
// are reported in MB/s.
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench SharedRing -count 5 ./bench
//
// ns/op is per message, from the release of the producer to the last
// message received (process start-up not timed); MB/s counts payload bytes;
// Mmsg/s is messages per second in millions. Each message is sent on its
// own, as a stream of events would be: one Send, or one Write on the
// socket (SOCK_STREAM, a 4-byte length then the payload in one write),
// whose reader uses a bufio.Reader (64 KiB), so the socket's consumer
// already reads many messages per system call. The consumer checks each
// message's sequence number, so a harness that lost or reordered messages
// fails instead of reporting a figure.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/shm"
)

const (
	streamEnv          = "LOCKWORD_BENCH_STREAM"
	streamRingCapacity = 1 << 18 // bytes of record space: 256 KiB, about a socket's buffer
	streamRingName     = "stream"
)

func init() {
	// A re-executed producer runs here and exits, before TestMain.
	if spec := os.Getenv(streamEnv); spec != "" {
		if err := streamProducer(spec); err != nil {
			fmt.Println("bench stream producer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// BenchmarkSharedRing: 64-byte and 4 KiB messages through the shared ring
// and through a Unix domain socket.
func BenchmarkSharedRing(b *testing.B) {
	for _, size := range []int{64, 4096} {
		for _, via := range []string{"ring", "unix-socket"} {
			b.Run(fmt.Sprintf("size=%d/via=%s", size, via), func(b *testing.B) {
				b.SetBytes(int64(size))
				elapsed := stream(b, via, size, b.N, b.ResetTimer, b.StopTimer)
				b.ReportMetric(float64(b.N)/elapsed.Seconds()/1e6, "Mmsg/s")
			})
		}
	}
}

// TestStreamHarness runs both transports of BenchmarkSharedRing briefly:
// each must deliver every message in order (stream checks it).
func TestStreamHarness(t *testing.T) {
	for _, via := range []string{"ring", "unix-socket"} {
		for _, size := range []int{8, 64, 4096} {
			stream(t, via, size, 3000, func() {}, func() {})
		}
	}
}

// stream has a child process send n messages of size bytes (at least 8:
// the sequence number) via the transport, receives and checks them here,
// and returns the time from the release (after calling released) to the
// last message (then it calls received, before the child's exit).
func stream(tb testing.TB, via string, size, n int, released, received func()) time.Duration {
	dir, r, data := setup(tb)
	var recv func() ([]byte, error)
	switch via {
	case "ring":
		c, err := r.RingConsumer(streamRingName, streamRingCapacity)
		if err != nil {
			tb.Fatal(err)
		}
		defer c.Detach()
		buf := make([]byte, c.MaxMessage())
		recv = func() ([]byte, error) { return c.Receive(context.Background(), buf) }
	case "unix-socket":
		ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
		if err != nil {
			tb.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				tb.Error(err)
			}
			accepted <- conn
		}()
		var conn net.Conn
		defer func() {
			if conn != nil {
				conn.Close()
			}
		}()
		br := (*bufio.Reader)(nil)
		buf := make([]byte, size)
		var hdr [4]byte
		recv = func() ([]byte, error) {
			if conn == nil {
				if conn = <-accepted; conn == nil {
					return nil, fmt.Errorf("no connection")
				}
				br = bufio.NewReaderSize(conn, 64<<10)
			}
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return nil, err
			}
			m := buf[:ne.Uint32(hdr[:])]
			_, err := io.ReadFull(br, m)
			return m, err
		}
	default:
		tb.Fatalf("unknown transport %q", via)
	}
	out := new(strings.Builder)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), streamEnv+"="+strings.Join([]string{via, dir, strconv.Itoa(size), strconv.Itoa(n)}, ","))
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	for ne.Uint64(data[offReady:]) == 0 {
		select {
		case err := <-exited:
			tb.Fatalf("producer exited before it was ready: %v\n%s", err, out)
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
	released()
	start := time.Now()
	ne.PutUint64(data[offGo:], uint64(start.UnixNano()))
	for i := range n {
		msg, err := recv()
		if err != nil {
			tb.Fatalf("%s: message %d: %v\n%s", via, i, err, out)
		}
		if len(msg) != size || ne.Uint64(msg) != uint64(i) {
			tb.Fatalf("%s: message %d: %d bytes, number %d", via, i, len(msg), ne.Uint64(msg))
		}
	}
	elapsed := time.Since(start)
	received()
	if err := <-exited; err != nil {
		tb.Fatalf("producer: %v\n%s", err, out)
	}
	return elapsed
}

// streamProducer is the child: via, dir, size, n.
func streamProducer(spec string) error {
	f := strings.Split(spec, ",")
	via, dir := f[0], f[1]
	size, _ := strconv.Atoi(f[2])
	n, _ := strconv.Atoi(f[3])
	r, err := shm.Open(filepath.Join(dir, "region"), nil)
	if err != nil {
		return err
	}
	data, err := r.Bytes("data", dataSize)
	if err != nil {
		return err
	}
	var send func(msg []byte) error
	switch via {
	case "ring":
		p, err := r.RingProducer(streamRingName, streamRingCapacity)
		if err != nil {
			return err
		}
		defer p.Close()
		send = func(msg []byte) error { return p.Send(context.Background(), msg) }
	case "unix-socket":
		conn, err := net.Dial("unix", filepath.Join(dir, "sock"))
		if err != nil {
			return err
		}
		defer conn.Close()
		frame := make([]byte, 4+size)
		send = func(msg []byte) error {
			ne.PutUint32(frame, uint32(len(msg)))
			copy(frame[4:], msg)
			_, err := conn.Write(frame) // one message, one write
			return err
		}
	}
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}
	ne.PutUint64(data[offReady:], 1)
	for ne.Uint64(data[offGo:]) == 0 {
		time.Sleep(50 * time.Microsecond)
	}
	for i := range n {
		ne.PutUint64(msg, uint64(i))
		if err := send(msg); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}
