//go:build linux

package ctest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword/shm"
)

// mpscMessage writes message seq of producer id into buf and returns it:
// the twin of mpsc_msg in test/cworker_mpsc.c, so that either side checks
// every byte the other sent. 16 to 215 bytes.
func mpscMessage(buf []byte, id, seq uint64) []byte {
	n := 16 + ((seq*2654435761)>>7+id)%200
	b := buf[:n]
	binary.LittleEndian.PutUint64(b, id)
	binary.LittleEndian.PutUint64(b[8:], seq)
	for k := uint64(16); k < n; k++ {
		b[k] = byte(id*131 + seq*31 + k)
	}
	return b
}

// mpscCheck receives messages from c until want[id] messages have come
// from each producer id, checking per-producer order and every byte.
func mpscCheck(t *testing.T, c *shm.MPSCConsumer, want map[uint64]uint64) {
	t.Helper()
	next := map[uint64]uint64{}
	var total, got uint64
	for _, n := range want {
		total += n
	}
	buf := make([]byte, c.MaxMessage())
	exp := make([]byte, 256)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for got < total {
		msg, err := c.Receive(ctx, buf)
		if err != nil {
			t.Fatalf("receive after %d of %d (%v): %v", got, total, next, err)
		}
		if len(msg) < 16 {
			t.Fatalf("message %d: %d bytes", got, len(msg))
		}
		id, seq := binary.LittleEndian.Uint64(msg), binary.LittleEndian.Uint64(msg[8:])
		if _, ok := want[id]; !ok || seq != next[id] || seq >= want[id] {
			t.Fatalf("message %d: producer %d seq %d, want seq %d of %d", got, id, seq, next[id], want[id])
		}
		if !bytes.Equal(msg, mpscMessage(exp, id, seq)) {
			t.Fatalf("message %d of producer %d: bytes differ", seq, id)
		}
		next[id]++
		got++
	}
}

// goProducers sends count messages from each of the producer ids, one
// goroutine and handle each; the returned function waits and reports.
func goProducers(t *testing.T, r *shm.Region, name string, capacity int, ids []uint64, count uint64) func() {
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for _, id := range ids {
		p, err := r.MPSCProducer(name, capacity)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.Close()
			buf := make([]byte, 256)
			for s := range count {
				if err := p.Send(context.Background(), mpscMessage(buf, id, s)); err != nil {
					errs <- fmt.Errorf("Go producer %d, message %d: %v", id, s, err)
					return
				}
			}
		}()
	}
	return func() {
		t.Helper()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// mpscCount is how many messages each producer sends: small by default
// (the default suite's budget), LOCKWORD_LONG=1 for 100,000.
func mpscCount() uint64 {
	if os.Getenv("LOCKWORD_LONG") == "1" {
		return 100000
	}
	return 3000
}

const mpscCap = 4096

// TestMPSCCAndGoProducersToGoConsumer: two C producer processes of two
// threads each and two Go producers into one Go consumer; every message
// exactly once, in order per producer, every byte checked.
func TestMPSCCAndGoProducersToGoConsumer(t *testing.T) {
	b := cBuild(t, "plain")
	n := mpscCount()
	path, r := goRegion(t)
	c, err := r.MPSCConsumer("mq", mpscCap)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]uint64{}
	var cs []*proc
	for _, id := range []uint64{10, 20} {
		cs = append(cs, startC(t, b.Worker, "mpsc-send", path, "mq", strconv.Itoa(mpscCap), strconv.FormatUint(id, 10), "2", strconv.FormatUint(n, 10)))
		want[id], want[id+1] = n, n
	}
	want[1], want[2] = n, n
	wait := goProducers(t, r, "mq", mpscCap, []uint64{1, 2}, n)
	mpscCheck(t, c, want)
	wait()
	for _, p := range cs {
		if rest, err := p.wait(time.Minute); err != nil || len(rest) != 1 || rest[0] != "sent" {
			t.Fatalf("C producer: %v %q", err, rest)
		}
	}
	if lost, err := c.Lost(); lost != 0 || err != nil {
		t.Errorf("lost %d, %v; want 0", lost, err)
	}
	c.Close()
}

