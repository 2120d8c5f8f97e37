package lockword

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Errors of the shared byte ring (RingProducer, RingConsumer). Each is
// wrapped with the ring's name, its region and, where known, a PID; test
// with errors.Is. ErrRingClosed (shared with Ring) ends the stream.
var (
	// ErrPeerDead is returned by a blocking call that would otherwise wait
	// for ever: by RingConsumer.Receive when the ring is empty and the
	// producer's process has died (after every message it published has
	// been received), and by RingProducer.Send when the ring has no room
	// and the consumer's process has died. A new process may attach to the
	// dead side's role (Region.RingProducer or RingConsumer) and the stream
	// goes on; a later call succeeds once it has.
	ErrPeerDead = errors.New("lockword: the other side of the shared ring died")
	// ErrRingCorrupt is returned when an index or a record header read
	// from the shared ring cannot be valid: an index out of range or
	// misaligned, a length beyond the ring or the record's space, an
	// unknown record type. A buggy or malicious process wrote the ring's
	// memory. Nothing outside the ring was read and nothing was delivered
	// from the bad record; the handle keeps returning the error.
	ErrRingCorrupt = errors.New("lockword: shared ring corrupt")
	// ErrRingBusy is returned by Region.RingProducer (RingConsumer) when a
	// live process, this one included, already holds the ring's producer
	// (consumer) role: the ring has one of each.
	ErrRingBusy = errors.New("lockword: shared ring role already taken by a live process")
	// ErrMessageTooLarge is returned by RingProducer.Send for a message
	// longer than MaxMessage, which could never fit in the ring.
	ErrMessageTooLarge = errors.New("lockword: message larger than the shared ring can hold")
)

// Capacity limits of a shared ring, in bytes of record space.
const (
	// MinSharedRingCapacity is the smallest capacity Region.RingProducer
	// and RingConsumer accept: 64 bytes.
	MinSharedRingCapacity = 64
	// MaxSharedRingCapacity is the largest: 1 GiB.
	MaxSharedRingCapacity = 1 << 30
)

// Shared ring object layout (kind 6, 128-aligned, 512 + capacity bytes; see
// docs/abi.md). Offsets are within the object; words are in native byte
// order. All zero is an empty, open ring with no producer and no consumer.
const (
	shringProducerRole   = 0   // uint32: producer's owner token (slot, generation); 0: none
	shringConsumerRole   = 4   // uint32: consumer's owner token; 0: none
	shringTail           = 128 // uint64: bytes published by the producer (free-running)
	shringNotEmpty       = 136 // uint32: the consumer's wake word (ringSleeping, ringClosed)
	shringProducerSleeps = 144 // uint64: statistics
	shringProducerWakes  = 152 // uint64
	shringMessagesSent   = 160 // uint64: messages published, for inspection (producer)
	shringHead           = 256 // uint64: bytes released by the consumer (free-running)
	shringNotFull        = 264 // uint32: the producer's wake word
	shringConsumerSleeps = 272 // uint64
	shringConsumerWakes  = 280 // uint64
	shringMessagesRecvd  = 288 // uint64: messages received, for inspection (consumer)
	shringData           = 512 // capacity bytes of records
	shringAlign          = falseSharingRange

	// A record is an 8-byte header and its payload, padded to 8 bytes;
	// records start at multiples of 8 and never wrap.
	recLength     = 0 // uint32: payload bytes
	recType       = 4 // uint32: recMessage or recPadding
	recHeaderSize = 8
	recMessage    = 0 // a message of length bytes
	recPadding    = 1 // nothing: skip length bytes, to the end of the buffer
)

// ringPeerCheckInterval is how often, at most, a blocked shared-ring call
// checks that the other side's process still lives (/proc, ~10 µs).
const ringPeerCheckInterval = 10 * time.Millisecond

// ringSleepSlice bounds each kernel sleep of a blocked shared-ring call:
// between sleeps it looks at its context and at the other side's process.
// A variable only so that a test can make it long, and a lost wake-up then
// a hang instead of a 10 ms delay.
var ringSleepSlice = ringPeerCheckInterval

func init() {
	registerKind(kindRing, &kindInfo{
		name: "ring", align: shringAlign,
		ownerWords: []uint32{shringProducerRole, shringConsumerRole},
		inspect:    inspectRing,
	})
}

// recordSize is the space a record of n payload bytes takes: the header
// and the payload rounded up to 8 bytes.
func recordSize(n uint64) uint64 { return recHeaderSize + (n+7)&^7 }

