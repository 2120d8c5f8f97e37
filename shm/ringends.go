package shm

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/ringindex"
)

// The two ends of a shared byte ring: RingProducer sends, RingConsumer
// receives. The ring's layout, the role words, the sleeps and peer death
// are ring.go's; the index protocol both rings share is internal/ringindex.

// A RingProducer is the sending side of a shared byte ring: a bounded
// single-producer, single-consumer queue of variable-length byte messages in
// a Region, between two processes (or two handles of one). Get one with
// (*Region).RingProducer; the receiving side is a RingConsumer. Linux only,
// as regions are.
//
// # Algorithm and layout
//
// The queue is Lamport's single-producer, single-consumer buffer (L.
// Lamport, "Specifying Concurrent Program Modules", TOPLAS 1983: each index
// written by one side only, so neither side needs a lock), with the indices
// of Erik Rigtorp's SPSC ring ("Optimizing a ring buffer for throughput",
// 2021), as in Ring: free-running 64-bit byte counters, tail
// written only by the producer and head only by the consumer, on separate
// cache-line pairs, each side caching the other's. The space between them
// holds length-prefixed records, each at a multiple of 8 bytes:
//
//	offset  size  field
//	0       4     length: payload bytes
//	4       4     type: 0 message, 1 padding
//	8       n     payload, then zero to 7 bytes up to a multiple of 8
//
// A record never wraps: when one does not fit before the end of the
// buffer, the producer first writes a padding record that runs to the end,
// and the message goes at offset 0. Sending writes the whole record, then
// publishes it with one store of tail; a producer that dies half-way leaves
// a record past tail that is never delivered. The object layout (role
// words, indices, wake words, statistics, records) is in docs/abi.md; all
// zero is an empty, open ring.
//
// # Blocking
//
// Send waits while the ring lacks room, Receive while it is empty, with the
// protocol of Ring: watch the other index briefly, yield, then announce the
// sleep in the wake word (bit 0), look again, and sleep on the word with the
// shared kernel futex; the other side stores its index, then reads the wake
// word and wakes only if the bit is set. No wake-up is lost, a side never
// sleeps while the other makes progress, and a busy ring makes no system
// calls. Sleeps last at most 10 ms, so that a context's end and the other
// side's death are noticed.
//
// # Roles and peer death
//
// Each side's role word holds its process's owner token (process-table slot
// and generation, as Mutex's lock word does), so either side can tell
// whether the other lives, across PID reuse. A blocked Send whose consumer
// has died returns ErrPeerDead, as does a Receive that has drained every
// message a dead producer published. A role whose holder died can be taken
// over: a new process attaches and the stream continues. A message the dead
// consumer was receiving when it died, not yet released, is delivered again
// to the next consumer.
//
// # Untrusted memory
//
// The other process can write anything into the ring. The handle holds the
// capacity itself (from the region's object table) and validates every index
// and record header it reads: an impossible value is ErrRingCorrupt, never a
// read or write outside the ring, and never a panic (FuzzSharedRingConsumer).
//
// # Memory model
//
// A Send synchronizes before the Receive that returns its message.
//
// A RingProducer is used by one goroutine at a time. It must not be used
// after its region is closed.
type RingProducer struct {
	_ noCopy
	e ringEnd
	// tail is our index: the next byte to write. headCache is the last
	// head we read and validated.
	tail, headCache uint64
}

// RingProducer attaches this process as the producer of the shared ring
// named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName), creating the ring with capacity bytes of
// record space if the region has no object of that name. capacity must be
// a power of two from MinSharedRingCapacity to MaxSharedRingCapacity, and
// equal to an existing ring's. It returns ErrRingBusy if a live process
// (this one included) is the ring's producer; a dead producer's role is
// taken over. Other errors: ErrObjectKind (name is another kind of object),
// ErrObjectBounds (bad capacity, or not the existing ring's), ErrRegionFull,
// ErrRegionClosed, ErrRingCorrupt (the ring's indices are impossible),
// ErrUnsupported off Linux.
func (r *Region) RingProducer(name string, capacity int) (*RingProducer, error) {
	p := new(RingProducer)
	if err := r.attachRing(&p.e, name, capacity, true); err != nil {
		return nil, err
	}
	// Start where the last producer stopped: at the published tail.
	p.tail, p.headCache = p.e.tail.Load(), p.e.head.Load()
	if err := p.e.checkIndices(p.headCache, p.tail); err != nil {
		p.e.release()
		return nil, err
	}
	return p, nil
}

