//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/faultpoint"
	"github.com/lockword/lockword/internal/msgcheck"
)

// The shared MPSC queue across processes: more producer processes than
// cores, a producer killed between its claim and its publish, a dead
// consumer.

func init() {
	childModes["mpsc-produce"] = mpscProduceChild
	childModes["mpsc-consume"] = mpscConsumeChild
}

// mpscProduceChild: args path, name, capacity, producer, count, maxLen,
// and optionally a step of faultpoint.MPSC: after sending count messages it
// starts message count and stops at that step, prints "stopped" and waits
// to be killed. Without one it closes its handle and prints "done".
func mpscProduceChild(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	capacity, _ := strconv.Atoi(args[2])
	id, _ := strconv.ParseUint(args[3], 10, 32)
	count, _ := strconv.ParseUint(args[4], 10, 64)
	maxLen, _ := strconv.Atoi(args[5])
	p, err := r.MPSCProducer(args[1], capacity)
	if err != nil {
		return err
	}
	fmt.Println("attached")
	buf := make([]byte, 0, maxLen)
	for seq := range count {
		if err := p.Send(context.Background(), msgcheck.Msg(buf, uint32(id), seq, maxLen)); err != nil {
			return err
		}
	}
	if len(args) > 6 {
		step := args[6]
		faultpoint.MPSC = func(s string) {
			if s == step {
				fmt.Println("stopped")
				time.Sleep(time.Hour)
			}
		}
		return p.Send(context.Background(), msgcheck.Msg(buf, uint32(id), count, maxLen))
	}
	p.Close()
	fmt.Println("done")
	return nil
}

// mpscConsumeChild: args path, name, capacity, producers, maxLen, n: it
// receives n messages, prints "received", and waits to be killed.
func mpscConsumeChild(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	capacity, _ := strconv.Atoi(args[2])
	producers, _ := strconv.Atoi(args[3])
	maxLen, _ := strconv.Atoi(args[4])
	n, _ := strconv.Atoi(args[5])
	c, err := r.MPSCConsumer(args[1], capacity)
	if err != nil {
		return err
	}
	fmt.Println("attached")
	chk := msgcheck.NewChecker(producers, maxLen)
	for chk.Received < n {
		msg, err := c.Receive(context.Background(), nil)
		if err != nil {
			return err
		}
		chk.Check(msg)
	}
	fmt.Println("received", chk)
	time.Sleep(time.Hour)
	return nil
}

// TestMPSCAcrossProcesses: more producer processes than cores stream into
// one consumer through a small queue (many wraps, full and empty waits):
// exact totals, every byte, each producer's order.
func TestMPSCAcrossProcesses(t *testing.T) {
	const capacity, maxLen = 4096, 300
	producers := runtime.NumCPU() + 2
	n := scaled(200_000)
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	c, err := r.MPSCConsumer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	children := make([]*child, producers)
	for id := range children {
		children[id] = startChild(t, "mpsc-produce", path, "q", itoa(capacity), itoa(id), itoa(n), itoa(maxLen))
	}
	t.Cleanup(func() {
		for id, ch := range children {
			if t.Failed() {
				t.Logf("producer %d:\n%s", id, ch.output())
			}
		}
	})
	chk := msgcheck.NewChecker(producers, maxLen)
	receiveN(t, c, chk, producers*n)
	for _, ch := range children {
		ch.expect(t, "done")
		ch.wait(t)
	}
	for id, next := range chk.Next {
		if next != uint64(n) {
			t.Errorf("producer %d: %d in order, want %d", id, next, n)
		}
	}
	if lost := lostOf(t, c); !chk.OK() || lost != 0 {
		t.Fatalf("%v, %d lost", chk, lost)
	}
	if _, ok, err := c.TryReceive(nil); ok || err != nil {
		t.Fatalf("a message too many: %v, %v", ok, err)
	}
	t.Logf("%d producer processes: %v; sleeps %d/%d", producers, chk, c.q.prodSleeps.Load(), c.q.consSleeps.Load())
}