// TestMPSCGoProducersToCConsumer: three Go producers into a C consumer,
// which checks order per producer and every byte.
func TestMPSCGoProducersToCConsumer(t *testing.T) {
	b := cBuild(t, "plain")
	n := mpscCount()
	path, r := goRegion(t)
	if _, err := r.MPSCProducer("mq", mpscCap); err != nil { // create it before the C consumer attaches
		t.Fatal(err)
	}
	c := startC(t, b.Worker, "mpsc-recv", path, "mq", strconv.Itoa(mpscCap), "3", strconv.FormatUint(n, 10))
	c.line(30 * time.Second) // attached
	goProducers(t, r, "mq", mpscCap, []uint64{0, 1, 2}, n)()
	rest, err := c.wait(2 * time.Minute)
	if want := fmt.Sprintf("received %d lost 0", 3*n); err != nil || len(rest) != 1 || rest[0] != want {
		t.Fatalf("C consumer: %v %q, want %q", err, rest, want)
	}
}

// TestMPSCCProducerKilledBetweenClaimAndPublish: a C producer sends 10
// messages (they fit: at most 2320 bytes), then stops itself at a step of an 11th send and is SIGKILLed
// there. Killed after the claim word was freed ("claimed": the header
// says claimed, no payload), its record is skipped and counted lost by
// the Go consumer; killed holding the claim word ("claiming"), its claim
// is taken back and nothing is lost. Either way a Go producer's messages
// sent afterwards all arrive. Timing assumption: none; the kill happens
// while the producer is stopped, and the consumer waits for it as long as
// it takes (liveness checks every 10 ms).
func TestMPSCCProducerKilledBetweenClaimAndPublish(t *testing.T) {
	b := cBuild(t, "plain")
	for _, tc := range []struct {
		step string
		lost uint64
	}{{"claimed", 1}, {"claiming", 0}} {
		t.Run(tc.step, func(t *testing.T) {
			path, r := goRegion(t)
			c, err := r.MPSCConsumer("mq", mpscCap)
			if err != nil {
				t.Fatal(err)
			}
			p := startC(t, b.Worker, "mpsc-send", path, "mq", strconv.Itoa(mpscCap), "7", "1", "10", tc.step)
			if l := p.line(time.Minute); l != "sent" {
				t.Fatalf("C producer: %q", l)
			}
			// Receive the 10 while the 11th send is in flight, so that the
			// queue has room for it.
			mpscCheck(t, c, map[uint64]uint64{7: 10})
			waitStopped(t, p.cmd.Process.Pid) // flock_test.go
			p.cmd.Process.Signal(syscall.SIGKILL)
			if _, err := p.wait(time.Minute); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("C producer not killed: %v", err)
			}
			wait := goProducers(t, r, "mq", mpscCap, []uint64{1}, 100)
			mpscCheck(t, c, map[uint64]uint64{1: 100})
			wait()
			if lost, err := c.Lost(); lost != tc.lost || err != nil {
				t.Errorf("lost %d, %v; want %d", lost, err, tc.lost)
			}
			if _, ok, err := c.TryReceive(nil); ok || err != nil {
				t.Errorf("TryReceive after all: %v %v, want nothing", ok, err)
			}
			c.Close()
		})
	}
}

