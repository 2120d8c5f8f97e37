//go:build linux

package lockword

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// ---- Messages and the stream checker ----

// mix64 is splitmix64's finalizer: message lengths and contents are drawn
// from the sequence number, so that a receiver can check a message alone.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// ringTestMsg appends to buf[:0] message number seq: its 8-byte sequence
// number, then 0 to maxLen-8 bytes (drawn from seq) that depend on seq and
// their position.
func ringTestMsg(buf []byte, seq uint64, maxLen int) []byte {
	n := 8 + int(mix64(seq)%uint64(maxLen-8+1))
	buf = ne.AppendUint64(buf[:0], seq)
	for j := 8; j < n; j++ {
		buf = append(buf, byte(seq*131+uint64(j)))
	}
	return buf
}

// ringStreamCheck checks a stream of ringTestMsg messages: every number
// once, in order, each message whole.
type ringStreamCheck struct {
	maxLen                          int
	next                            uint64 // the number expected next
	received                        int
	outOfOrder, dups, lost, mangled int
	want                            []byte
}

func (c *ringStreamCheck) check(msg []byte) {
	c.received++
	if len(msg) < 8 {
		c.mangled++
		return
	}
	seq := ne.Uint64(msg)
	if c.want = ringTestMsg(c.want, seq, c.maxLen); string(c.want) != string(msg) {
		c.mangled++
	}
	switch {
	case seq == c.next:
		c.next++
	case seq < c.next:
		c.dups++
		c.outOfOrder++
	default:
		c.outOfOrder++
		c.lost += int(seq - c.next)
		c.next = seq + 1
	}
}

func (c *ringStreamCheck) ok() bool { return c.outOfOrder+c.dups+c.lost+c.mangled == 0 }

func (c *ringStreamCheck) String() string {
	return fmt.Sprintf("received %d (next %d): %d out of order, %d duplicated, %d lost, %d mangled",
		c.received, c.next, c.outOfOrder, c.dups, c.lost, c.mangled)
}

// receiveAll receives until the stream ends and checks it; it returns the
// error that ended it.
func receiveAll(c *RingConsumer, chk *ringStreamCheck) error {
	buf := make([]byte, c.MaxMessage())
	for {
		msg, err := c.Receive(context.Background(), buf)
		if err != nil {
			return err
		}
		chk.check(msg)
	}
}

// ---- Helpers ----

func ringPair(t *testing.T, capacity int) (*Region, *RingProducer, *RingConsumer) {
	t.Helper()
	r := mustCreate(t, tempRegionPath(t), 0)
	p, err := r.RingProducer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.RingConsumer("q", capacity)
	if err != nil {
		t.Fatal(err)
	}
	return r, p, c
}

// ringObject returns the bytes of the ring object named name.
func ringObject(r *Region, name string) []byte {
	o := r.objects[name]
	return r.data[o.offset : o.offset+uint64(o.size)]
}

var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// halfSend writes msg's record past tail without publishing it: what a
// producer killed in the middle of Send leaves behind.
func (p *RingProducer) halfSend(msg []byte) {
	off := p.tail & p.e.mask
	d := p.e.data
	ne.PutUint32(d[off+recLength:], uint32(len(msg)))
	ne.PutUint32(d[off+recType:], recMessage)
	copy(d[off+recHeaderSize:p.e.capacity], msg[:len(msg)/2])
}

// brokenSend is Send with the classic SPSC bug: it publishes each record
// (stores tail) before it writes it, and dawdles in between, as a producer
// preempted there would. The stream checks must catch it.
func (p *RingProducer) brokenSend(msg []byte) {
	rec := recordSize(uint64(len(msg)))
	d := p.e.data
	for {
		t := p.tail
		off := t & p.e.mask
		size, typ, n := rec, uint32(recMessage), uint64(len(msg))
		if p.e.capacity-off < rec {
			size, typ, n = p.e.capacity-off, recPadding, p.e.capacity-off-recHeaderSize
		}
		for !p.refreshHead(size) {
			runtime.Gosched()
		}
		p.tail = t + size
		p.e.tail.Store(p.tail) // BUG: published before it is written
		if p.e.notEmpty.Load()&ringSleeping != 0 {
			wakeSide(p.e.notEmpty, p.e.wakes, p.e.sl)
		}
		runtime.Gosched()
		procyield(64)
		ne.PutUint32(d[off+recLength:], uint32(n))
		ne.PutUint32(d[off+recType:], typ)
		if typ == recMessage {
			copy(d[off+recHeaderSize:], msg)
			return
		}
	}
}