// TestMPSCProducerKilledMidClaim SIGKILLs a producer stopped between its
// claim and its publish, at each step, while another producer streams: the
// consumer receives every published message of both, never a byte of the
// victim's unfinished one, skips it (counting it lost if its header was
// written) and goes on.
func TestMPSCProducerKilledMidClaim(t *testing.T) {
	const capacity, maxLen, before, after = 4096, 200, 100, 2000
	for _, tc := range []struct {
		step            string
		lost, recovered uint64
	}{
		// Holding the claim word, no header: the claim is taken back
		// and the space reused; nothing was in the queue to lose.
		{"claiming", 0, 1},
		// Header written, payload not: the consumer skips the record.
		{"claimed", 1, 0},
	} {
		t.Run(tc.step, func(t *testing.T) {
			path := tempRegionPath(t)
			r := mustCreate(t, path, 0)
			c, err := r.MPSCConsumer("q", capacity)
			if err != nil {
				t.Fatal(err)
			}
			victim := startChild(t, "mpsc-produce", path, "q", itoa(capacity), "0", itoa(before), itoa(maxLen), tc.step)
			chk := msgcheck.NewChecker(2, maxLen)
			receiveN(t, c, chk, before)
			victim.expect(t, "stopped")
			victim.cmd.Process.Kill()
			victim.exit()
			// Stopped mid-claim, the victim blocks the queue; once it is
			// dead, the other producer and the consumer move on.
			other := startChild(t, "mpsc-produce", path, "q", itoa(capacity), "1", itoa(after), itoa(maxLen))
			receiveN(t, c, chk, before+after)
			other.expect(t, "done")
			other.wait(t)
			if !chk.OK() || chk.Next[0] != before || chk.Next[1] != after {
				t.Fatalf("%v; in order: %v, want [%d %d]", chk, chk.Next, before, after)
			}
			if lost, rec := lostOf(t, c), c.q.recovered.Load(); lost != tc.lost || rec != tc.recovered {
				t.Fatalf("lost %d, claims recovered %d; want %d, %d", lost, rec, tc.lost, tc.recovered)
			}
			if _, ok, err := c.TryReceive(nil); ok || err != nil {
				t.Fatalf("a message too many: %v, %v", ok, err)
			}
		})
	}
}

// TestMPSCConsumerDeath: a producer whose queue is full while the consumer
// is dead gets ErrPeerDead, after every message it sent before was
// accepted; a new consumer receives them all.
func TestMPSCConsumerDeath(t *testing.T) {
	const capacity, maxLen, received = 4096, 100, 10
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	cons := startChild(t, "mpsc-consume", path, "q", itoa(capacity), "1", itoa(maxLen), itoa(received))
	cons.expect(t, "attached")
	p, err := r.MPSCProducer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, maxLen)
	seq := uint64(0)
	for ; seq < received; seq++ {
		if err := p.Send(context.Background(), msgcheck.Msg(buf, 0, seq, maxLen)); err != nil {
			t.Fatal(err)
		}
	}
	cons.expect(t, "received")
	cons.cmd.Process.Kill()
	cons.exit()
	for {
		err := p.Send(context.Background(), msgcheck.Msg(buf, 0, seq, maxLen))
		if errors.Is(err, ErrPeerDead) {
			t.Logf("after %d messages: %v", seq, err)
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seq++
	}
	c, err := r.MPSCConsumer("q", capacity)
	if err != nil {
		t.Fatalf("taking over the dead consumer's role: %v", err)
	}
	chk := msgcheck.NewChecker(1, maxLen)
	chk.Next[0] = received
	receiveN(t, c, chk, int(seq-received))
	if !chk.OK() || chk.Next[0] != seq {
		t.Fatalf("%v, next %d, want %d", chk, chk.Next[0], seq)
	}
	if err := p.Send(context.Background(), msgcheck.Msg(buf, 0, seq, maxLen)); err != nil {
		t.Fatalf("with the new consumer: %v", err)
	}
}
