//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/ringindex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The shared ring across processes: child producers and consumers, peer
// death at every point, lost wake-ups, restart. The in-process tests of
// the ring and its stream checker are sharedring_test.go's.

func init() {
	childModes["ring-produce"] = ringProduceChild
	childModes["ring-consume"] = ringConsumeChild
}

// ringProduceChild: args path, name, capacity, first, count, maxLen, how,
// and optionally "sleepy" (see makeRingSleepy).
// It sends messages first..first+count-1 and then, by how: close (end of
// stream), broken (the same with brokenSend, then close), half (writes one
// more record half-way, unpublished, prints "half", waits to be killed),
// forever (never stops sending).
func ringProduceChild(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	capacity, _ := strconv.Atoi(args[2])
	first, _ := strconv.ParseUint(args[3], 10, 64)
	count, _ := strconv.ParseUint(args[4], 10, 64)
	maxLen, _ := strconv.Atoi(args[5])
	how := args[6]
	sleepy := len(args) > 7 && args[7] == "sleepy"
	if sleepy {
		makeRingSleepy()
	}
	p, err := r.RingProducer(args[1], capacity)
	if err != nil {
		return err
	}
	fmt.Println("attached")
	buf := make([]byte, 0, maxLen)
	for seq := first; seq < first+count || how == "forever"; seq++ {
		msg := ringTestMsg(buf, seq, maxLen)
		start := time.Now()
		if how == "broken" {
			p.brokenSend(msg)
		} else if err := p.Send(context.Background(), msg); err != nil {
			return err
		}
		if d := time.Since(start); sleepy && d > lostWakeupAfter {
			return fmt.Errorf("Send of message %d took %v: the producer slept through a wake-up", seq, d)
		}
	}
	switch how {
	case "half":
		p.halfSend(ringTestMsg(buf, first+count, maxLen))
		fmt.Println("half")
		time.Sleep(time.Hour)
	default:
		p.Close()
	}
	return nil
}

