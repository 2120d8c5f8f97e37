//go:build linux

package shm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/faultpoint"
	"github.com/lockword/lockword/internal/msgcheck"
	"github.com/lockword/lockword/internal/ringindex"
)

// The shared MPSC queue within one process (producer handles in
// goroutines), its checker against a broken producer, and corrupt words.
// The cross-process tests are mpsc_procs_test.go's.

// mpscQueuePair creates a region with a consumer of queue "q".
func mpscConsumer(t *testing.T, capacity int) (*Region, *MPSCConsumer) {
	t.Helper()
	r := mustCreate(t, tempRegionPath(t), 0)
	c, err := r.MPSCConsumer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// receiveN receives until chk has seen n messages, or fails the test.
// lostOf is c.Lost(), failing the test on an error.
func lostOf(t testing.TB, c *MPSCConsumer) uint64 {
	t.Helper()
	n, err := c.Lost()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func receiveN(t *testing.T, c *MPSCConsumer, chk *msgcheck.Checker, n int) {
	t.Helper()
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		// A hang is reported with the queue's words, before the test
		// binary's timeout would hide them.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-testDeadlineMargin))
		defer cancel()
	}
	buf := make([]byte, c.MaxMessage())
	for chk.Received < n {
		msg, err := c.Receive(ctx, buf)
		if err != nil {
			q := &c.q
			st := q.state(c.head & q.mask).Load()
			t.Fatalf("after %v (next %v): %v; head %d, end %d, tail %#x, record at head %#x (position %d), notEmpty %d, notFull %d",
				chk, chk.Next, err, c.head, c.end, q.tail.Load(), st, q.pos(c.head&q.mask).Load(), q.notEmpty.Load(), q.notFull.Load())
		}
		chk.Check(msg)
	}
}

// TestMPSCInProcess: producer handles in goroutines, a small queue (many
// wraps, padding records, full and empty waits): every message arrives
// once, whole, in each producer's order, and the counts add up.
func TestMPSCInProcess(t *testing.T) {
	const capacity, maxLen, producers = 1024, 200, 4
	n := scaled(100_000)
	r, c := mpscConsumer(t, capacity)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for id := range uint32(producers) {
		p, err := r.MPSCProducer("q", capacity)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer p.Close()
			buf := make([]byte, 0, maxLen)
			for seq := range uint64(n) {
				if err := p.Send(context.Background(), msgcheck.Msg(buf, id, seq, maxLen)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	chk := msgcheck.NewChecker(producers, maxLen)
	receiveN(t, c, chk, producers*n)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id, next := range chk.Next {
		if next != uint64(n) {
			t.Errorf("producer %d: %d in order, want %d", id, next, n)
		}
	}
	if !chk.OK() {
		t.Fatal(chk)
	}
	if got, lost := c.q.sent.Load(), lostOf(t, c); got != uint64(producers*n) || c.q.recvd.Load() != got || lost != 0 {
		t.Fatalf("counts: sent %d, received %d, lost %d; want %d, %d, 0", got, c.q.recvd.Load(), lost, producers*n, producers*n)
	}
	if _, ok, err := c.TryReceive(nil); ok || err != nil {
		t.Fatalf("TryReceive on the drained queue: %v, %v", ok, err)
	}
}

// brokenSend publishes msg's record before copying its payload (the order
// a broken producer might pick), calling between the two: the checker
// must see the torn message.
func (p *MPSCProducer) brokenSend(msg []byte, between func()) error {
	q := &p.q
	n := uint64(len(msg))
	t := q.tail.Load()
	off := t & q.mask
	if room := q.capacity - off; room < mpscRecordSize(n) {
		// Pad to the end as a good producer does.
		q.state(off).Store(mpscStateWord(q.token, mpscRecPadding, room-mpscHeaderSize))
		q.pos(off).Store(t)
		t += room
		q.tail.Store(t)
		off = 0
	}
	if !q.tail.CompareAndSwap(t, mpscClaimWord(t, q.token)) {
		return errors.New("claim lost")
	}
	q.state(off).Store(mpscStateWord(q.token, mpscRecPublished, n))
	q.pos(off).Store(t)
	q.tail.Store(t + mpscRecordSize(n))
	between()
	copy(q.data[off+mpscHeaderSize:], msg)
	return nil
}

// TestMPSCCheckerCatchesTornPublish: a producer that publishes the header
// before the payload is caught, so the tests above can fail.
func TestMPSCCheckerCatchesTornPublish(t *testing.T) {
	const capacity, maxLen = 1024, 100
	r, c := mpscConsumer(t, capacity)
	p, err := r.MPSCProducer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	chk := msgcheck.NewChecker(1, maxLen)
	buf := make([]byte, 0, maxLen)
	for seq := range uint64(50) { // past one lap: stale bytes under the header
		err := p.brokenSend(msgcheck.Msg(buf, 0, seq, maxLen), func() {
			msg, ok, err := c.TryReceive(make([]byte, maxLen))
			if !ok || err != nil {
				t.Fatalf("TryReceive of a published record: %v, %v", ok, err)
			}
			chk.Check(msg)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if chk.Mangled == 0 {
		t.Fatalf("a producer that publishes before writing passed: %v", chk)
	}
}

// TestMPSCCorrupt writes words no valid history produces into a queue with
// one message: the call named returns lockword.ErrCorrupt at once, never a
// panic, a message, or a wait for its context. Every word of the object
// with a bound is flipped past it by one case.
func TestMPSCCorrupt(t *testing.T) {
	const capacity = 1024
	const big = 1 << 44 // a high bit flipped in a counter
	for _, tc := range []struct {
		name  string
		call  string // "send", "receive", "stats" (Lost, ClaimsRecovered) or "attach" (a producer)
		spoil func(q *mpscQueue)
	}{
		{"position word", "receive", func(q *mpscQueue) { q.pos(0).Store(4096) }},
		{"length beyond capacity", "receive", func(q *mpscQueue) {
			q.state(0).Store(mpscStateWord(q.token, mpscRecPublished, capacity))
		}},
		{"invalid token", "receive", func(q *mpscQueue) { q.state(0).Store(mpscStateWord(0, mpscRecPublished, 20)) }},
		{"state 0", "receive", func(q *mpscQueue) { q.state(0).Store(mpscStateWord(q.token, 0, 20)) }},
		{"reserved state bits", "receive", func(q *mpscQueue) { q.state(0).Add(1 << 30) }},
		{"padding at offset 0", "receive", func(q *mpscQueue) {
			q.state(0).Store(mpscStateWord(q.token, mpscRecPadding, capacity-mpscHeaderSize))
		}},
		{"tail misaligned", "receive", func(q *mpscQueue) { q.tail.Store(q.tail.Load() + 8) }},
		{"tail beyond capacity", "receive", func(q *mpscQueue) { q.tail.Store(2 * capacity) }},
		{"claim word with invalid token", "receive", func(q *mpscQueue) { q.tail.Store(mpscClaimWord(48, 0)) }},
		{"head ahead of tail", "send", func(q *mpscQueue) { q.head.Store(q.tail.Load() + 2*capacity) }},
		{"head misaligned", "send", func(q *mpscQueue) { q.head.Store(8) }},
		{"head moved under the consumer", "receive", func(q *mpscQueue) { q.head.Store(16) }},
		{"consumer word", "receive", func(q *mpscQueue) { q.consumerRole.Store(0xffffffff) }},
		{"consumer word, seen by a waiting producer", "send", func(q *mpscQueue) { q.consumerRole.Store(0xffffffff) }},
		{"producer count", "attach", func(q *mpscQueue) { q.producers.Store(0xffffffff - 1) }},
		{"not-empty wake word", "send", func(q *mpscQueue) { q.notEmpty.Store(1 << 7) }},
		{"not-full wake word", "send", func(q *mpscQueue) { q.notFull.Store(1 << 7) }},
		{"messages sent", "send", func(q *mpscQueue) { q.sent.Store(big) }},
		{"claims recovered, at send", "send", func(q *mpscQueue) { q.recovered.Store(big) }},
		{"claims recovered", "stats", func(q *mpscQueue) { q.recovered.Store(big) }},
		{"messages sent, in stats", "stats", func(q *mpscQueue) { q.sent.Store(big) }},
		{"messages received", "receive", func(q *mpscQueue) { q.recvd.Store(big) }},
		{"lost", "receive", func(q *mpscQueue) { q.lost.Store(big) }},
		{"lost, in stats", "stats", func(q *mpscQueue) { q.lost.Store(big) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := mpscConsumer(t, capacity)
			p, err := r.MPSCProducer("q", capacity)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Send(context.Background(), make([]byte, 20)); err != nil {
				t.Fatal(err)
			}
			tc.spoil(&c.q)
			// Seconds: the calls return at once; an old one that waits
			// fails here rather than after a minute.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			switch tc.call {
			case "send":
				// The whole capacity: a Send that finds nothing wrong
				// waits for room, and the wait's checks run too.
				err = p.Send(ctx, make([]byte, capacity-mpscHeaderSize))
			case "receive":
				var msg []byte
				msg, err = c.Receive(ctx, nil)
				if len(msg) != 0 {
					t.Errorf("delivered %d bytes", len(msg))
				}
			case "stats":
				var lost, rec uint64
				lost, err = c.Lost()
				if _, err2 := c.ClaimsRecovered(); err == nil || err2 == nil {
					err = errors.Join(err, err2)
					rec, _ = c.ClaimsRecovered()
					t.Logf("Lost %d, ClaimsRecovered %d", lost, rec)
				}
			case "attach":
				_, err = r.MPSCProducer("q", capacity)
			}
			if !errors.Is(err, lockword.ErrCorrupt) {
				t.Fatalf("%v after %v, want lockword.ErrCorrupt", err, time.Since(start))
			}
			t.Log(err)
		})
	}
}

// TestMPSCClosedAndReopened: the consumer's Close fails producers' Sends
// with ErrRingClosed; a new consumer opens the queue again and receives
// what was left.
func TestMPSCClosedAndReopened(t *testing.T) {
	const capacity = 1024
	r, c := mpscConsumer(t, capacity)
	p, err := r.MPSCProducer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.MPSCConsumer("q", capacity); !errors.Is(err, ErrRingBusy) {
		t.Fatalf("second consumer: %v, want ErrRingBusy", err)
	}
	c.Close()
	if err := p.Send(context.Background(), []byte("x")); !errors.Is(err, lockword.ErrRingClosed) {
		t.Fatalf("Send after the consumer's Close: %v", err)
	}
	if _, err := c.Receive(context.Background(), nil); !errors.Is(err, lockword.ErrRingClosed) {
		t.Fatalf("Receive on a closed handle: %v", err)
	}
	c2, err := r.MPSCConsumer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	if c2.q.notFull.Load()&ringindex.Closed != 0 {
		t.Fatal("still closed")
	}
	if msg, err := c2.Receive(context.Background(), nil); err != nil || string(msg) != "kept" {
		t.Fatalf("%q, %v", msg, err)
	}
	if err := p.Send(context.Background(), []byte("again")); err != nil {
		t.Fatal(err)
	}
	if msg, err := c2.Receive(context.Background(), nil); err != nil || string(msg) != "again" {
		t.Fatalf("%q, %v", msg, err)
	}
	if _, err := r.MPSCProducer("q", 2048); !errors.Is(err, ErrObjectBounds) {
		t.Fatalf("other capacity: %v", err)
	}
	if err := p.Send(context.Background(), make([]byte, capacity)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	p.Close()
	c2.Close()
}

// TestMPSCPublishedThenDied: a producer that publishes and then dies
// between the consumer's load of its claimed record and the consumer's
// liveness check: the message is delivered, not skipped as lost (the
// consumer reads the final state word again once the claimer is dead).
// The hook publishes at exactly that point. Found by models/mpsc.pml
// (-DBROKEN_STALE_STATE is the old consumer).
func TestMPSCPublishedThenDied(t *testing.T) {
	r, c := mpscConsumer(t, 1024)
	q := &c.q
	dead := deadToken(t, r, (r.slot+1)%regionProcSlots)
	msg := []byte("published just before its producer died")
	n := uint64(len(msg))
	copy(q.data[mpscHeaderSize:], msg)
	q.state(0).Store(mpscStateWord(dead, mpscRecClaimed, n))
	q.pos(0).Store(0)
	q.tail.Store(mpscRecordSize(n))
	fired := false
	faultpoint.MPSC = func(step string) {
		if step == "claimer-dead" && !fired {
			fired = true
			q.state(0).Store(mpscStateWord(dead, mpscRecPublished, n))
		}
	}
	defer func() { faultpoint.MPSC = nil }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := c.Receive(ctx, nil)
	if lost := lostOf(t, c); err != nil || string(got) != string(msg) || lost != 0 || !fired {
		t.Fatalf("Receive: %q, %v; lost %d (hook fired %v); want the message and none lost", got, err, lost, fired)
	}
}

// TestMPSCInspectBusyQueue: Inspect reads a full queue while, between its
// loads of head and tail (a test hook), the consumer receives a message
// and a producer sends one into the room it freed. The queue is valid
// throughout; Inspect read head before tail and judged a tail more than
// the capacity past an old head corrupt.
func TestMPSCInspectBusyQueue(t *testing.T) {
	const capacity = 1024
	r, c := mpscConsumer(t, capacity)
	p, err := r.MPSCProducer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msg := make([]byte, 48) // 64-byte records: 16 fill the queue
	for range capacity / 64 {
		if err := p.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	fired := false
	faultpoint.MPSC = func(step string) {
		if step != "inspect-head" || fired {
			return
		}
		fired = true
		if _, err := c.Receive(ctx, nil); err != nil {
			t.Error(err)
		}
		if err := p.Send(ctx, msg); err != nil {
			t.Error(err)
		}
	}
	defer func() { faultpoint.MPSC = nil }()
	info, err := r.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	mi := info.Objects[0].MPSC
	if !fired || mi == nil || mi.Corrupt || mi.Used != capacity {
		t.Fatalf("hook fired %v; %+v; want a full queue, not corrupt", fired, mi)
	}
}
