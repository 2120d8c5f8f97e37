//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/ringindex"
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
		if p.e.notEmpty.Load()&ringindex.Sleeping != 0 {
			ringindex.WakeSide(p.e.notEmpty, p.e.wakes, p.e.sl)
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
	checkABI(t, []abiField[int]{
		{"kind", int(kindRing), 6}, {"producer role", shringProducerRole, 0}, {"consumer role", shringConsumerRole, 4},
		{"tail", shringTail, 128}, {"notEmpty", shringNotEmpty, 136},
		{"producer sleeps", shringProducerSleeps, 144}, {"producer wakes", shringProducerWakes, 152},
		{"head", shringHead, 256}, {"notFull", shringNotFull, 264},
		{"consumer sleeps", shringConsumerSleeps, 272}, {"consumer wakes", shringConsumerWakes, 280},
		{"messages sent", shringMessagesSent, 160}, {"messages received", shringMessagesRecvd, 288},
		{"data", shringData, 512}, {"alignment", shringAlign, 128},
		{"record length", recLength, 0}, {"record type", recType, 4}, {"record header", recHeaderSize, 8},
		{"message type", recMessage, 0}, {"padding type", recPadding, 1},
		{"sleeping bit", ringindex.Sleeping, 1}, {"closed bit", ringindex.Closed, 2},
		{"min capacity", MinSharedRingCapacity, 64}, {"max capacity", MaxSharedRingCapacity, 1 << 30},
	})
	// What each side writes on every message lies on its own pair of
	// cache lines, away from the other side's and from the records.
	lines := []int{shringProducerRole, shringTail, shringHead, shringData}
	for i := 1; i < len(lines); i++ {
		if lines[i]-lines[i-1] < ringindex.FalseSharingRange {
			t.Errorf("words at %d and %d share a false-sharing range", lines[i-1], lines[i])
		}
	}
	if shringConsumerWakes+8 > shringHead+ringindex.FalseSharingRange || shringProducerWakes+8 > shringTail+ringindex.FalseSharingRange {
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

// sendMakingRoom sends msg with a done context, which sends only if there
// is room; while there is none, it receives a message (into chk) to make
// some. A receive that takes only padding is no message: the done ctx's
// error then.
func sendMakingRoom(t *testing.T, p *RingProducer, c *RingConsumer, chk *ringStreamCheck, msg []byte) {
	t.Helper()
	for {
		err := p.Send(doneCtx, msg)
		if err == nil {
			return
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
		sendMakingRoom(t, p, c, &chk, ringTestMsg(buf, seq, 248))
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
		sendMakingRoom(t, p, c, &chk, ringTestMsg(buf, seq, 60))
	}
	p.Close()
	if err := receiveAll(c, &chk); err != lockword.ErrRingClosed {
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
	for c.e.notEmpty.Load()&ringindex.Sleeping == 0 || p.Stats().ConsumerSleeps == 0 {
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
	for p.e.notFull.Load()&ringindex.Sleeping == 0 {
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
	if c.e.notEmpty.Load()&ringindex.Sleeping != 0 {
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
	if err := p.Send(nil, msg); err != lockword.ErrNilContext { //nolint:staticcheck
		t.Fatalf("Send on a full ring with nil ctx = %v", err)
	}
	// With a message there, a nil ctx is still refused, and takes nothing.
	//lint:ignore SA1012 testing the nil-context error
	if _, err := c.Receive(nil, nil); err != lockword.ErrNilContext { //nolint:staticcheck
		t.Fatalf("Receive on a full ring with nil ctx = %v", err)
	}
	if _, err := c.Receive(doneCtx, nil); err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 testing the nil-context error
	if err := p.Send(nil, msg); err != lockword.ErrNilContext { //nolint:staticcheck
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
	if _, err := c.Receive(context.Background(), nil); err != lockword.ErrRingClosed {
		t.Fatalf("Receive on a closed, drained ring = %v", err)
	}
	if err := p.Send(context.Background(), []byte("late")); !errors.Is(err, lockword.ErrRingClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
	// A closed ring stays closed, for a new producer too.
	r2 := p.e.r
	p2, err := r2.RingProducer("q", 256)
	if err != nil {
		t.Fatalf("attaching after the producer closed: %v", err)
	}
	if err := p2.Send(context.Background(), []byte("late")); !errors.Is(err, lockword.ErrRingClosed) {
		t.Fatalf("Send by a new producer on a closed ring = %v", err)
	}

	// The consumer closing wakes a producer blocked on a full ring.
	_, p, c = ringPair(t, 256)
	for p.Send(doneCtx, make([]byte, 50)) == nil {
	}
	errc := make(chan error)
	go func() { errc <- p.Send(context.Background(), make([]byte, 50)) }()
	for p.e.notFull.Load()&ringindex.Sleeping == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Close()
	if err := <-errc; !errors.Is(err, lockword.ErrRingClosed) {
		t.Fatalf("Send blocked when the consumer closed = %v", err)
	}
	if _, err := c.Receive(doneCtx, nil); !errors.Is(err, lockword.ErrRingClosed) {
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
	r2, err := Open(path, nil)
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
	if err := p.Send(context.Background(), []byte("x")); !errors.Is(err, lockword.ErrRingClosed) {
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
	r3, err := Open(path, nil)
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
		t.Fatalf("lockword.Mutex on a ring: %v", err)
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

// ---- Across processes ----