// ---- Layout ----

// TestSharedRingLayout pins the shared ring's layout as docs/abi.md gives
// it, and its false-sharing distances.
func TestSharedRingLayout(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"kind", int(kindRing), 6}, {"producer role", shringProducerRole, 0}, {"consumer role", shringConsumerRole, 4},
		{"tail", shringTail, 128}, {"notEmpty", shringNotEmpty, 136},
		{"producer sleeps", shringProducerSleeps, 144}, {"producer wakes", shringProducerWakes, 152},
		{"head", shringHead, 256}, {"notFull", shringNotFull, 264},
		{"consumer sleeps", shringConsumerSleeps, 272}, {"consumer wakes", shringConsumerWakes, 280},
		{"messages sent", shringMessagesSent, 160}, {"messages received", shringMessagesRecvd, 288},
		{"data", shringData, 512}, {"alignment", shringAlign, 128},
		{"record length", recLength, 0}, {"record type", recType, 4}, {"record header", recHeaderSize, 8},
		{"message type", recMessage, 0}, {"padding type", recPadding, 1},
		{"sleeping bit", ringSleeping, 1}, {"closed bit", ringClosed, 2},
		{"min capacity", MinSharedRingCapacity, 64}, {"max capacity", MaxSharedRingCapacity, 1 << 30},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, docs/abi.md says %d", c.name, c.got, c.want)
		}
	}
	// What each side writes on every message lies on its own pair of
	// cache lines, away from the other side's and from the records.
	lines := []int{shringProducerRole, shringTail, shringHead, shringData}
	for i := 1; i < len(lines); i++ {
		if lines[i]-lines[i-1] < falseSharingRange {
			t.Errorf("words at %d and %d share a false-sharing range", lines[i-1], lines[i])
		}
	}
	if shringConsumerWakes+8 > shringHead+falseSharingRange || shringProducerWakes+8 > shringTail+falseSharingRange {
		t.Error("a side's words spill out of its lines")
	}
	r, p, _ := ringPair(t, 256)
	o := r.objects["q"]
	if o.offset%shringAlign != 0 || o.size != shringData+256 {
		t.Errorf("ring object at %d, %d bytes", o.offset, o.size)
	}
	if uintptr(unsafe.Pointer(&p.e.data[0]))%8 != 0 {
		t.Error("records not 8-aligned")
	}
	if p.Cap() != 256 || p.MaxMessage() != 248 || recordSize(0) != 8 || recordSize(1) != 16 || recordSize(8) != 16 {
		t.Error("capacity arithmetic")
	}
}

// ---- One process ----