// ringEnd is what the producer and the consumer handles share: the shared
// ring's words in the mapping, and the geometry, which the handle holds
// itself (from the object table at attach) and never reads from the ring.
type ringEnd struct {
	r    *Region
	name string
	side string // "producer" or "consumer", for errors
	peer string

	data     []byte // the capacity bytes of records
	capacity uint64 // a power of two
	mask     uint64 // capacity-1
	maxMsg   uint64 // capacity - recHeaderSize

	role, peerRole     *atomic.Uint32 // our role word and the other side's
	tail, head         *atomic.Uint64
	notEmpty, notFull  *atomic.Uint32
	sleeps, wakes      *atomic.Uint64 // our side's statistics
	peerSleeps, peerWk *atomic.Uint64
	messages           *atomic.Uint64 // our side's message count (inspection only)

	token     uint32      // our owner token, written into role
	sl        ringSleeper // futex in bounded slices, checking the peer
	err       error       // sticky: corrupt ring, or detached
	lastCheck time.Time   // when the peer's liveness was last checked
	deadPeer  uint32      // a peer token found dead: no need to ask /proc again
	deadPID   uint32      // its PID
}

// sharedRingSleeper sleeps on a shared ring's wake word with the kernel
// futex (shared: the waker is another process), in slices of at most
// ringPeerCheckInterval, so that a context or a dead peer ends the wait.
type sharedRingSleeper struct{ e *ringEnd }

func (s sharedRingSleeper) sleep(ctx context.Context, word *atomic.Uint32, val uint32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e := s.e
	if tok := e.peerRole.Load() & ownerMask; tok != 0 && tok == e.deadPeer {
		return e.peerDeadError(e.deadPID)
	}
	if time.Since(e.lastCheck) >= ringPeerCheckInterval {
		e.lastCheck = time.Now()
		if err := e.peerDead(); err != nil {
			return err
		}
	}
	// A cancelled context ends the sleep at once, not at the end of the
	// slice (only this side sleeps on word). Spurious returns are fine:
	// ringAwait looks again and comes back.
	sleepShared(ctx, word, val, ringSleepSlice)
	return nil
}

func (s sharedRingSleeper) wake(word *atomic.Uint32) { wakeShared(word, 1) }

// peerDead returns an error wrapping ErrPeerDead if the other side's role
// names a process that has died; nil if it lives or nobody holds the role
// (a peer may still attach).
func (e *ringEnd) peerDead() error {
	tok := e.peerRole.Load() & ownerMask
	if tok == 0 {
		return nil
	}
	alive, pid := e.r.tokenAlive(tok)
	if alive {
		return nil
	}
	e.deadPeer, e.deadPID = tok, pid
	return e.peerDeadError(pid)
}

func (e *ringEnd) peerDeadError(pid uint32) error {
	who := "a process that is gone"
	if pid != 0 {
		who = fmt.Sprintf("PID %d, gone", pid)
	}
	return fmt.Errorf("%w: the %s of ring %q in %s (%s); a new %s may attach", ErrPeerDead, e.peer, e.name, e.r.path, who, e.peer)
}

// corrupt records, and returns, a sticky ErrRingCorrupt.
func (e *ringEnd) corrupt(format string, a ...any) error {
	e.err = fmt.Errorf("%w: ring %q in %s: %s", ErrRingCorrupt, e.name, e.r.path, fmt.Sprintf(format, a...))
	return e.err
}

