//go:build linux

package ctest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/shm"
)

// ringMessage writes message i into buf and returns it: the twin of
// msg_len and msg_fill in test/cworker.c, so that each side checks every
// byte the other sent without being told. Lengths vary from 1 to 256.
func ringMessage(buf []byte, i uint64) []byte {
	span := uint64(min(len(buf), 256))
	n := 1 + (i*2654435761>>7)%span
	b := buf[:n]
	var le [8]byte
	binary.LittleEndian.PutUint64(le[:], i)
	copy(b, le[:min(n, 8)])
	for k := uint64(8); k < n; k++ {
		b[k] = byte(i*31 + k)
	}
	return b
}

// ringMessages is how many messages each direction carries: 1,000,000 as
// the issue asks, unless LOCKWORD_RING_MESSAGES says otherwise (or -short).
func ringMessages(t *testing.T) uint64 {
	if s := os.Getenv("LOCKWORD_RING_MESSAGES"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if testing.Short() {
		return 100000
	}
	return 1000000
}

const ringCap = 1 << 16

// TestRingGoToC: a Go producer sends N variable-length messages to a C
// consumer, which checks order, loss, duplication and every byte.
func TestRingGoToC(t *testing.T) {
	b := cBuild(t, "plain")
	n := ringMessages(t)
	path, r := goRegion(t)
	p, err := r.RingProducer("q", ringCap)
	if err != nil {
		t.Fatal(err)
	}
	c := startC(t, b.Worker, "recv", path, "q", strconv.Itoa(ringCap), strconv.FormatUint(n, 10))
	c.line(10 * time.Second) // attached
	start := time.Now()
	buf := make([]byte, p.MaxMessage())
	var sent uint64
	for i := range n {
		msg := ringMessage(buf, i)
		if err := p.Send(context.Background(), msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		sent += uint64(len(msg))
	}
	p.Close()
	rest, err := c.wait(2 * time.Minute)
	if err != nil {
		t.Fatalf("C consumer: %v %q", err, rest)
	}
	want := fmt.Sprintf("received %d bytes %d end 1019", n, sent)
	if len(rest) != 1 || !strings.HasPrefix(rest[0], want) {
		t.Fatalf("C consumer said %q, want %q (closed)", rest, want)
	}
	el := time.Since(start)
	wantMessageCounts(t, path, n)
	t.Logf("Go → C: %d messages, %d bytes in %v: %.2f M msg/s, %.1f MB/s", n, sent, el, float64(n)/el.Seconds()/1e6, float64(sent)/el.Seconds()/1e6)
}

// receiveChecked receives from c until an error, checking each message
// against ringMessage, and returns the count and the error that ended it.
func receiveChecked(t *testing.T, c *shm.RingConsumer, timeout time.Duration) (n, bytesGot uint64, err error) {
	t.Helper()
	buf := make([]byte, c.MaxMessage())
	want := make([]byte, c.MaxMessage())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		msg, err := c.Receive(ctx, buf)
		if err != nil {
			return n, bytesGot, err
		}
		if w := ringMessage(want, n); !bytes.Equal(msg, w) {
			t.Fatalf("message %d: %d bytes %x..., want %d bytes %x...", n, len(msg), msg[:min(len(msg), 16)], len(w), w[:min(len(w), 16)])
		}
		n++
		bytesGot += uint64(len(msg))
	}
}

// TestRingCToGo: a C producer sends N messages to a Go consumer.
func TestRingCToGo(t *testing.T) {
	b := cBuild(t, "plain")
	n := ringMessages(t)
	path, r := goRegion(t)
	c, err := r.RingConsumer("q", ringCap)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p := startC(t, b.Worker, "send", path, "q", strconv.Itoa(ringCap), strconv.FormatUint(n, 10))
	got, size, err := receiveChecked(t, c, 2*time.Minute)
	el := time.Since(start)
	if !errors.Is(err, lockword.ErrRingClosed) || got != n {
		t.Fatalf("Go consumer: %d of %d messages, then %v; want all, then ErrRingClosed", got, n, err)
	}
	if _, err := p.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.Detach()
	wantMessageCounts(t, path, n)
	t.Logf("C → Go: %d messages, %d bytes in %v: %.2f M msg/s, %.1f MB/s", n, size, el, float64(n)/el.Seconds()/1e6, float64(size)/el.Seconds()/1e6)
	// The stream is over (closed, drained, both roles free): a new C
	// producer opens the ring again (reopenIfOver, reopen_if_over),
	// sends, closes; a new Go consumer gets it all, then ErrRingClosed.
	if _, err := startC(t, b.Worker, "send", path, "q", strconv.Itoa(ringCap), "10").wait(time.Minute); err != nil {
		t.Fatalf("a new C producer on the finished ring: %v", err)
	}
	c2, err := r.RingConsumer("q", ringCap)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Detach()
	if got, _, err := receiveChecked(t, c2, time.Minute); got != 10 || !errors.Is(err, lockword.ErrRingClosed) {
		t.Fatalf("second stream: %d messages, then %v; want 10, then ErrRingClosed", got, err)
	}
}

// wantMessageCounts checks the ring's inspection counters (messages sent
// at 160, received at 288 of the ring object, the region's first): each
// side, Go or C, counts its own.
func wantMessageCounts(t *testing.T, path string, n uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ring = 45056
	if sent, recvd := binary.LittleEndian.Uint64(b[ring+160:]), binary.LittleEndian.Uint64(b[ring+288:]); sent != n || recvd != n {
		t.Errorf("ring counters: %d sent, %d received, want %d each", sent, recvd, n)
	}
}

// TestRingProducerKilled: a producer of either language killed
// mid-stream; the consumer of the other drains what was published, every
// message intact and in order, and then reports the dead peer.
func TestRingProducerKilled(t *testing.T) {
	b := cBuild(t, "plain")
	const forever = "1000000000000"
	t.Run("C producer, Go consumer", func(t *testing.T) {
		path, r := goRegion(t)
		c, err := r.RingConsumer("q", ringCap)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Detach()
		p := startC(t, b.Worker, "send", path, "q", strconv.Itoa(ringCap), forever)
		p.line(10 * time.Second)
		go func() {
			time.Sleep(100 * time.Millisecond)
			p.cmd.Process.Kill()
		}()
		got, _, err := receiveChecked(t, c, time.Minute)
		if !errors.Is(err, shm.ErrPeerDead) || got == 0 {
			t.Fatalf("Go consumer: %d messages, then %v; want some, then ErrPeerDead", got, err)
		}
		if !strings.Contains(err.Error(), strconv.Itoa(p.cmd.Process.Pid)) {
			t.Errorf("error does not name the dead C producer %d: %v", p.cmd.Process.Pid, err)
		}
		t.Logf("%d messages intact before the C producer's death was reported: %v", got, err)
	})
	t.Run("Go producer, C consumer", func(t *testing.T) {
		path, r := goRegion(t)
		if _, err := r.Bytes("x", 1); err != nil { // the region exists for both
			t.Fatal(err)
		}
		c := startC(t, b.Worker, "recv", path, "q", strconv.Itoa(ringCap), forever)
		c.line(10 * time.Second)
		p := startGo(t, "send", path, "q", strconv.Itoa(ringCap), forever)
		p.line(10 * time.Second)
		time.Sleep(100 * time.Millisecond)
		p.cmd.Process.Kill()
		rest, err := c.wait(time.Minute)
		if err != nil || len(rest) != 1 {
			t.Fatalf("C consumer: %v %q", err, rest)
		}
		f := strings.Fields(rest[0]) // received N bytes B end CODE ...
		if len(f) < 6 || f[5] != "1017" || f[1] == "0" {
			t.Fatalf("C consumer said %q, want some messages, then LW_EPEERDEAD (1017)", rest[0])
		}
		t.Logf("C consumer: %s", rest[0])
	})
}