// Cap returns the ring's capacity in bytes of record space. Each message
// takes 8 bytes of header plus its length rounded up to 8.
func (p *RingProducer) Cap() int { return int(p.e.capacity) }

// MaxMessage returns the largest message Send accepts, in bytes: Cap()-8.
func (p *RingProducer) MaxMessage() int { return int(p.e.maxMsg) }

// Stats returns the ring's sleep and wake-up counts, both sides together
// (they live in the ring, so both handles see the same).
func (p *RingProducer) Stats() lockword.RingStats {
	p.e.r.checkOpen("RingProducer", p.e.name, "Stats")
	return p.e.stats()
}

// Send copies msg into the ring as one message, waiting while the ring
// lacks room for it. It returns nil once the message is published; if there
// is room it is sent even when ctx is already done. Errors: ErrRingClosed
// (the ring was closed, by either side, or this handle was detached),
// ErrPeerDead (no room, and the consumer's process has died),
// ErrMessageTooLarge, ErrRingCorrupt, ctx.Err(), or ErrNilContext for a
// nil ctx; in every case nothing was sent.
func (p *RingProducer) Send(ctx context.Context, msg []byte) error {
	if ctx == nil {
		return lockword.ErrNilContext // whether or not it would wait: a bug shows at once
	}
	if err := p.e.r.errClosed("RingProducer", p.e.name, "Send"); err != nil {
		return err
	}
	for {
		sent, need, err := p.trySend(msg)
		if sent || err != nil {
			return err
		}
		if need == 0 {
			continue // published a padding record: now at offset 0
		}
		if err := p.waitRoom(ctx, need); err != nil {
			return err
		}
	}
}

// trySend sends msg if the ring has room. If not, need is the free space
// in bytes to wait for; sent false with need 0 means it published a padding
// record to the end of the buffer and must be called again.
func (p *RingProducer) trySend(msg []byte) (sent bool, need uint64, err error) {
	if p.e.err != nil {
		return false, 0, p.e.err
	}
	n := uint64(len(msg))
	if n > p.e.maxMsg {
		return false, 0, fmt.Errorf("%w: %d bytes, ring %q holds messages of up to %d", ErrMessageTooLarge, n, p.e.name, p.e.maxMsg)
	}
	rec := recordSize(n)
	t := p.tail
	off := t & p.e.mask
	pad := uint64(0)
	if p.e.capacity-off < rec {
		pad = p.e.capacity - off // at least 8: off is a multiple of 8
	}
	need = pad + rec
	if need > p.e.capacity {
		need = pad // the padding alone now; the record at offset 0 next
	}
	// Full by our cached head? Only then read the consumer's line.
	if t-p.headCache > p.e.capacity-need && !p.refreshHead(need) {
		return false, need, p.e.err
	}
	if p.e.notEmpty.Load()&ringindex.Closed != 0 {
		return false, 0, lockword.ErrRingClosed
	}
	d := p.e.data
	if pad > 0 {
		ne.PutUint32(d[off+recLength:], uint32(pad-recHeaderSize))
		ne.PutUint32(d[off+recType:], recPadding)
	}
	if need > pad {
		o := (t + pad) & p.e.mask
		copy(d[o+recHeaderSize:o+recHeaderSize+n], msg)
		ne.PutUint32(d[o+recLength:], uint32(n))
		ne.PutUint32(d[o+recType:], recMessage)
	}
	// Publish: every byte of the records above is written before this
	// store, and the consumer loads tail before it reads them. A swap,
	// not a Store (the same XCHG on amd64): see publishIndex.
	p.tail = t + need
	ringindex.Publish(p.e.tail, p.tail)
	if need > pad {
		// Only this side writes the count: a load and a store, no
		// locked add. It is for inspection and may trail tail by one.
		p.e.messages.Store(p.e.messages.Load() + 1)
	}
	// Then look for a sleeping consumer (the Dekker pair with its
	// announce-then-look; see spscIndex).
	if p.e.notEmpty.Load()&ringindex.Sleeping != 0 {
		ringindex.WakeSide(p.e.notEmpty, p.e.wakes, p.e.sl)
	}
	return need > pad, 0, nil
}