// attachRing fills e with the named ring, creating the ring with capacity
// bytes if the region has none of that name, and claims the producer's or
// the consumer's role.
func (r *Region) attachRing(e *ringEnd, name string, capacity int, producer bool) error {
	if capacity < MinSharedRingCapacity || capacity > MaxSharedRingCapacity || capacity&(capacity-1) != 0 {
		return fmt.Errorf("%w: ring %q capacity %d: must be a power of two from %d to %d bytes",
			ErrObjectBounds, name, capacity, MinSharedRingCapacity, MaxSharedRingCapacity)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, err := r.object(name, kindRing, uint32(shringData+capacity))
	if err != nil {
		return err
	}
	if o.size != uint32(shringData+capacity) {
		return fmt.Errorf("%w: ring %q exists with %d bytes of records, not %d",
			ErrObjectBounds, name, int64(o.size)-shringData, capacity)
	}
	obj := r.data[o.offset : o.offset+uint64(o.size) : o.offset+uint64(o.size)]
	*e = ringEnd{
		r: r, name: name, side: "consumer", peer: "producer",
		data:     obj[shringData:],
		capacity: uint64(capacity), mask: uint64(capacity) - 1, maxMsg: uint64(capacity) - recHeaderSize,
		role: word32(obj, shringConsumerRole), peerRole: word32(obj, shringProducerRole),
		tail: word64(obj, shringTail), head: word64(obj, shringHead),
		notEmpty: word32(obj, shringNotEmpty), notFull: word32(obj, shringNotFull),
		sleeps: word64(obj, shringConsumerSleeps), wakes: word64(obj, shringConsumerWakes),
		peerSleeps: word64(obj, shringProducerSleeps), peerWk: word64(obj, shringProducerWakes),
		messages: word64(obj, shringMessagesRecvd),
		token:    r.token,
	}
	if producer {
		e.side, e.peer = e.peer, e.side
		e.role, e.peerRole = e.peerRole, e.role
		e.sleeps, e.peerSleeps = e.peerSleeps, e.sleeps
		e.wakes, e.peerWk = e.peerWk, e.wakes
		e.messages = word64(obj, shringMessagesSent)
	}
	e.sl = sharedRingSleeper{e}
	e.reopenIfOver()
	return e.claim()
}

// reopenIfOver opens a closed ring again for a new producer and consumer
// once its stream is over: every published message received (head equals
// tail) and neither role held by a live process. It runs before this side
// claims its role, so that two sides starting together both see the other
// role free and both reopen (the same store), rather than each see the
// other attached and leave the ring closed for both. A stream whose last
// messages nobody has received yet stays closed: the next consumer
// receives them and then ErrRingClosed, as the closed stream promised.
func (e *ringEnd) reopenIfOver() {
	if (e.notEmpty.Load()|e.notFull.Load())&ringClosed == 0 || e.head.Load() != e.tail.Load() {
		return
	}
	roles := [...]*atomic.Uint32{e.role, e.peerRole}
	var dead [len(roles)]uint32
	for i, role := range roles {
		if w := role.Load(); w != 0 {
			if alive, _ := e.r.tokenAlive(w & ownerMask); alive {
				return
			}
			dead[i] = w
		}
	}
	// A side that died belonged to the old stream: the new one must not
	// report it as a dead peer (it waits for a new one instead).
	for i, role := range roles {
		if dead[i] != 0 {
			role.CompareAndSwap(dead[i], 0)
		}
	}
	e.notEmpty.And(^uint32(ringClosed))
	e.notFull.And(^uint32(ringClosed))
}

// claim takes our role: free, or held by a process that has died.
func (e *ringEnd) claim() error {
	for range retryLimit { // a CAS fails only if another claimant moved the word
		w := e.role.Load()
		if w == 0 {
			if e.role.CompareAndSwap(0, e.token) {
				return nil
			}
			continue
		}
		alive, pid := e.r.tokenAlive(w & ownerMask)
		if alive {
			return fmt.Errorf("%w: ring %q in %s has a %s, PID %d", ErrRingBusy, e.name, e.r.path, e.side, pid)
		}
		// Its holder died (or the word is garbage): take over. Nothing
		// to repair: the dead producer's half-written record lies past
		// tail and is overwritten; the dead consumer's message that it
		// had not released is received again.
		if e.role.CompareAndSwap(w, e.token) {
			return nil
		}
	}
	return e.corrupt("role word keeps changing while claimed")
}

// release gives up our role, if we still hold it, and makes the handle
// unusable.
func (e *ringEnd) release() {
	if e.err == nil {
		e.err = fmt.Errorf("%w: this %s handle of ring %q was closed or detached", ErrRingClosed, e.side, e.name)
	}
	e.role.CompareAndSwap(e.token, 0)
}

// checkIndices validates the indices of a ring at attach: both multiples of
// 8, tail at most capacity bytes ahead of head.
func (e *ringEnd) checkIndices(h, t uint64) error {
	if h%recHeaderSize != 0 || t%recHeaderSize != 0 || t-h > e.capacity {
		return e.corrupt("indices head %d, tail %d (capacity %d)", h, t, e.capacity)
	}
	return nil
}

func (e *ringEnd) stats() RingStats {
	s := RingStats{Wakes: e.wakes.Load() + e.peerWk.Load()}
	if e.side == "producer" {
		s.ProducerSleeps, s.ConsumerSleeps = e.sleeps.Load(), e.peerSleeps.Load()
	} else {
		s.ProducerSleeps, s.ConsumerSleeps = e.peerSleeps.Load(), e.sleeps.Load()
	}
	return s
}

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
// and generation, as SharedMutex's lock word does), so either side can tell
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
func (p *RingProducer) Stats() RingStats { return p.e.stats() }

// Send copies msg into the ring as one message, waiting while the ring
// lacks room for it. It returns nil once the message is published; if there
// is room it is sent even when ctx is already done. Errors: ErrRingClosed
// (the ring was closed, by either side, or this handle was detached),
// ErrPeerDead (no room, and the consumer's process has died),
// ErrMessageTooLarge, ErrRingCorrupt, ctx.Err(), or ErrNilContext for a
// nil ctx; in every case nothing was sent.
func (p *RingProducer) Send(ctx context.Context, msg []byte) error {
	if ctx == nil {
		return ErrNilContext // whether or not it would wait: a bug shows at once
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
	if p.e.notEmpty.Load()&ringClosed != 0 {
		return false, 0, ErrRingClosed
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
	publishIndex(p.e.tail, p.tail)
	if need > pad {
		// Only this side writes the count: a load and a store, no
		// locked add. It is for inspection and may trail tail by one.
		p.e.messages.Store(p.e.messages.Load() + 1)
	}
	// Then look for a sleeping consumer (the Dekker pair with its
	// announce-then-look; see spscIndex).
	if p.e.notEmpty.Load()&ringSleeping != 0 {
		wakeSide(p.e.notEmpty, p.e.wakes, p.e.sl)
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
	return ringAwait(ctx, p.e.notFull, p.e.sleeps, p.e.sl, true, func() bool {
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
	closeRingWords(p.e.notEmpty, p.e.notFull, p.e.wakes, p.e.sl)
	p.e.release()
}

// Detach gives up the producer role without ending the stream, so that
// another process (or handle) may attach as the producer. The consumer
// keeps waiting meanwhile. Later calls on p return ErrRingClosed.
func (p *RingProducer) Detach() { p.e.release() }

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
func (c *RingConsumer) Stats() RingStats { return c.e.stats() }

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
		return buf[:0], ErrNilContext
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
	publishIndex(c.e.head, h)
	if c.e.notFull.Load()&ringSleeping != 0 {
		wakeSide(c.e.notFull, c.e.wakes, c.e.sl)
	}
}

// waitItems blocks until a record is published (or the handle's error is
// set).
func (c *RingConsumer) waitItems(ctx context.Context) error {
	c.e.r.waiting.Add(1)
	defer c.e.r.waiting.Add(-1)
	return ringAwait(ctx, c.e.notEmpty, c.e.sleeps, c.e.sl, false, func() bool {
		return c.refreshTail() || c.e.err != nil
	})
}

// Close tells the producer to stop (its Send returns ErrRingClosed) and
// gives up the consumer role. Messages still in the ring are discarded,
// never received; once the producer is gone too, the next producer or
// consumer to attach opens the ring again for a new stream (see
// RingProducer.Close). Later calls on c return ErrRingClosed.
func (c *RingConsumer) Close() {
	closeRingWords(c.e.notEmpty, c.e.notFull, c.e.wakes, c.e.sl)
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
func (c *RingConsumer) Detach() { c.e.release() }

// inspectRing describes a shared byte ring (sharedring.go's layout). It
// reads the words and writes nothing: a ring is no lock, so it sets no
// State.
func inspectRing(insp *inspector, obj []byte, info *ObjectInfo) {
	if len(obj) < shringData+MinSharedRingCapacity {
		return // too small to be one (attachRing refuses it)
	}
	ri := &RingInfo{
		Capacity:         len(obj) - shringData,
		Producer:         insp.role(word32(obj, shringProducerRole).Load()),
		Consumer:         insp.role(word32(obj, shringConsumerRole).Load()),
		Closed:           word32(obj, shringNotEmpty).Load()&ringClosed != 0,
		BytesReceived:    word64(obj, shringHead).Load(),
		BytesSent:        word64(obj, shringTail).Load(),
		MessagesReceived: word64(obj, shringMessagesRecvd).Load(),
		MessagesSent:     word64(obj, shringMessagesSent).Load(),
	}
	// head first, then tail: the ring only grows between the two loads,
	// so a busy ring never looks over-full.
	if used := ri.BytesSent - ri.BytesReceived; used > uint64(ri.Capacity) || ri.BytesSent%recHeaderSize != 0 || ri.BytesReceived%recHeaderSize != 0 {
		ri.Corrupt = true
	} else {
		ri.Used = int64(used)
	}
	info.Ring = ri
}

// role describes the process whose owner token a ring's role word holds;
// nil for none.
func (insp *inspector) role(w uint32) *ProcessInfo {
	tok := w & ownerMask
	if tok == 0 {
		return nil
	}
	a := insp.check(tok)
	return &ProcessInfo{Slot: int(tokenSlot(tok)), PID: int(a.pid), Alive: a.alive}
}