// TestMPSCCorruptInC: C validates the queue's words as Go does, and a
// corrupt queue is LW_ECORRUPT, never a read outside it or a hang: a tail
// not a multiple of 16 or more than capacity ahead of head refuses the
// attach; a record at head whose position word is not head fails the
// receive; a counter past its bound, an unknown wake bit or a consumer
// word that is no owner token fails the call that reads it.
func TestMPSCCorruptInC(t *testing.T) {
	b := cBuild(t, "plain")
	capStr := strconv.Itoa(mpscCap)
	for _, tc := range []struct {
		name   string
		writes map[int64]uint64 // object offset: word
		cmd    []string
		want   string
	}{
		{"unaligned tail", map[int64]uint64{128: 8}, []string{"mpsc-recv", "mq", capStr, "1", "1"}, "consumer: lockword: corrupt shared object"},
		{"tail past capacity", map[int64]uint64{128: 2 * mpscCap}, []string{"mpsc-send", "mq", capStr, "0", "1", "1"}, "send: lockword: corrupt shared object"},
		{"position word", map[int64]uint64{128: 32, 512: 2<<28 | 1<<32 | 1<<18 | 1, 520: 4096}, []string{"mpsc-recv", "mq", capStr, "1", "1"}, "FAIL receive after 0: 1023"},
		// A word flipped past its bound (see TestMPSCCorrupt in shm).
		{"messages sent", map[int64]uint64{160: 1 << 44}, []string{"mpsc-send", "mq", capStr, "0", "1", "1"}, "send: lockword: corrupt shared object"},
		{"claims recovered", map[int64]uint64{168: 1 << 44}, []string{"mpsc-send", "mq", capStr, "0", "1", "1"}, "send: lockword: corrupt shared object"},
		{"not-empty wake word", map[int64]uint64{136: 1 << 7}, []string{"mpsc-send", "mq", capStr, "0", "1", "1"}, "send: lockword: corrupt shared object"},
		{"messages received", map[int64]uint64{288: 1 << 44}, []string{"mpsc-recv", "mq", capStr, "1", "1"}, "corrupt shared object"},
		{"lost", map[int64]uint64{296: 1 << 44}, []string{"mpsc-recv", "mq", capStr, "1", "1"}, "corrupt shared object"},
		{"consumer word", map[int64]uint64{0: 1<<32 | 0xffffffff}, []string{"mpsc-recv", "mq", capStr, "1", "1"}, "consumer: lockword: corrupt shared object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, r := goRegion(t)
			gp, err := r.MPSCProducer("mq", mpscCap)
			if err != nil {
				t.Fatal(err)
			}
			// One message queued, producer 0's first: a consumer that
			// checks nothing receives it.
			if err := gp.Send(context.Background(), mpscMessage(make([]byte, 256), 0, 0)); err != nil {
				t.Fatal(err)
			}
			info, err := r.Inspect()
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			for off, v := range tc.writes {
				if _, err := f.WriteAt(binary.NativeEndian.AppendUint64(nil, v), info.Objects[0].Offset+off); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			p := startC(t, b.Worker, append([]string{tc.cmd[0], path}, tc.cmd[1:]...)...)
			rest, err := p.wait(30 * time.Second)
			if err == nil || !strings.Contains(err.Error()+strings.Join(rest, "\n"), tc.want) {
				t.Errorf("%v %q, want %q", err, rest, tc.want)
			}
		})
	}
}

// TestMPSCCConsumerClaimerPublishedThenDied: the C consumer reads a
// claimed record at head and stops (LOCKWORD_MPSC_TEST_STOP=dead-check)
// before asking whether its producer lives; the producer, stopped between
// claim and publish, is continued, publishes and exits; then the consumer
// is continued and finds the producer dead. The message was published:
// the consumer must read the state word again and deliver it, not count
// it lost. No timing assumption: every step waits for the process state
// it needs.
func TestMPSCCConsumerClaimerPublishedThenDied(t *testing.T) {
	b := cBuild(t, "plain")
	path, r := goRegion(t)
	if _, err := r.MPSCProducer("mq", mpscCap); err != nil { // create it
		t.Fatal(err)
	}
	capStr := strconv.Itoa(mpscCap)
	cmd := exec.Command(b.Worker, "mpsc-recv", path, "mq", capStr, "1", "1")
	cmd.Env = append(os.Environ(), "LOCKWORD_MPSC_TEST_STOP=dead-check")
	c := start(t, cmd)
	c.line(30 * time.Second) // attached
	p := startC(t, b.Worker, "mpsc-send", path, "mq", capStr, "0", "1", "0", "claimed-exit")
	if l := p.line(30 * time.Second); l != "sent" {
		t.Fatalf("C producer: %q", l)
	}
	waitStopped(t, p.cmd.Process.Pid) // between claim and publish
	waitStopped(t, c.cmd.Process.Pid) // read the claimed record, about to ask
	p.cmd.Process.Signal(syscall.SIGCONT)
	if rest, err := p.wait(30 * time.Second); err != nil {
		t.Fatalf("C producer: %v %q", err, rest)
	}
	c.cmd.Process.Signal(syscall.SIGCONT)
	rest, err := c.wait(90 * time.Second)
	if err != nil || len(rest) != 1 || rest[0] != "received 1 lost 0" {
		t.Fatalf("C consumer: %v %q, want the published message received and none lost", err, rest)
	}
}