// ringConsumeChild: args path, name, capacity, maxLen, how. check:
// receive to the end of the stream and print the checker's counts; stop
// N: receive N messages, print "received", wait to be killed.
func ringConsumeChild(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	capacity, _ := strconv.Atoi(args[2])
	maxLen, _ := strconv.Atoi(args[3])
	c, err := r.RingConsumer(args[1], capacity)
	if err != nil {
		return err
	}
	fmt.Println("attached")
	chk := ringStreamCheck{maxLen: maxLen}
	if args[4] == "check" {
		err := receiveAll(c, &chk)
		fmt.Println("result", chk.received, chk.outOfOrder, chk.dups, chk.lost, chk.mangled, err)
		return nil
	}
	n, _ := strconv.Atoi(args[5])
	for range n {
		msg, err := c.Receive(context.Background(), nil)
		if err != nil {
			return err
		}
		chk.check(msg)
	}
	fmt.Println("received", &chk)
	time.Sleep(time.Hour)
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestSharedRingAcrossProcesses streams variable-length messages between
// two processes, in both directions, through a small ring (many wraps),
// and checks order, loss, duplication and every byte. The checker must
// catch a producer that publishes before it writes.
func TestSharedRingAcrossProcesses(t *testing.T) {
	n := scaled(1_000_000)
	const capacity, maxLen = 4096, 300
	t.Run("child-produces", func(t *testing.T) {
		path := tempRegionPath(t)
		r := mustCreate(t, path, 0)
		c, err := r.RingConsumer("q", capacity)
		if err != nil {
			t.Fatal(err)
		}
		child := startChild(t, "ring-produce", path, "q", itoa(capacity), "0", itoa(n), itoa(maxLen), "close")
		chk := ringStreamCheck{maxLen: maxLen}
		if err := receiveAll(c, &chk); err != lockword.ErrRingClosed {
			t.Fatalf("stream ended with %v (%v)\n%s", err, &chk, child.output())
		}
		child.wait(t)
		if !chk.ok() || chk.received != n {
			t.Fatalf("%v, want %d in order", &chk, n)
		}
		t.Logf("%v; %+v", &chk, c.Stats())
	})
	t.Run("parent-produces", func(t *testing.T) {
		path := tempRegionPath(t)
		r := mustCreate(t, path, 0)
		child := startChild(t, "ring-consume", path, "q", itoa(capacity), itoa(maxLen), "check")
		child.expect(t, "attached")
		p, err := r.RingProducer("q", capacity)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 0, maxLen)
		for seq := range uint64(n) {
			if err := p.Send(context.Background(), ringTestMsg(buf, seq, maxLen)); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
		res := child.expect(t, "result ")
		child.wait(t)
		if want := fmt.Sprintf("%d 0 0 0 0 %v", n, lockword.ErrRingClosed); res != want {
			t.Fatalf("child consumer: received, out of order, dups, lost, mangled, end = %s; want %s", res, want)
		}
	})
	t.Run("catches-broken-producer", func(t *testing.T) {
		path := tempRegionPath(t)
		r := mustCreate(t, path, 0)
		c, err := r.RingConsumer("q", 512)
		if err != nil {
			t.Fatal(err)
		}
		child := startChild(t, "ring-produce", path, "q", "512", "0", itoa(max(n/10, 20_000)), "100", "broken")
		chk := ringStreamCheck{maxLen: 100}
		err = receiveAll(c, &chk)
		child.cmd.Process.Kill()
		child.exit()
		if chk.ok() && !errors.Is(err, ErrRingCorrupt) {
			t.Fatalf("a producer that publishes before writing passed: %v, end %v", &chk, err)
		}
		t.Logf("caught: %v; end of stream: %v", &chk, err)
	})
}

// TestSharedRingProducerDeath: the consumer of a dead producer receives
// every message it published, never the one it was writing, then gets
// ErrPeerDead promptly; while the producer lives, however idle, it waits.
// A new producer takes the role over and the stream goes on.
func TestSharedRingProducerDeath(t *testing.T) {
	const capacity, maxLen, count = 1 << 16, 200, 100 // room for all of them
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	c, err := r.RingConsumer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	child := startChild(t, "ring-produce", path, "q", itoa(capacity), "0", itoa(count), itoa(maxLen), "half")
	child.expect(t, "half")
	chk := ringStreamCheck{maxLen: maxLen}
	buf := make([]byte, maxLen)
	for range count {
		msg, err := c.Receive(context.Background(), buf)
		if err != nil {
			t.Fatal(err)
		}
		chk.check(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if msg, err := c.Receive(ctx, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with the producer alive mid-message: %q, %v; want to wait", msg, err)
	}
	child.cmd.Process.Kill()
	child.exit()
	killed := time.Now()
	msg, err := c.Receive(context.Background(), buf)
	latency := time.Since(killed)
	if !errors.Is(err, ErrPeerDead) || !strings.Contains(err.Error(), strconv.Itoa(child.pid())) {
		t.Fatalf("after the producer died: %q, %v; want ErrPeerDead naming PID %d", msg, err, child.pid())
	}
	if latency > time.Second {
		t.Fatalf("ErrPeerDead took %v", latency)
	}
	t.Logf("ErrPeerDead %v after the kill: %v", latency, err)
	if _, err := c.Receive(context.Background(), buf); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("again: %v", err)
	}
	// A new producer carries on.
	p, err := r.RingProducer("q", capacity)
	if err != nil {
		t.Fatalf("taking over a dead producer's role: %v", err)
	}
	for seq := uint64(count); seq < count+50; seq++ {
		if err := p.Send(context.Background(), ringTestMsg(buf, seq, maxLen)); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	if err := receiveAll(c, &chk); err != lockword.ErrRingClosed {
		t.Fatal(err)
	}
	if !chk.ok() || chk.received != count+50 {
		t.Fatalf("%v: the half-written message or the takeover broke the stream", &chk)
	}
}

// TestSharedRingKillProducerMidStream SIGKILLs a producer streaming as
// fast as it can, at a random moment, several times, each time with a new
// producer process taking over: nothing received is ever partial, out of
// order or duplicated, and every death ends in ErrPeerDead.
func TestSharedRingKillProducerMidStream(t *testing.T) {
	const capacity, maxLen = 2048, 500
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	c, err := r.RingConsumer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	chk := ringStreamCheck{maxLen: maxLen}
	buf := make([]byte, maxLen)
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		child := startChild(t, "ring-produce", path, "q", itoa(capacity), strconv.FormatUint(chk.next, 10), "0", itoa(maxLen), "forever")
		// Until it has taken the role over, the role names the dead
		// producer, and Receive rightly says so.
		child.expect(t, "attached")
		before := chk.received
		killAt := time.Now().Add(time.Duration(5+rand.IntN(30)) * time.Millisecond)
		for time.Now().Before(killAt) || chk.received == before {
			msg, err := c.Receive(context.Background(), buf)
			if err != nil {
				t.Fatalf("round %d: %v (%v)\n%s", round, err, &chk, child.output())
			}
			chk.check(msg)
		}
		child.cmd.Process.Kill()
		child.exit()
		err := receiveAll(c, &chk)
		if !errors.Is(err, ErrPeerDead) {
			t.Fatalf("round %d: stream ended with %v", round, err)
		}
		if !chk.ok() {
			t.Fatalf("round %d: %v", round, &chk)
		}
	}
	t.Logf("%d producers killed mid-stream: %v", rounds, &chk)
}

// TestSharedRingConsumerDeath: a producer blocked on a full ring whose
// consumer dies gets ErrPeerDead promptly; while the consumer lives it
// waits. A new consumer receives everything that was left.
func TestSharedRingConsumerDeath(t *testing.T) {
	const capacity, maxLen, first = 1024, 100, 10
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	child := startChild(t, "ring-consume", path, "q", itoa(capacity), itoa(maxLen), "stop", itoa(first))
	child.expect(t, "attached")
	p, err := r.RingProducer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, maxLen)
	seq := uint64(0)
	for ; seq < first; seq++ {
		if err := p.Send(context.Background(), ringTestMsg(buf, seq, maxLen)); err != nil {
			t.Fatal(err)
		}
	}
	if got := child.expect(t, "received "); !strings.Contains(got, "0 out of order, 0 duplicated, 0 lost, 0 mangled") {
		t.Fatalf("child: %s", got)
	}
	for p.Send(doneCtx, ringTestMsg(buf, seq, maxLen)) == nil {
		seq++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Send(ctx, ringTestMsg(buf, seq, maxLen)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("full ring, live consumer: %v; want to wait", err)
	}
	errc := make(chan error)
	go func() { errc <- p.Send(context.Background(), ringTestMsg(nil, seq, maxLen)) }()
	time.Sleep(20 * time.Millisecond)
	child.cmd.Process.Kill()
	child.exit()
	killed := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrPeerDead) {
			t.Fatalf("Send after the consumer died: %v", err)
		}
		t.Logf("ErrPeerDead %v after the kill: %v", time.Since(killed), err)
	case <-time.After(10 * time.Second):
		t.Fatal("a producer blocked on a dead consumer's full ring waited on")
	}
	c, err := r.RingConsumer("q", capacity)
	if err != nil {
		t.Fatalf("a new consumer: %v", err)
	}
	// The ring is still full: the message that failed goes out once the
	// new consumer makes room, so send it from another goroutine.
	go func() {
		if err := p.Send(context.Background(), ringTestMsg(nil, seq, maxLen)); err != nil {
			errc <- err
			return
		}
		p.Close()
		errc <- nil
	}()
	chk := ringStreamCheck{maxLen: maxLen, next: first}
	if err := receiveAll(c, &chk); err != lockword.ErrRingClosed {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !chk.ok() || chk.next != seq+1 {
		t.Fatalf("new consumer: %v, want %d..%d", &chk, first, seq)
	}
}

// TestSharedRingRegionCloseRefusedWhileWaiting: unmapping a ring with a
// goroutine asleep in it would fault when it wakes.
func TestSharedRingRegionCloseRefusedWhileWaiting(t *testing.T) {
	r := mustCreate(t, tempRegionPath(t), 0)
	c, err := r.RingConsumer("q", 64)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Receive(ctx, nil); close(done) }()
	for c.e.notEmpty.Load()&ringindex.Sleeping == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := r.Close(); !errors.Is(err, ErrRegionBusy) {
		t.Fatalf("Close with a goroutine in Receive = %v", err)
	}
	cancel()
	<-done
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// makeRingSleepy makes every wait of the shared ring sleep at once, without
// spinning or yielding, in kernel sleeps of a minute: a wake-up that is not
// sent then leaves a side asleep for that minute (or until its context
// ends), instead of for one 10 ms slice, and a call that takes longer than
// lostWakeupAfter has slept through one. It returns a function that undoes
// it.
const lostWakeupAfter = 10 * time.Second

func makeRingSleepy() (restore func()) {
	spin, yield, slice := ringindex.SpinIterations, ringindex.YieldRounds, ringSleepSlice
	ringindex.SpinIterations, ringindex.YieldRounds, ringSleepSlice = 0, 0, time.Minute
	return func() { ringindex.SpinIterations, ringindex.YieldRounds, ringSleepSlice = spin, yield, slice }
}

// noWakeSleeper is a broken wake-up: it sleeps as the real one does, and
// its wake does nothing.
type noWakeSleeper struct{ ringindex.Sleeper }

func (noWakeSleeper) Wake(*atomic.Uint32) {}

// TestSharedRingNoLostWakeups streams messages between two processes
// through a small ring with every wait a kernel sleep of up to a minute, so
// that both sides sleep thousands of times and a single lost wake-up fails
// the test (a Send or Receive that takes lostWakeupAfter, while the other
// side streams) rather than costing one 10 ms slice. A producer that
// forgets to wake must be caught.
func TestSharedRingNoLostWakeups(t *testing.T) {
	t.Run("across-processes", func(t *testing.T) {
		t.Cleanup(makeRingSleepy())
		n := scaled(100_000)
		const capacity, maxLen = 256, 100
		path := tempRegionPath(t)
		r := mustCreate(t, path, 0)
		c, err := r.RingConsumer("q", capacity)
		if err != nil {
			t.Fatal(err)
		}
		child := startChild(t, "ring-produce", path, "q", itoa(capacity), "0", itoa(n), itoa(maxLen), "close", "sleepy")
		chk := ringStreamCheck{maxLen: maxLen}
		buf := make([]byte, maxLen)
		for {
			start := time.Now()
			msg, err := c.Receive(context.Background(), buf)
			if errors.Is(err, lockword.ErrRingClosed) {
				break
			}
			if err != nil {
				t.Fatalf("after %v: %v\n%s", &chk, err, child.output())
			}
			if d := time.Since(start); d > lostWakeupAfter {
				t.Fatalf("after %v: Receive took %v, stats %+v: the consumer slept through a wake-up", &chk, d, c.Stats())
			}
			chk.check(msg)
		}
		child.wait(t)
		s := c.Stats()
		if !chk.ok() || chk.received != n {
			t.Fatalf("%v, want %d", &chk, n)
		}
		if s.ConsumerSleeps < 10 || s.ProducerSleeps < 10 {
			t.Fatalf("stats %+v: the sides hardly slept, so wake-ups were not tested", s)
		}
		t.Logf("%d messages, %+v", n, s)
	})
	t.Run("catches-lost-wakeup", func(t *testing.T) {
		t.Cleanup(makeRingSleepy())
		_, p, c := ringPair(t, 256)
		p.e.sl = noWakeSleeper{p.e.sl}
		var stop atomic.Bool
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			for !stop.Load() {
				// Send once the consumer is asleep in the kernel.
				if c.e.notEmpty.Load()&ringindex.Sleeping == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				time.Sleep(10 * time.Millisecond)
				if p.Send(context.Background(), []byte("hello")) != nil {
					return
				}
			}
		}()
		defer func() { stop.Store(true); <-stopped }() // before the region is unmapped
		for round := 0; ; round++ {
			// The deadline ends a sleep that nobody ends (the message
			// is then received after it): the test's minute, shortened.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			start := time.Now()
			_, err := c.Receive(ctx, nil)
			d := time.Since(start)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			if d > 900*time.Millisecond {
				t.Logf("caught: Receive took %v for a message sent after ~10ms", d)
				return
			}
			if round == 4 {
				t.Fatal("a producer that never wakes the consumer passed 5 rounds: the check cannot fail")
			}
		}
	})
}