// refreshHead reads and validates the consumer's index and reports whether
// need bytes are free. An impossible head sets the sticky error.
func (p *RingProducer) refreshHead(need uint64) bool {
	h := p.e.head.Load()
	if p.tail-h > p.e.capacity || h%recHeaderSize != 0 {
		p.e.corrupt("head %d with tail %d (capacity %d)", h, p.tail, p.e.capacity)
		return false
	}
	p.headCache = h
	return p.tail-h <= p.e.capacity-need
}

// waitRoom blocks until need bytes are free (or the handle's error is set).
func (p *RingProducer) waitRoom(ctx context.Context, need uint64) error {
	p.e.r.waiting.Add(1)
	defer p.e.r.waiting.Add(-1)
	return ringindex.Await(ctx, p.e.notFull, p.e.sleeps, p.e.sl, true, func() bool {
		return p.refreshHead(need) || p.e.err != nil
	})
}

// Close ends the stream and gives up the producer role: the consumer
// receives what remains and then gets ErrRingClosed. The ring stays closed
// while the stream's consumer is attached or messages of the stream remain
// to be received (a consumer that attaches then receives them, then
// ErrRingClosed); once the last of them is received and no live process
// holds either role, the next producer or consumer to attach opens the
// ring again for a new stream. Use Detach instead to let another producer
// carry on the same stream. Later calls on p return ErrRingClosed.
func (p *RingProducer) Close() {
	p.e.r.checkOpen("RingProducer", p.e.name, "Close")
	ringindex.CloseWords(p.e.notEmpty, p.e.notFull, p.e.wakes, p.e.sl)
	p.e.release()
}

// Detach gives up the producer role without ending the stream, so that
// another process (or handle) may attach as the producer. The consumer
// keeps waiting meanwhile. Later calls on p return ErrRingClosed.
func (p *RingProducer) Detach() {
	p.e.r.checkOpen("RingProducer", p.e.name, "Detach")
	p.e.release()
}

// A RingConsumer is the receiving side of a shared byte ring; see
// RingProducer for the algorithm, layout, peer death and validation. Get
// one with (*Region).RingConsumer. It is used by one goroutine at a time,
// and must not be used after its region is closed.
type RingConsumer struct {
	_ noCopy
	e ringEnd
	// head is our index: the next byte to read. tailCache is the last
	// tail we read and validated.
	head, tailCache uint64
}

// RingConsumer attaches this process as the consumer of the shared ring
// named name, creating it with capacity bytes if the region has no object
// of that name; see RingProducer for the arguments and errors (ErrRingBusy
// if a live process is the ring's consumer). Messages published and not yet
// received, including one that a dead consumer was receiving, are received
// by the new consumer.
func (r *Region) RingConsumer(name string, capacity int) (*RingConsumer, error) {
	c := new(RingConsumer)
	if err := r.attachRing(&c.e, name, capacity, false); err != nil {
		return nil, err
	}
	c.head = c.e.head.Load()
	c.tailCache = c.head
	if err := c.e.checkIndices(c.head, c.e.tail.Load()); err != nil {
		c.e.release()
		return nil, err
	}
	return c, nil
}

// Cap returns the ring's capacity in bytes of record space.
func (c *RingConsumer) Cap() int { return int(c.e.capacity) }

// MaxMessage returns the largest message the ring carries, in bytes.
func (c *RingConsumer) MaxMessage() int { return int(c.e.maxMsg) }

// Stats returns the ring's sleep and wake-up counts, both sides together.
func (c *RingConsumer) Stats() lockword.RingStats {
	c.e.r.checkOpen("RingConsumer", c.e.name, "Stats")
	return c.e.stats()
}

// Receive removes the oldest message from the ring, waiting while the ring
// is empty, and returns it appended to buf[:0] (pass a buffer of
// MaxMessage bytes to avoid allocating). If a message is there it is
// returned even when ctx is already done. Errors, with no message removed:
// ErrRingClosed once the ring is closed and every message sent before Close
// has been received (or this handle was detached); ErrPeerDead once the
// producer's process has died and every message it published has been
// received; ErrRingCorrupt; ctx.Err(); ErrNilContext for a nil ctx.
func (c *RingConsumer) Receive(ctx context.Context, buf []byte) ([]byte, error) {
	if ctx == nil {
		return buf[:0], lockword.ErrNilContext
	}
	if err := c.e.r.errClosed("RingConsumer", c.e.name, "Receive"); err != nil {
		return buf[:0], err
	}
	for {
		msg, ok, err := c.tryReceive(buf)
		if ok || err != nil {
			return msg, err
		}
		if err := c.waitItems(ctx); err != nil {
			if errors.Is(err, ErrPeerDead) && (c.refreshTail() || c.e.err != nil) {
				// Published before it died: drain first.
				continue
			}
			return buf[:0], err
		}
	}
}

