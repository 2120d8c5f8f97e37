//go:build linux

package shm

import (
	"context"
	"errors"
	"github.com/lockword/lockword"
	"path/filepath"
	"testing"
	"time"
)

// fuzzRingCapacity is the capacity of the ring FuzzSharedRingConsumer
// overwrites: small, so that inputs cover the whole object.
const fuzzRingCapacity = 256

// FuzzSharedRingConsumer attaches a consumer to a ring whose memory (role
// words, indices, wake words, statistics and records: the whole object) is
// the fuzzer's input, then receives until it gets an error, with the tail
// moved once more in the middle to values from the input (a producer that
// scribbles while the consumer reads). No input may make the consumer
// panic (a read outside the ring would: Go's bounds checks guard every
// slice of it), deliver a message longer than MaxMessage or more bytes than
// were published, or fail with anything but ErrRingCorrupt, ErrRingClosed
// (the closed bit is part of the input) or the done context's error. CI
// runs it briefly (go test -fuzz); the seeds run with every go test.
func FuzzSharedRingConsumer(f *testing.F) {
	objSize := shringData + fuzzRingCapacity
	// Seeds: rings written by a real producer, at several fill levels and
	// with a padding record at the wrap, and a few broken ones.
	seedRegion, err := Create(filepath.Join(f.TempDir(), "seed"), 0, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer seedRegion.Close()
	for i, sizes := range [][]int{{}, {0}, {5, 17, 100}, {200, 40, 100}, {248}} {
		name := "seed" + string(rune('a'+i))
		p, err := seedRegion.RingProducer(name, fuzzRingCapacity)
		if err != nil {
			f.Fatal(err)
		}
		c, err := seedRegion.RingConsumer(name, fuzzRingCapacity)
		if err != nil {
			f.Fatal(err)
		}
		for j, n := range sizes {
			msg := make([]byte, n)
			for k := range msg {
				msg[k] = byte(j + k)
			}
			if err := p.Send(context.Background(), msg); err != nil {
				f.Fatal(err)
			}
			if j == 1 { // free room at the start, so a later record wraps with padding
				if _, err := c.Receive(context.Background(), nil); err != nil {
					f.Fatal(err)
				}
			}
		}
		obj := append([]byte(nil), ringObject(seedRegion, name)...)
		f.Add(obj, uint64(0))
		f.Add(obj, ne.Uint64(obj[shringTail:])+8)
	}
	f.Add(make([]byte, objSize), uint64(fuzzRingCapacity))
	f.Add([]byte{}, uint64(1<<63))

	r, err := Create(filepath.Join(f.TempDir(), "fuzz"), 0, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer r.Close()
	p, err := r.RingProducer("q", fuzzRingCapacity) // creates the object
	if err != nil {
		f.Fatal(err)
	}
	p.Detach()
	obj := ringObject(r, "q")

	f.Fuzz(func(t *testing.T, mem []byte, laterTail uint64) {
		defer watchdog("FuzzSharedRingConsumer input", 10*time.Second)()
		clear(obj)
		copy(obj, mem)
		c, err := r.RingConsumer("q", fuzzRingCapacity)
		if err != nil {
			if !errors.Is(err, ErrRingCorrupt) && !errors.Is(err, ErrRingBusy) {
				t.Fatalf("attach: %v", err)
			}
			return
		}
		defer c.Detach()
		start := c.head
		buf := make([]byte, 0, c.MaxMessage())
		delivered := uint64(0) // record bytes of the messages received
		for i := 0; ; i++ {
			if i == 3 {
				word64(obj, shringTail).Store(laterTail)
			}
			msg, err := c.Receive(doneCtx, buf)
			if err != nil {
				if !errors.Is(err, ErrRingCorrupt) && !errors.Is(err, context.Canceled) && !errors.Is(err, lockword.ErrRingClosed) {
					t.Fatalf("Receive: %v", err)
				}
				if len(msg) != 0 {
					t.Fatalf("Receive returned %d bytes with %v", len(msg), err)
				}
				if i < 3 {
					continue // on to the moved tail
				}
				break
			}
			if len(msg) > c.MaxMessage() {
				t.Fatalf("message of %d bytes from a ring of %d", len(msg), c.Cap())
			}
			delivered += recordSize(uint64(len(msg)))
			// Everything delivered was published: head moved no further
			// than the last validated tail, and by at least the records.
			if c.head-start < delivered || c.head-start > c.tailCache-start || c.tailCache-start > 2*fuzzRingCapacity {
				t.Fatalf("head %d, tail %d, start %d, %d bytes delivered", c.head, c.tailCache, start, delivered)
			}
			if i > 4*fuzzRingCapacity {
				t.Fatal("more messages than a ring could hold twice")
			}
		}
	})
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