// TestRingAndSeqLockObjectsOfBadSize: a region file whose table gives a
// ring or a seqlock object a size that no constructor makes (too small for
// the fixed words, at the very end of the file) opens, inspects without
// panicking or reading past the object, and every constructor refuses it
// with ErrObjectBounds.
func TestRingAndSeqLockObjectsOfBadSize(t *testing.T) {
	for _, kind := range []objectKind{kindRing, kindSeqLock} {
		b := validRegionBytes(t)
		e := b[regionTableOffset+1*tableEntrySize:][:tableEntrySize] // "data"
		ne.PutUint32(e[entryKind:], uint32(kind))
		ne.PutUint32(e[entrySize:], 8)
		// At the end of the file, aligned for the kind: the object's
		// fixed words would lie past it.
		ne.PutUint64(e[entryOffset:], uint64(len(b))-uint64(objectKinds[kind].align))
		reseal(b)
		path := filepath.Join(t.TempDir(), "r")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		info, err := Inspect(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range info.Objects {
			if o.Name == "data" && o.State != "" {
				t.Errorf("kind %d of 8 bytes inspected as a lock: %+v", kind, o)
			}
		}
		r, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.RingConsumer("data", MinSharedRingCapacity); !errors.Is(err, ErrObjectBounds) && !errors.Is(err, ErrObjectKind) {
			t.Errorf("kind %d: RingConsumer = %v", kind, err)
		}
		if _, err := NewSeqLock[uint64](r, "data"); !errors.Is(err, ErrObjectBounds) && !errors.Is(err, ErrObjectKind) {
			t.Errorf("kind %d: shm.SeqLock = %v", kind, err)
		}
		r.Close()
	}
}

// TestSharedRingRestart: a closed ring opens again for a new producer and
// consumer once its stream is over (every message received, both sides
// gone), in either start order, also across processes; before that, it
// stays closed: a stream's last messages still reach a consumer that
// attaches late, followed by ErrRingClosed.
func TestSharedRingRestart(t *testing.T) {
	const capacity = 256
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	ctx := context.Background()
	send := func(p *RingProducer, msgs ...string) {
		t.Helper()
		for _, m := range msgs {
			if err := p.Send(ctx, []byte(m)); err != nil {
				t.Fatalf("Send %q: %v", m, err)
			}
		}
	}
	recv := func(c *RingConsumer, want ...string) {
		t.Helper()
		for _, w := range want {
			msg, err := c.Receive(ctx, nil)
			if err != nil || string(msg) != w {
				t.Fatalf("Receive = %q, %v; want %q", msg, err, w)
			}
		}
	}
	closedAfter := func(c *RingConsumer, want ...string) {
		t.Helper()
		recv(c, want...)
		if _, err := c.Receive(ctx, nil); err != lockword.ErrRingClosed {
			t.Fatalf("Receive at the end of the stream = %v, want lockword.ErrRingClosed", err)
		}
	}
	producer := func() *RingProducer {
		t.Helper()
		p, err := r.RingProducer("q", capacity)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	consumer := func() *RingConsumer {
		t.Helper()
		c, err := r.RingConsumer("q", capacity)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// Stream 1, then stream 2 with the consumer first, then stream 3 with
	// the producer first.
	p, c := producer(), consumer()
	send(p, "a1", "a2")
	p.Close()
	closedAfter(c, "a1", "a2")
	c.Close()
	c = consumer()
	p = producer()
	send(p, "b1")
	recv(c, "b1")
	p.Close()
	closedAfter(c)
	c.Close()
	p = producer()
	send(p, "c1", "c2")
	p.Close()
	// Closed, not yet received: a new producer must not reopen it.
	p2 := producer()
	if err := p2.Send(ctx, []byte("too early")); err != lockword.ErrRingClosed {
		t.Fatalf("Send on a closed stream whose last messages nobody received = %v, want lockword.ErrRingClosed", err)
	}
	c = consumer()
	closedAfter(c, "c1", "c2")
	c.Close()
	p2.Detach()

	// A consumer that closes early discards the rest: the next pair sees
	// only its own messages.
	p, c = producer(), consumer()
	send(p, "d1", "d2", "d3")
	recv(c, "d1")
	c.Close()
	if err := p.Send(ctx, []byte("d4")); err != lockword.ErrRingClosed {
		t.Fatalf("Send after the consumer closed = %v", err)
	}
	p.Close()
	p, c = producer(), consumer()
	send(p, "e1")
	p.Close()
	closedAfter(c, "e1")
	c.Close()

	// Across processes: the same producer/consumer pair of programs, run
	// twice on one region (the report that found this: the second run's
	// consumer got 0 messages, its producer "ring closed").
	const n, maxLen = 2000, 100
	for run := range 2 {
		prod := startChild(t, "ring-produce", path, "q", itoa(capacity), "0", itoa(n), itoa(maxLen), "close")
		cons := startChild(t, "ring-consume", path, "q", itoa(capacity), itoa(maxLen), "check")
		res := cons.expect(t, "result ")
		prod.wait(t)
		cons.wait(t)
		if want := fmt.Sprintf("%d 0 0 0 0 %v", n, lockword.ErrRingClosed); res != want {
			t.Fatalf("run %d: consumer got (received, out of order, dups, lost, mangled, end) %s; want %s", run+1, res, want)
		}
	}
}
