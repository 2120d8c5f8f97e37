package shm

import (
	"context"
	"fmt"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/faultpoint"
	"github.com/lockword/lockword/internal/ringindex"
)

// An MPSCConsumer is the receiving side of a shared MPSC byte queue; see
// MPSCProducer for the algorithm, layout, peer death and validation. Get
// one with (*Region).MPSCConsumer. It is used by one goroutine at a time,
// and must not be used after its region is closed.
//
// The record at head is in one of these states, and the consumer does:
//
//	state      consumer
//	published  copies the payload out, then stores head past it
//	padding    stores head past it (to the end of the buffer)
//	claimed    waits; every 10 ms asks whether the token's process lives,
//	           and once it is dead stores head past it and counts it lost
//
// Its end is the claim word's position; a claim word held by a dead
// claimer is taken back (mpscQueue.takeBack) by the first producer or
// consumer to find it so.
type MPSCConsumer struct {
	_  noCopy
	q  mpscQueue
	sl mpscSleeper
	// head is our index: the next byte to read. end is the last
	// position the claim word gave, validated.
	head, end uint64
	// blocked paces the liveness checks of a claimed record at head, or
	// of a held claim word, while we wait on it; blockedAt is the
	// position it is for.
	blocked   deadline
	blockedAt uint64
	// deadAt is 1 + the position of a claimed record whose claimer was
	// found dead (0: none), so that the wait's verdict holds for the skip.
	deadAt uint64
	// wokeAt is head when we last woke the producers (wakeProducers).
	wokeAt uint64
}

// MPSCConsumer attaches this process as the consumer of the shared MPSC
// queue named name, creating it with capacity bytes if the region has no
// object of that name; see MPSCProducer for the arguments and errors. It
// returns ErrRingBusy if a live process (this one included) is the queue's
// consumer; a dead consumer's role is taken over, and the messages it had
// not received, including one it was receiving, are received by the new
// one. A queue closed by an earlier consumer opens again.
func (r *Region) MPSCConsumer(name string, capacity int) (*MPSCConsumer, error) {
	c := new(MPSCConsumer)
	if err := r.attachMPSC(&c.q, name, capacity); err != nil {
		return nil, err
	}
	c.sl = mpscSleeper{q: &c.q}
	if err := c.claimRole(); err != nil {
		return nil, err
	}
	c.head = c.q.head.Load()
	c.end = c.head
	if _, err := c.q.counts(); err != nil || c.head%mpscRecAlign != 0 {
		c.q.consumerRole.CompareAndSwap(c.q.token, 0)
		if err == nil {
			err = c.q.corrupt("head %d", c.head)
		}
		return nil, err
	}
	// The role is ours: no other consumer can be using the queue, so a
	// close by an earlier one ends here.
	c.q.notEmpty.And(^uint32(ringindex.Closed))
	c.q.notFull.And(^uint32(ringindex.Closed))
	return c, nil
}

// claimRole takes the consumer role: free, or held by a process that died.
func (c *MPSCConsumer) claimRole() error {
	q := &c.q
	for range retryLimit { // a CAS fails only if another claimant moved the word
		w := q.consumerRole.Load()
		if w&^ownerMask != 0 || w != 0 && !validToken(w) {
			return q.corrupt("consumer word %#x is no owner token", w)
		}
		if w != 0 {
			if alive, pid := q.r.tokenAlive(w & ownerMask); alive {
				return fmt.Errorf("%w: MPSC queue %q in %s has a consumer, PID %d", ErrRingBusy, q.name, q.r.path, pid)
			}
		}
		if q.consumerRole.CompareAndSwap(w, q.token) {
			return nil
		}
	}
	return q.corrupt("consumer role word keeps changing while claimed")
}

// Cap returns the queue's capacity in bytes of record space.
func (c *MPSCConsumer) Cap() int { return int(c.q.capacity) }

// MaxMessage returns the largest message the queue carries, in bytes.
func (c *MPSCConsumer) MaxMessage() int { return int(c.q.maxMsg) }

// Lost returns how many records the queue's consumers have skipped since
// it was created because their producer died between claiming and
// publishing them. It returns lockword.ErrCorrupt if a counter or index of
// the queue is impossible (more records counted than its indices have
// passed), and then also for later calls on c, and an error wrapping
// ErrRegionClosed after the region's Close.
func (c *MPSCConsumer) Lost() (uint64, error) {
	if err := c.q.r.errClosed("MPSCConsumer", c.q.name, "Lost"); err != nil {
		return 0, err
	}
	s, err := c.q.counts()
	return s.lost, err
}

// ClaimsRecovered returns how many claim words of producers that died
// while holding them have been taken back since the queue was created;
// errors as Lost's.
func (c *MPSCConsumer) ClaimsRecovered() (uint64, error) {
	if err := c.q.r.errClosed("MPSCConsumer", c.q.name, "ClaimsRecovered"); err != nil {
		return 0, err
	}
	s, err := c.q.counts()
	return s.recovered, err
}