// tryReceive returns the next message, if one is published. Every header
// is read once into locals and checked against the handle's own geometry
// before a byte of payload is touched.
func (c *RingConsumer) tryReceive(buf []byte) (msg []byte, ok bool, err error) {
	if c.e.err != nil {
		return buf[:0], false, c.e.err
	}
	for {
		h := c.head
		if h == c.tailCache && !c.refreshTail() {
			return buf[:0], false, c.e.err
		}
		avail := c.tailCache - h // validated: a multiple of 8, 8 to capacity
		off := h & c.e.mask
		room := c.e.capacity - off // up to the end of the buffer; at least 8
		d := c.e.data
		length, typ := uint64(ne.Uint32(d[off+recLength:])), ne.Uint32(d[off+recType:])
		switch {
		case typ == recPadding:
			// Only where a message would not fit before the end, and
			// exactly to the end.
			if off == 0 || recHeaderSize+length != room || room > avail {
				return buf[:0], false, c.e.corrupt("padding record of %d bytes at offset %d (%d bytes to the end, %d published)", length, off, room, avail)
			}
			c.release(h + room)
		case typ != recMessage:
			return buf[:0], false, c.e.corrupt("record type %d at offset %d", typ, off)
		default:
			size := recordSize(length)
			if length > c.e.maxMsg || size > room || size > avail {
				return buf[:0], false, c.e.corrupt("message of %d bytes at offset %d (%d bytes to the end, %d published)", length, off, room, avail)
			}
			msg = append(buf[:0], d[off+recHeaderSize:off+recHeaderSize+length]...)
			c.release(h + size)
			c.e.messages.Store(c.e.messages.Load() + 1) // as in trySend
			return msg, true, nil
		}
	}
}

// refreshTail reads and validates the producer's index and reports whether
// a record is published. An impossible tail sets the sticky error.
func (c *RingConsumer) refreshTail() bool {
	t := c.e.tail.Load()
	if t-c.head > c.e.capacity || t%recHeaderSize != 0 {
		c.e.corrupt("tail %d with head %d (capacity %d)", t, c.head, c.e.capacity)
		return false
	}
	c.tailCache = t
	return t != c.head
}

// release frees the ring up to h: our read of the records before it
// happens before the producer reuses their bytes.
func (c *RingConsumer) release(h uint64) {
	c.head = h
	ringindex.Publish(c.e.head, h)
	if c.e.notFull.Load()&ringindex.Sleeping != 0 {
		ringindex.WakeSide(c.e.notFull, c.e.wakes, c.e.sl)
	}
}

// waitItems blocks until a record is published (or the handle's error is
// set).
func (c *RingConsumer) waitItems(ctx context.Context) error {
	c.e.r.waiting.Add(1)
	defer c.e.r.waiting.Add(-1)
	return ringindex.Await(ctx, c.e.notEmpty, c.e.sleeps, c.e.sl, false, func() bool {
		return c.refreshTail() || c.e.err != nil
	})
}

// Close tells the producer to stop (its Send returns ErrRingClosed) and
// gives up the consumer role. Messages still in the ring are discarded,
// never received; once the producer is gone too, the next producer or
// consumer to attach opens the ring again for a new stream (see
// RingProducer.Close). Later calls on c return ErrRingClosed.
func (c *RingConsumer) Close() {
	c.e.r.checkOpen("RingConsumer", c.e.name, "Close")
	ringindex.CloseWords(c.e.notEmpty, c.e.notFull, c.e.wakes, c.e.sl)
	if c.e.err == nil {
		// Discard what the producer published before it saw the close,
		// so that the stream is over for a new pair; a bad tail is left
		// alone (refreshTail sets the handle's error instead).
		if c.refreshTail() {
			c.release(c.tailCache)
		}
	}
	c.e.release()
}

// Detach gives up the consumer role without ending the stream, so that
// another process may attach as the consumer and receive what remains.
// Later calls on c return ErrRingClosed.
func (c *RingConsumer) Detach() {
	c.e.r.checkOpen("RingConsumer", c.e.name, "Detach")
	c.e.release()
}
