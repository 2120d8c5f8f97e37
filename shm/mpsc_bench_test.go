//go:build linux

package shm

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
)

// BenchmarkMPSCProcs: 4 producer processes send fixed-size messages to
// this process through an MPSC queue, and, in the same run, through a Unix
// datagram socket (SOCK_DGRAM, the peer users would pick), at 64 B and
// 4 KiB. b.N is messages per producer. Run it alone, serialised with the
// other benchmarks (flock /tmp/lockword-bench.lock), and quote the load.
func BenchmarkMPSCProcs(b *testing.B) {
	const producers = 4
	for _, size := range []int{64, 4096} {
		for _, peer := range []string{"mpsc", "unixgram"} {
			b.Run(fmt.Sprintf("%s/%dB", peer, size), func(b *testing.B) {
				benchmarkMPSCProcs(b, peer, producers, size)
			})
		}
	}
}

func benchmarkMPSCProcs(b *testing.B, peer string, producers, size int) {
	const capacity = 1 << 20
	dir := b.TempDir()
	path := filepath.Join(dir, "region")
	r, err := Create(path, 2*capacity, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	goWord, err := r.Bytes("go", 8)
	if err != nil {
		b.Fatal(err)
	}
	var recv func(buf []byte) error
	sock := filepath.Join(dir, "sock")
	if peer == "mpsc" {
		c, err := r.MPSCConsumer("q", capacity)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Detach()
		recv = func(buf []byte) error { _, err := c.Receive(context.Background(), buf); return err }
	} else {
		conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		recv = func(buf []byte) error { _, err := conn.Read(buf[:cap(buf)]); return err }
	}
	// The children are started by hand: child's helpers take a *testing.T.
	children := make([]*exec.Cmd, producers)
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSharedChild$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), "LOCKWORD_SHARED_CHILD=mpsc-bench",
			"LOCKWORD_SHARED_ARGS="+strings.Join([]string{path, peer, sock, itoa(size), itoa(b.N), itoa(capacity)}, ","))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer cmd.Process.Kill()
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			b.Fatalf("child: %q, %v", line, err)
		}
		go io.Copy(io.Discard, out)
		children[i] = cmd
	}
	buf := make([]byte, 0, max(size, 64<<10))
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	word64(goWord, 0).Store(1)
	for range producers * b.N {
		if err := recv(buf); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	for _, ch := range children {
		if err := ch.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(producers*b.N)/elapsed.Seconds()/1e6, "Mmsgs/s")
}

func init() {
	childModes["mpsc-bench"] = func(args []string) error {
		r, err := Open(args[0], nil)
		if err != nil {
			return err
		}
		size, _ := strconv.Atoi(args[3])
		n, _ := strconv.Atoi(args[4])
		capacity, _ := strconv.Atoi(args[5])
		goWord, err := r.Bytes("go", 8)
		if err != nil {
			return err
		}
		var send func([]byte) error
		if args[1] == "mpsc" {
			p, err := r.MPSCProducer("q", capacity)
			if err != nil {
				return err
			}
			send = func(m []byte) error { return p.Send(context.Background(), m) }
		} else {
			conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: args[2], Net: "unixgram"})
			if err != nil {
				return err
			}
			send = func(m []byte) error { _, err := conn.Write(m); return err }
		}
		fmt.Println("ready")
		for word64(goWord, 0).Load() == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		msg := make([]byte, size)
		for i := range n {
			msg[0] = byte(i)
			if err := send(msg); err != nil {
				return err
			}
		}
		return nil
	}
}