// Receive removes the oldest published message from the queue, waiting
// while there is none, and returns it appended to buf[:0] (pass a buffer of
// MaxMessage bytes to avoid allocating). If a message is there it is
// returned even when ctx is already done. A record whose producer died
// before publishing it is skipped (Lost counts it) once the consumer has
// found the producer dead, at most 10 ms after it started waiting for it.
// Errors, with no message removed: lockword.ErrRingClosed (this handle
// was closed or detached), lockword.ErrCorrupt, ctx.Err(),
// lockword.ErrNilContext for a nil ctx.
func (c *MPSCConsumer) Receive(ctx context.Context, buf []byte) ([]byte, error) {
	if ctx == nil {
		return buf[:0], lockword.ErrNilContext
	}
	if err := c.q.r.errClosed("MPSCConsumer", c.q.name, "Receive"); err != nil {
		return buf[:0], err
	}
	for {
		msg, ok, err := c.tryReceive(buf)
		if ok || err != nil {
			return msg, err
		}
		c.wakeProducers(true)
		if err := c.waitRecord(ctx); err != nil {
			return buf[:0], err
		}
	}
}

// TryReceive removes the oldest published message, if there is one, and
// reports whether it did; errors as Receive's, less the context's.
func (c *MPSCConsumer) TryReceive(buf []byte) ([]byte, bool, error) {
	if err := c.q.r.errClosed("MPSCConsumer", c.q.name, "TryReceive"); err != nil {
		return buf[:0], false, err
	}
	msg, ok, err := c.tryReceive(buf)
	if !ok && err == nil {
		c.wakeProducers(true)
	}
	return msg, ok, err
}

// tryReceive returns the next published message, if there is one. Each
// header is read once into locals and checked against the handle's own
// geometry before a byte of payload is touched.
func (c *MPSCConsumer) tryReceive(buf []byte) (msg []byte, ok bool, err error) {
	q := &c.q
	for q.err == nil {
		h := c.head
		if h == c.end && !c.refreshEnd() {
			return buf[:0], false, q.err
		}
		off := h & q.mask
		room, avail := q.capacity-off, c.end-h // room: at least 16
		st := q.state(off).Load()
		if p := q.pos(off).Load(); p != h {
			return buf[:0], false, q.corrupt("record at %d says position %d", h, p)
		}
		tok, length := uint32(st&mpscRecTokenMask), st>>mpscRecLenShift
		if !validToken(tok) {
			return buf[:0], false, q.corrupt("record at %d names token %#x", h, tok)
		}
		size := mpscRecordSize(length)
		switch st & (mpscRecStMask | 3<<30) >> mpscRecStShift {
		case mpscRecPadding:
			// Only where a record would not fit before the end, and
			// exactly to the end.
			if off == 0 || mpscHeaderSize+length != room || room > avail {
				return buf[:0], false, q.corrupt("padding record of %d bytes at offset %d (%d bytes to the end, %d claimed)", length, off, room, avail)
			}
			c.release(h + room)
		case mpscRecClaimed, mpscRecPublished:
			if length > q.maxMsg || size > room || size > avail {
				return buf[:0], false, q.corrupt("record of %d bytes at offset %d (%d bytes to the end, %d claimed)", length, off, room, avail)
			}
			if st>>mpscRecStShift&3 == mpscRecClaimed {
				if !c.claimerDead(h, tok) {
					return buf[:0], false, nil
				}
				if faultpoint.MPSC != nil {
					faultpoint.MPSC("claimer-dead")
				}
				// Dead, its state word is final; but it may have
				// published between our load and the liveness check.
				if q.state(off).Load() != st {
					continue
				}
				// Counted after head passes it: lost+received <= head/16.
				if !mpscConsumedOK(q.recvd.Load(), q.lost.Load()+1, h+size) {
					return buf[:0], false, c.countsCorrupt(h + size)
				}
				c.release(h + size)
				q.lost.Add(1)
				continue
			}
			n := q.recvd.Load() + 1 // only the consumer writes it
			if !mpscConsumedOK(n, q.lost.Load(), h+size) {
				return buf[:0], false, c.countsCorrupt(h + size)
			}
			msg = append(buf[:0], q.data[off+mpscHeaderSize:off+mpscHeaderSize+length]...)
			c.release(h + size)
			q.recvd.Store(n)
			return msg, true, nil
		default:
			return buf[:0], false, q.corrupt("record state word %#x at offset %d", st, off)
		}
	}
	return buf[:0], false, q.err
}

// countsCorrupt sets the sticky error for received and lost counts that do
// not fit below head h.
func (c *MPSCConsumer) countsCorrupt(h uint64) error {
	return c.q.corrupt("messages received %d and lost %d, more than the %d records below head %d",
		c.q.recvd.Load(), c.q.lost.Load(), h/mpscRecAlign, h)
}