func TestSharedRingSendReceive(t *testing.T) {
	_, p, c := ringPair(t, 256)
	// Every length, sent and received one by one: the records wrap with
	// padding many times over. A message too long for the space left
	// before the end of the buffer and for the whole ring with that
	// padding in it goes out as padding first (Send returns, here, with
	// ctx's error) and needs the consumer to take the padding before it
	// fits at offset 0.
	var chk ringStreamCheck
	chk.maxLen = 248
	buf := make([]byte, 0, 256)
	for seq := range uint64(2000) {
		msg := ringTestMsg(buf, seq, 248)
		for {
			err := p.Send(doneCtx, msg)
			if err == nil {
				break
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			got, err := c.Receive(doneCtx, nil)
			if err == nil {
				chk.check(got)
			} else if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
		if seq%3 != 0 {
			got, err := c.Receive(doneCtx, nil)
			if err != nil {
				t.Fatal(err)
			}
			chk.check(got)
		}
	}
	for chk.received < 2000 {
		got, err := c.Receive(doneCtx, nil)
		if err != nil {
			t.Fatal(err, &chk)
		}
		chk.check(got)
	}
	if !chk.ok() || chk.received != 2000 {
		t.Fatal(&chk)
	}
	// Several in flight at once, then drained.
	for round := range 50 {
		var sent []string
		for i := 0; ; i++ {
			msg := []byte(strings.Repeat(strconv.Itoa(round), i%40))
			if err := p.Send(doneCtx, msg); err != nil {
				if !errors.Is(err, context.Canceled) {
					t.Fatal(err)
				}
				break
			}
			sent = append(sent, string(msg))
		}
		for _, want := range sent {
			got, err := c.Receive(doneCtx, buf)
			if err != nil || string(got) != want {
				t.Fatalf("round %d: got %q, %v, want %q", round, got, err, want)
			}
		}
		if _, err := c.Receive(doneCtx, buf); !errors.Is(err, context.Canceled) {
			t.Fatalf("Receive on an empty ring with a done ctx = %v", err)
		}
	}
	// The empty message, and the largest.
	if err := p.Send(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Receive(context.Background(), buf); err != nil || len(got) != 0 {
		t.Fatalf("empty message: %q, %v", got, err)
	}
	big := []byte(strings.Repeat("x", p.MaxMessage()))
	// Not at offset 0: the padding goes out alone first, and the message
	// waits for the consumer to free the whole ring.
	if err := p.Send(doneCtx, big); !errors.Is(err, context.Canceled) {
		t.Fatalf("largest message with the ring part used: %v, want to wait", err)
	}
	if _, err := c.Receive(doneCtx, buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("the padding alone delivered something: %v", err)
	}
	if err := p.Send(doneCtx, big); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Receive(doneCtx, buf); err != nil || string(got) != string(big) {
		t.Fatalf("largest message: %d bytes, %v", len(got), err)
	}
	if err := p.Send(doneCtx, append(big, 'x')); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("message of MaxMessage+1 bytes: %v, want ErrMessageTooLarge", err)
	}
}

// TestSharedRingWrap crosses the wrap of the 64-bit indices.
func TestSharedRingWrap(t *testing.T) {
	r := mustCreate(t, tempRegionPath(t), 0)
	if _, err := r.Bytes("spacer", 8); err != nil {
		t.Fatal(err)
	}
	p, err := r.RingProducer("q", 128)
	if err != nil {
		t.Fatal(err)
	}
	p.Detach()
	obj := ringObject(r, "q")
	start := uint64(math.MaxUint64 - 1000 + 1) // a multiple of 8
	word64(obj, shringHead).Store(start)
	word64(obj, shringTail).Store(start)
	p, err = r.RingProducer("q", 128)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.RingConsumer("q", 128)
	if err != nil {
		t.Fatal(err)
	}
	chk := ringStreamCheck{maxLen: 60}
	buf := make([]byte, 128)
	for seq := range uint64(500) {
		for {
			err := p.Send(doneCtx, ringTestMsg(buf, seq, 60))
			if err == nil {
				break
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			// Padding alone is no message: the done ctx's error then.
			msg, err := c.Receive(doneCtx, nil)
			if err == nil {
				chk.check(msg)
			} else if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
	}
	p.Close()
	if err := receiveAll(c, &chk); err != ErrRingClosed {
		t.Fatalf("end of stream: %v", err)
	}
	if !chk.ok() || chk.received != 500 {
		t.Fatal(&chk)
	}
	if h := word64(obj, shringHead).Load(); h > start || h < 1000 {
		t.Fatalf("head %d: the stream did not cross the wrap", h)
	}
}

func TestSharedRingBlocking(t *testing.T) {
	_, p, c := ringPair(t, 1024)
	// A consumer asleep on an empty ring is woken by one wake-up.
	got := make(chan string)
	go func() {
		msg, err := c.Receive(context.Background(), nil)
		if err != nil {
			msg = []byte(err.Error())
		}
		got <- string(msg)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for c.e.notEmpty.Load()&ringSleeping == 0 || p.Stats().ConsumerSleeps == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the consumer never went to sleep")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(25 * time.Millisecond) // through a slice or two: it goes back to sleep
	if err := p.Send(context.Background(), []byte("wake up")); err != nil {
		t.Fatal(err)
	}
	if msg := <-got; msg != "wake up" {
		t.Fatalf("woken consumer got %q", msg)
	}
	if s := p.Stats(); s.Wakes != 1 || s.ProducerSleeps != 0 {
		t.Fatalf("after one sleeping consumer: %+v, want exactly 1 wake", s)
	}
	// A producer asleep on a full ring is woken when room appears.
	msg := make([]byte, 100)
	n := 0
	for p.Send(doneCtx, msg) == nil {
		n++
	}
	sent := make(chan error)
	go func() { sent <- p.Send(context.Background(), msg) }()
	for p.e.notFull.Load()&ringSleeping == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the producer never went to sleep")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Receive(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatalf("woken producer: %v", err)
	}
	for range n {
		if _, err := c.Receive(doneCtx, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Deadlines: both sides give up on time, take nothing, leave no bit.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := c.Receive(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive on an empty ring past its deadline: %v", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 5*time.Second {
		t.Fatalf("Receive gave up after %v, deadline 30ms", d)
	}
	if c.e.notEmpty.Load()&ringSleeping != 0 {
		t.Fatal("a consumer that gave up left its sleep bit")
	}
	for p.Send(doneCtx, msg) == nil {
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel2)
	start = time.Now()
	if err := p.Send(ctx2, msg); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send on a full ring, cancelled: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancellation noticed after %v", d)
	}
	//lint:ignore SA1012 testing the nil-context error
	if err := p.Send(nil, msg); err != ErrNilContext { //nolint:staticcheck
		t.Fatalf("Send on a full ring with nil ctx = %v", err)
	}
	// With a message there, a nil ctx is still refused, and takes nothing.
	//lint:ignore SA1012 testing the nil-context error
	if _, err := c.Receive(nil, nil); err != ErrNilContext { //nolint:staticcheck
		t.Fatalf("Receive on a full ring with nil ctx = %v", err)
	}
	if _, err := c.Receive(doneCtx, nil); err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 testing the nil-context error
	if err := p.Send(nil, msg); err != ErrNilContext { //nolint:staticcheck
		t.Fatalf("Send with room and nil ctx = %v", err)
	}
}

// TestSharedRingWakesOnlySleepers: traffic in which no side ever waits
// makes no wake-up calls (no system calls at all).
func TestSharedRingWakesOnlySleepers(t *testing.T) {
	_, p, c := ringPair(t, 512)
	msg := make([]byte, 40)
	for i := range 20_000 {
		for p.Send(doneCtx, msg) != nil {
			if _, err := c.Receive(doneCtx, nil); err != nil {
				t.Fatal(err)
			}
		}
		if i%3 == 0 {
			c.Receive(doneCtx, nil)
		}
	}
	// The done contexts above went as far as announcing a sleep, never
	// into one; nothing was woken.
	if s := p.Stats(); s.Wakes != 0 {
		t.Fatalf("stats after traffic without sleepers: %+v, want no wake-ups", s)
	}
}

func TestSharedRingClose(t *testing.T) {
	_, p, c := ringPair(t, 256)
	for i := range 5 {
		if err := p.Send(context.Background(), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A consumer blocked on the empty ring after draining is released
	// by Close.
	p.Close()
	for i := range 5 {
		if msg, err := c.Receive(context.Background(), nil); err != nil || msg[0] != byte(i) {
			t.Fatalf("draining after Close: %v, %v", msg, err)
		}
	}
	if _, err := c.Receive(context.Background(), nil); err != ErrRingClosed {
		t.Fatalf("Receive on a closed, drained ring = %v", err)
	}
	if err := p.Send(context.Background(), []byte("late")); !errors.Is(err, ErrRingClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
	// A closed ring stays closed, for a new producer too.
	r2 := p.e.r
	p2, err := r2.RingProducer("q", 256)
	if err != nil {
		t.Fatalf("attaching after the producer closed: %v", err)
	}
	if err := p2.Send(context.Background(), []byte("late")); !errors.Is(err, ErrRingClosed) {
		t.Fatalf("Send by a new producer on a closed ring = %v", err)
	}

	// The consumer closing wakes a producer blocked on a full ring.
	_, p, c = ringPair(t, 256)
	for p.Send(doneCtx, make([]byte, 50)) == nil {
	}
	errc := make(chan error)
	go func() { errc <- p.Send(context.Background(), make([]byte, 50)) }()
	for p.e.notFull.Load()&ringSleeping == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Close()
	if err := <-errc; !errors.Is(err, ErrRingClosed) {
		t.Fatalf("Send blocked when the consumer closed = %v", err)
	}
	if _, err := c.Receive(doneCtx, nil); !errors.Is(err, ErrRingClosed) {
		t.Fatalf("Receive on a closed handle = %v", err)
	}
}

func TestSharedRingRoles(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	p, err := r.RingProducer("q", 256)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RingProducer("q", 256); !errors.Is(err, ErrRingBusy) {
		t.Fatalf("second producer in this process: %v, want ErrRingBusy", err)
	}
	// Another handle of the region (as another process would attach).
	r2, err := OpenRegion(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, err := r2.RingProducer("q", 256); !errors.Is(err, ErrRingBusy) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second producer through another handle: %v, want ErrRingBusy naming our PID", err)
	}
	c, err := r2.RingConsumer("q", 256)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"one", "two"} {
		if err := p.Send(context.Background(), []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// Detach hands the role over without ending the stream.
	p.Detach()
	if err := p.Send(context.Background(), []byte("x")); !errors.Is(err, ErrRingClosed) {
		t.Fatalf("Send on a detached handle = %v", err)
	}
	p2, err := r2.RingProducer("q", 256)
	if err != nil {
		t.Fatalf("attach after Detach: %v", err)
	}
	if err := p2.Send(context.Background(), []byte("three")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two", "three"} {
		if got, err := c.Receive(context.Background(), nil); err != nil || string(got) != want {
			t.Fatalf("got %q, %v, want %q", got, err, want)
		}
	}
	// A handle of a region that was closed is dead: its role can be
	// taken over.
	c.Detach()
	r3, err := OpenRegion(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r3.RingConsumer("q", 256); err != nil {
		t.Fatal(err)
	}
	if err := r3.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RingConsumer("q", 256); err != nil {
		t.Fatalf("taking over the role of a closed region's handle: %v", err)
	}

	tooBig := MaxSharedRingCapacity
	tooBig <<= 1 // not a constant: 2^31 overflows int on 32-bit platforms
	for _, c := range []struct {
		capacity int
		want     error
	}{{0, ErrObjectBounds}, {32, ErrObjectBounds}, {100, ErrObjectBounds}, {512, ErrObjectBounds}, {tooBig, ErrObjectBounds}} {
		if _, err := r.RingConsumer("q", c.capacity); !errors.Is(err, c.want) {
			t.Errorf("RingConsumer capacity %d: %v, want %v", c.capacity, err, c.want)
		}
	}
	if _, err := r.Mutex("q"); !errors.Is(err, ErrObjectKind) {
		t.Fatalf("Mutex on a ring: %v", err)
	}
	if _, err := r.RingProducer("orders", 256); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Bytes("data", 8); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RingProducer("data", 256); !errors.Is(err, ErrObjectKind) {
		t.Fatalf("RingProducer on a bytes object: %v", err)
	}
}

// TestSharedRingCorrupt: every impossible index or header is
// ErrRingCorrupt, sticky, with nothing delivered.
func TestSharedRingCorrupt(t *testing.T) {
	const capacity = 256
	type setup func(obj []byte)
	at := func(off uint64, length, typ uint32) setup {
		return func(obj []byte) {
			ne.PutUint32(obj[shringData+off+recLength:], length)
			ne.PutUint32(obj[shringData+off+recType:], typ)
		}
	}
	indices := func(h, tl uint64) setup {
		return func(obj []byte) {
			word64(obj, shringHead).Store(h)
			word64(obj, shringTail).Store(tl)
		}
	}
	both := func(a, b setup) setup { return func(obj []byte) { a(obj); b(obj) } }
	for _, c := range []struct {
		name     string
		before   setup // before the consumer attaches
		after    setup // after
		atAttach bool  // the consumer's attach fails
	}{
		{name: "tail beyond capacity", before: indices(0, capacity+8), atAttach: true},
		{name: "tail behind head", before: indices(64, 8), atAttach: true},
		{name: "tail misaligned", before: indices(0, 12), atAttach: true},
		{name: "head misaligned", before: indices(4, 12), atAttach: true},
		{name: "tail jumps ahead", after: func(obj []byte) { word64(obj, shringTail).Store(capacity + 16) }},
		{name: "tail goes back", before: indices(64, 64), after: func(obj []byte) { word64(obj, shringTail).Store(56) }},
		{name: "tail misaligned later", after: func(obj []byte) { word64(obj, shringTail).Store(20) }},
		{name: "length beyond published", after: both(at(0, 17, recMessage), indices(0, 24))},
		{name: "length beyond the ring", after: both(at(0, 0xFFFFFFF0, recMessage), indices(0, 256))},
		{name: "length past the end", before: indices(192, 192), after: both(at(192, 64, recMessage), indices(192, 192+128))},
		{name: "unknown type", after: both(at(0, 0, 7), indices(0, 8))},
		{name: "padding at offset 0", after: both(at(0, capacity-8, recPadding), indices(0, 256))},
		{name: "padding short of the end", before: indices(128, 128), after: both(at(128, 64, recPadding), indices(128, 256))},
		{name: "padding beyond published", before: indices(128, 128), after: both(at(128, 120, recPadding), indices(128, 200))},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mustCreate(t, tempRegionPath(t), 0)
			p, err := r.RingProducer("q", capacity)
			if err != nil {
				t.Fatal(err)
			}
			obj := ringObject(r, "q")
			if c.before != nil {
				c.before(obj)
			}
			cons, err := r.RingConsumer("q", capacity)
			if c.atAttach {
				if !errors.Is(err, ErrRingCorrupt) {
					t.Fatalf("attach: %v, want ErrRingCorrupt", err)
				}
				if _, err := r.RingProducer("x", capacity); err != nil { // the role was given back
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.after(obj)
			for range 2 { // sticky
				msg, err := cons.Receive(context.Background(), nil)
				if !errors.Is(err, ErrRingCorrupt) || len(msg) != 0 {
					t.Fatalf("Receive: %q, %v, want ErrRingCorrupt", msg, err)
				}
			}
			t.Log(cons.e.err)
			_ = p
		})
	}
	// The producer validates head the same way.
	for _, bad := range []func(tail uint64) uint64{
		func(tail uint64) uint64 { return tail + 8 },            // ahead of tail
		func(tail uint64) uint64 { return tail - capacity - 8 }, // more than capacity behind
		func(uint64) uint64 { return 4 },                        // misaligned
	} {
		r, p, _ := ringPair(t, capacity)
		obj := ringObject(r, "q")
		for p.Send(doneCtx, make([]byte, 24)) == nil { // full: Send must read head
		}
		h := bad(p.tail)
		word64(obj, shringHead).Store(h)
		if err := p.Send(context.Background(), make([]byte, 24)); !errors.Is(err, ErrRingCorrupt) {
			t.Fatalf("head %d: Send = %v, want ErrRingCorrupt", h, err)
		}
	}
}

// ---- Across processes ----

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
	r, err := OpenRegion(args[0], nil)
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
	r, err := OpenRegion(args[0], nil)
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
		if err := receiveAll(c, &chk); err != ErrRingClosed {
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
		if want := fmt.Sprintf("%d 0 0 0 0 %v", n, ErrRingClosed); res != want {
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
	if err := receiveAll(c, &chk); err != ErrRingClosed {
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
	if err := receiveAll(c, &chk); err != ErrRingClosed {
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
	for c.e.notEmpty.Load()&ringSleeping == 0 {
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
	spin, yield, slice := ringSpinIterations, ringYieldRounds, ringSleepSlice
	ringSpinIterations, ringYieldRounds, ringSleepSlice = 0, 0, time.Minute
	return func() { ringSpinIterations, ringYieldRounds, ringSleepSlice = spin, yield, slice }
}

// noWakeSleeper is a broken wake-up: it sleeps as the real one does, and
// its wake does nothing.
type noWakeSleeper struct{ ringSleeper }

func (noWakeSleeper) wake(*atomic.Uint32) {}

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
			if errors.Is(err, ErrRingClosed) {
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
				if c.e.notEmpty.Load()&ringSleeping == 0 {
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
		info, err := InspectRegion(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range info.Objects {
			if o.Name == "data" && o.State != "" {
				t.Errorf("kind %d of 8 bytes inspected as a lock: %+v", kind, o)
			}
		}
		r, err := OpenRegion(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.RingConsumer("data", MinSharedRingCapacity); !errors.Is(err, ErrObjectBounds) && !errors.Is(err, ErrObjectKind) {
			t.Errorf("kind %d: RingConsumer = %v", kind, err)
		}
		if _, err := RegionSeqLock[uint64](r, "data"); !errors.Is(err, ErrObjectBounds) && !errors.Is(err, ErrObjectKind) {
			t.Errorf("kind %d: RegionSeqLock = %v", kind, err)
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
		if _, err := c.Receive(ctx, nil); err != ErrRingClosed {
			t.Fatalf("Receive at the end of the stream = %v, want ErrRingClosed", err)
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
	if err := p2.Send(ctx, []byte("too early")); err != ErrRingClosed {
		t.Fatalf("Send on a closed stream whose last messages nobody received = %v, want ErrRingClosed", err)
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
	if err := p.Send(ctx, []byte("d4")); err != ErrRingClosed {
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
		if want := fmt.Sprintf("%d 0 0 0 0 %v", n, ErrRingClosed); res != want {
			t.Fatalf("run %d: consumer got (received, out of order, dups, lost, mangled, end) %s; want %s", run+1, res, want)
		}
	}
}