// claimerDead reports whether the producer that claimed the record at h,
// tok, has died; asked only once we have waited an interval for the
// record (a live producer is copying its payload).
func (c *MPSCConsumer) claimerDead(h uint64, tok uint32) bool {
	if c.deadAt == h+1 {
		return true
	}
	if c.blockedAt != h {
		c.blockedAt = h
		c.blocked.reset()
	}
	if !c.blocked.due() {
		return false
	}
	if alive, _ := c.q.r.tokenAlive(tok); alive {
		return false
	}
	c.deadAt = h + 1
	return true
}

// refreshEnd reads and validates the claim word and reports whether a
// record lies at head. A claim word held by a dead claimer (asked once we
// have waited an interval on it) is taken back.
func (c *MPSCConsumer) refreshEnd() bool {
	// The head and role words are ours alone while we consume: anything
	// else in them was written from outside.
	if hw := c.q.head.Load(); hw != c.head {
		c.q.corrupt("head word %d, where this consumer released %d", hw, c.head)
		return false
	}
	if rw := c.q.consumerRole.Load(); rw != c.q.token {
		c.q.corrupt("consumer word %#x, not this consumer's token %#x", rw, c.q.token)
		return false
	}
	w := c.q.tail.Load()
	e, err := c.q.claimEnd(w, c.head)
	if err != nil {
		return false
	}
	c.end = e
	if e != c.head || w&mpscTailClaiming == 0 {
		return e != c.head
	}
	// Empty, and a producer holds the claim word: it may have died there.
	if c.blockedAt != e+1 { // +1: no record position, so no clash
		c.blockedAt = e + 1
		c.blocked.reset()
	}
	if c.blocked.due() && c.q.claimDead(w) {
		c.q.takeBack(w)
		return c.refreshEnd()
	}
	return false
}

// release frees the queue up to h: our read of the records before it
// happens before a producer reuses their bytes. Head is stored for every
// record: a consumer that dies leaves only the record it was receiving to
// its successor.
func (c *MPSCConsumer) release(h uint64) {
	c.head = h
	ringindex.Publish(c.q.head, h)
	c.wakeProducers(false)
}

// mpscWakeEvery is how much of the capacity the consumer frees between
// wake-ups of sleeping producers while it has records to read: a
// producer asleep on a full queue is woken once a quarter is free, not
// for every record (a futex wake, and four producers woken to share one
// record's room, per message), and once the queue is empty (or blocked on
// a record being written), when every byte it has passed is free.
const mpscWakeEvery = 4

// wakeProducers wakes the producers asleep on notFull, if any announced a
// sleep (the Dekker pair: head was stored before this load), once we have
// freed capacity/mpscWakeEvery bytes since the last wake-up, or at once if
// idle (we have no record to read). A producer whose wake-up is held back
// rechecks the room on its own within its 10 ms sleep slice.
func (c *MPSCConsumer) wakeProducers(idle bool) {
	if c.q.notFull.Load()&ringindex.Sleeping == 0 {
		c.wokeAt = c.head // none asleep: count from here
		return
	}
	if idle || c.head-c.wokeAt >= c.q.capacity/mpscWakeEvery {
		c.wokeAt = c.head
		ringindex.WakeSide(c.q.notFull, c.q.consWakes, c.sl)
	}
}

// waitRecord blocks until the record at head may be ready (or the
// handle's error is set).
func (c *MPSCConsumer) waitRecord(ctx context.Context) error {
	c.q.r.waiting.Add(1)
	defer c.q.r.waiting.Add(-1)
	return ringindex.Await(ctx, c.q.notEmpty, c.q.consSleeps, c.sl, false, func() bool {
		if !c.q.wakeWordOK(c.q.notEmpty.Load()) || c.q.err != nil || c.head == c.end && !c.refreshEnd() {
			return c.q.err != nil
		}
		st := c.q.state(c.head & c.q.mask).Load()
		return st>>mpscRecStShift&3 != mpscRecClaimed || c.claimerDead(c.head, uint32(st&mpscRecTokenMask))
	})
}

// Close closes the queue: producers' Sends return lockword.ErrRingClosed
// from then on, until a new consumer attaches. Messages still in the queue
// stay for that consumer. Later calls on c return lockword.ErrRingClosed.
func (c *MPSCConsumer) Close() {
	c.q.r.checkOpen("MPSCConsumer", c.q.name, "Close")
	ringindex.CloseWords(c.q.notEmpty, c.q.notFull, c.q.consWakes, c.sl)
	c.Detach()
}

// Detach gives up the consumer role without closing the queue, so that
// another process may attach as the consumer and receive what remains.
// Later calls on c return lockword.ErrRingClosed.
func (c *MPSCConsumer) Detach() {
	c.q.r.checkOpen("MPSCConsumer", c.q.name, "Detach")
	if c.q.err == nil {
		c.q.err = fmt.Errorf("%w: this consumer handle of MPSC queue %q was closed or detached", lockword.ErrRingClosed, c.q.name)
	}
	c.q.consumerRole.CompareAndSwap(c.q.token, 0)
}
