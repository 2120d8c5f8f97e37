package shm

import (
	"context"
	"fmt"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/faultpoint"
	"github.com/lockword/lockword/internal/ringindex"
)

// An MPSCProducer is a sending side of a shared multi-producer,
// single-consumer byte queue: a bounded queue of variable-length byte
// messages in a Region, from any number of producer handles, in any number
// of processes, to one consumer (an MPSCConsumer). Get one with
// (*Region).MPSCProducer. Linux only, as regions are.
//
// The name says MPSC because that is the contract a caller must keep: one
// consumer at a time (a second live one gets ErrRingBusy), and the single
// consumer is what lets it read without any atomic read-modify-write. The
// in-process lockword.Queue, many consumers included, is another shape.
//
// # Algorithm
//
// The record layout follows Agrona's ManyToOneRingBuffer (Real Logic;
// Thompson and Montgomery): producers claim space by moving one tail word,
// write the payload in place, and publish the record by storing its header
// last; the single consumer reads records in order at head and frees them
// by storing head. This queue differs where processes can die. Agrona's
// producer claims with one CAS and then writes a header that does not say
// who claimed it, so a claimer that dies before that write leaves a
// hole that its unblock() can only guess about after a timeout (and a slow
// live producer may then write into space already given away). Here:
//
//   - The claim CAS writes the claimer's owner token (process-table slot and
//     generation) into the tail word with the claimed position: from then
//     until the claimer stores the free tail past its record, anyone can
//     ask whether the claimer lives (10 ms checks, as the rings').
//   - The claimer writes the record's header, the state word (token,
//     "claimed", length) and then the position word, and only then frees
//     the tail word: three stores, no system call. A claimer that died in
//     between is recognised by whoever finds its claim: the position word
//     (unique to one record for the queue's life) says whether the header
//     is this claim's or a lap-old one at the same offset; it frees the
//     tail past the record, or at it, with one CAS (docs/abi.md).
//   - The payload is copied outside the claim, in parallel with other
//     producers, and published by one store of the state word. A
//     producer that dies before that leaves a claimed record with its
//     token: the consumer waits for it, and once the token's process is
//     dead skips it and counts it lost. A message is delivered only once
//     published, so never torn.
//
// The cost of that robustness: producers are not lock-free against one
// another. While one holds the claim word (three stores) others spin, then
// yield; a claimer preempted there delays them, one that dies there is
// taken back after 10 ms.
//
// # Layout
//
// The object (docs/abi.md, "MPSC queue object"; mpsclayout.go) holds the
// consumer's role word, the producer count, the claim word (tail), the
// consumer's head, the two wake words and statistics, each side's words on
// its own cache-line pair, then capacity bytes of records:
//
//	offset  size  field
//	0       8     state: bits 0-27 token, 28-29 state (1 claimed,
//	              2 published, 3 padding), 32-63 length
//	8       8     position: the record's free-running byte position
//	16      n     payload, zero to 15 bytes up to a multiple of 16
//
//	claim word (tail)         meaning
//	0 | position              free: the next record goes there
//	1 | position/8 | token    claiming: token writes the header at position
//
// A record never wraps: one that does not fit before the end of the buffer
// is preceded by a padding record (claimed and written on its own) that
// runs to the end.
//
// # Blocking
//
// Send waits while the queue lacks room, Receive while the record at head
// is not published; both spin and yield first, then announce the sleep in
// their wake word and sleep on it with the shared kernel futex, as the
// rings do (ringindex.Await): a busy queue makes no system call. Every
// waiting producer sleeps on one word, and the consumer wakes all of them
// when it frees space and one announced a sleep. Sleeps last at most 10 ms,
// so a context's end, a dead consumer or a dead claimer is noticed.
//
// # Peer death
//
// A producer whose Send finds no room while the consumer's process is dead
// gets ErrPeerDead, the rings' error for the same case: every message it
// sent before was accepted and stays in the queue for the next consumer,
// which attaches in the dead one's place. A dead producer is no error to
// the consumer: other producers go on; its published messages are received,
// its unpublished claim is skipped and counted (Lost in MPSCInfo).
//
// # Untrusted memory
//
// Every word read from the queue is validated against the handle's own
// geometry before it is used: an impossible one is lockword.ErrCorrupt,
// never a read outside the queue, a panic, or a wait past the context.
//
// # Memory model
//
// A Send synchronizes before the Receive that returns its message. Messages
// of one producer handle arrive in the order sent; messages of different
// producers, in the order of their claims.
//
// An MPSCProducer is used by one goroutine at a time (open one handle per
// goroutine), and must not be used after its region is closed.
type MPSCProducer struct {
	_  noCopy
	q  mpscQueue
	sl mpscSleeper
	// headCache is the last head read and validated.
	headCache uint64
	peerCheck deadline
	closed    bool
}

// MPSCProducer attaches a producer to the shared MPSC queue named name (1
// to 48 bytes of UTF-8 without control characters, else ErrObjectName),
// creating the queue with capacity bytes of record space if the region has
// no object of that name. capacity must be a power of two from
// MinMPSCCapacity to MaxMPSCCapacity, and equal to an existing queue's.
// Any number of producers may attach. Errors: ErrObjectKind (name is
// another kind of object), ErrObjectBounds (bad capacity, or not the
// existing queue's), ErrRegionFull, ErrRegionClosed, lockword.ErrCorrupt
// (the queue's indices are impossible), ErrUnsupported off Linux.
func (r *Region) MPSCProducer(name string, capacity int) (*MPSCProducer, error) {
	p := new(MPSCProducer)
	if err := r.attachMPSC(&p.q, name, capacity); err != nil {
		return nil, err
	}
	p.sl = mpscSleeper{q: &p.q, peerDead: p.consumerDead}
	if _, err := p.q.counts(); err != nil {
		return nil, err
	}
	_, p.headCache, _, _ = p.q.positions() // validated by counts
	if n := int32(p.q.producers.Add(1)); n < 1 {
		p.q.producers.Add(^uint32(0))
		return nil, p.q.corrupt("producer count %d after this attach", n)
	}
	return p, nil
}

// Cap returns the queue's capacity in bytes of record space. Each message
// takes 16 bytes of header plus its length rounded up to 16.
func (p *MPSCProducer) Cap() int { return int(p.q.capacity) }

// MaxMessage returns the largest message Send accepts, in bytes: Cap()-16.
// Records never wrap: a message longer than the space left before the end
// of the buffer waits (TrySend: no room) until the consumer has passed the
// padding record that fills it, even in an empty queue. So a message over
// about Cap()/2 may need a Receive before it fits; size the capacity at
// least twice the largest message where that matters.
func (p *MPSCProducer) MaxMessage() int { return int(p.q.maxMsg) }

// Send copies msg into the queue as one message, waiting while the queue
// lacks room. It returns nil once the message is published; if there is
// room it is sent even when ctx is already done. Errors, with nothing
// sent: lockword.ErrRingClosed (the consumer closed the queue, or this
// handle was closed), ErrPeerDead (no room, and the consumer's process has
// died), ErrMessageTooLarge, lockword.ErrCorrupt, ctx.Err(), or
// lockword.ErrNilContext for a nil ctx.
func (p *MPSCProducer) Send(ctx context.Context, msg []byte) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if err := p.q.r.errClosed("MPSCProducer", p.q.name, "Send"); err != nil {
		return err
	}
	for {
		sent, need, err := p.trySend(ctx, msg)
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

// TrySend sends msg if the queue has room for it now, and reports whether
// it did. It waits only while another producer holds the claim word (a few
// stores). Errors are Send's, less the context's.
func (p *MPSCProducer) TrySend(msg []byte) (bool, error) {
	if err := p.q.r.errClosed("MPSCProducer", p.q.name, "TrySend"); err != nil {
		return false, err
	}
	for {
		sent, need, err := p.trySend(nil, msg)
		if sent || err != nil || need != 0 {
			return sent, err
		}
	}
}

// trySend sends msg if the queue has room. If not, need is the free space
// in bytes to wait for; sent false with need 0 means it published a padding
// record to the end of the buffer and must be called again. A nil ctx is
// TrySend's: a claim word held by a live producer past the spin is then no
// room (need 1), rather than a wait.
func (p *MPSCProducer) trySend(ctx context.Context, msg []byte) (sent bool, need uint64, err error) {
	q := &p.q
	if q.err != nil {
		return false, 0, q.err
	}
	n := uint64(len(msg))
	if n > q.maxMsg {
		return false, 0, fmt.Errorf("%w: %d bytes, MPSC queue %q holds messages of up to %d", ErrMessageTooLarge, n, q.name, q.maxMsg)
	}
	rec := mpscRecordSize(n)
	var held claimWait
	for {
		w := q.tail.Load()
		if w&mpscTailClaiming != 0 {
			busy, err := held.wait(ctx, q, w)
			if err != nil {
				return false, 0, err
			}
			if busy {
				return false, 1, nil
			}
			continue
		}
		t := w
		if t%mpscRecAlign != 0 || t-p.headCache > q.capacity {
			if !p.refreshHead(t, 0) {
				return false, 0, q.err
			}
		}
		off := t & q.mask
		need = rec
		pad := q.capacity-off < rec
		if pad {
			need = q.capacity - off // at least 16: off is a multiple of 16
		}
		if t-p.headCache > q.capacity-need && !p.refreshHead(t, need) {
			return false, need, q.err
		}
		if ne := q.notEmpty.Load(); !q.wakeWordOK(ne) {
			return false, 0, q.err
		} else if ne&ringindex.Closed != 0 {
			return false, 0, fmt.Errorf("%w: MPSC queue %q in %s was closed by its consumer", lockword.ErrRingClosed, q.name, q.r.path)
		}
		claim := mpscClaimWord(t, q.token)
		if !q.tail.CompareAndSwap(t, claim) { // another producer claimed t first
			continue
		}
		// Holding the claim at t, every record counted sent or taken back
		// lies below t; the counters share the claim word's cache line,
		// which the CAS just brought here.
		if reason := mpscCountsReason(q.sent.Load(), q.recovered.Load(), 0, 0, 0, t); reason != "" {
			q.tail.CompareAndSwap(claim, t) // give back the claim, unused
			return false, 0, q.corrupt("%s", reason)
		}
		if faultpoint.MPSC != nil {
			faultpoint.MPSC("claiming")
		}
		// The header, state word then position word, before the claim
		// word is freed: whoever takes back a dead claim trusts the state
		// word only if the position word is this record's.
		st := mpscStateWord(q.token, mpscRecClaimed, n)
		if pad {
			st = mpscStateWord(q.token, mpscRecPadding, need-mpscHeaderSize)
		}
		q.state(off).Store(st)
		q.pos(off).Store(t)
		if !q.tail.CompareAndSwap(claim, t+need) {
			// Only a taker who found us dead moves our claim: the word
			// was written from outside.
			return false, 0, q.corrupt("claim word %#x taken from a live claimer", claim)
		}
		if pad {
			// A padding record is published by freeing the claim word;
			// a consumer asleep at it must move on, or it would wait out
			// its slice while we wait for the room it frees.
			p.wakeConsumer()
			return false, 0, nil
		}
		if faultpoint.MPSC != nil {
			faultpoint.MPSC("claimed")
		}
		copy(q.data[off+mpscHeaderSize:off+mpscHeaderSize+n], msg)
		// Publish: the payload above is written before this store, and
		// the consumer loads the state word before it reads them. A swap
		// orders it before the wake word's load (ringindex.Publish).
		q.state(off).Swap(mpscStateWord(q.token, mpscRecPublished, n))
		q.sent.Add(1)
		p.wakeConsumer()
		return true, 0, nil
	}
}

// wakeConsumer wakes the consumer if it announced a sleep (the Dekker pair
// with its announce-then-look; see ringindex.Await).
func (p *MPSCProducer) wakeConsumer() {
	if p.q.notEmpty.Load()&ringindex.Sleeping != 0 {
		ringindex.WakeSide(p.q.notEmpty, p.q.prodWakes, p.sl)
	}
}

// refreshHead reads and validates the consumer's index, and reports
// whether need bytes are free past the free tail t, or that the tail moved
// on (the claim would fail: look again). Tail, head, then tail again: only
// a tail unchanged around the head's load is checked against it (a head
// read before a tail may be more than capacity behind it; one read after,
// past it), so a valid queue is never reported corrupt. An impossible pair
// sets the sticky error.
func (p *MPSCProducer) refreshHead(t, need uint64) bool {
	h := p.q.head.Load()
	w := p.q.tail.Load()
	if w != t {
		return true
	}
	if _, err := p.q.claimEnd(w, h); err != nil || h%mpscRecAlign != 0 {
		if err == nil {
			p.q.corrupt("head %d", h)
		}
		return false
	}
	p.headCache = h
	return t-h <= p.q.capacity-need
}

// waitRoom blocks until need bytes may be free (or the handle's error is
// set). Any free tail is judged against the head it reads.
func (p *MPSCProducer) waitRoom(ctx context.Context, need uint64) error {
	p.q.r.waiting.Add(1)
	defer p.q.r.waiting.Add(-1)
	p.peerCheck.reset()
	return ringindex.Await(ctx, p.q.notFull, p.q.prodSleeps, p.sl, true, func() bool {
		if !p.q.wakeWordOK(p.q.notFull.Load()) {
			return true
		}
		w := p.q.tail.Load()
		if w&mpscTailClaiming != 0 {
			return true // another producer is moving the tail: look again
		}
		return p.refreshHead(w, need) || p.q.err != nil
	})
}

// consumerDead returns an error wrapping ErrPeerDead if the consumer role
// names a process that has died (checked at most every 10 ms); nil if it
// lives or nobody holds the role (a consumer may still attach).
func (p *MPSCProducer) consumerDead() error {
	if !p.peerCheck.due() {
		return nil
	}
	tok := p.q.consumerRole.Load()
	if tok == 0 {
		return nil
	}
	if tok&^ownerMask != 0 || !validToken(tok) {
		return p.q.corrupt("consumer word %#x is no owner token", tok)
	}
	alive, pid := p.q.r.tokenAlive(tok)
	if alive {
		return nil
	}
	who := "a process that is gone"
	if pid != 0 {
		who = fmt.Sprintf("PID %d, gone", pid)
	}
	return fmt.Errorf("%w: the consumer of MPSC queue %q in %s (%s); a new consumer may attach", ErrPeerDead, p.q.name, p.q.r.path, who)
}

// claimWait is a producer's wait while another holds the claim word: spin,
// then yield the processor, and every 10 ms ask whether the claimer lives, taking its
// claim back if not. The context ends the wait only after the spin (a
// claim is held for three stores), so that a Send with room sends even
// with a done context. With a nil ctx (TrySend) it asks at once after the
// spin and reports busy instead of yielding: a claim word that a live
// process holds for ever (written from outside) never hangs TrySend.
type claimWait struct {
	spins int
	check deadline
}

func (c *claimWait) wait(ctx context.Context, q *mpscQueue, w uint64) (busy bool, err error) {
	c.spins++
	if c.spins < claimSpins {
		procyield(16)
		return false, nil
	}
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		osYield() // the claimer may be another process, preempted
		if !c.check.due() {
			return false, nil
		}
	}
	if h := q.head.Load(); q.tail.Load() != w {
		return false, nil // the claim is over: w may lie behind head now
	} else if _, err := q.claimEnd(w, h); err != nil {
		return false, err
	}
	if q.claimDead(w) {
		q.takeBack(w)
		return false, nil
	}
	return ctx == nil, nil
}

// claimSpins is how many looks, a pause hint apart, a producer takes at a
// held claim word before yielding: the claimer holds it for three stores.
const claimSpins = 64

// Close gives up this producer handle; the queue and the other producers
// go on. Later calls on p return lockword.ErrRingClosed.
func (p *MPSCProducer) Close() {
	p.q.r.checkOpen("MPSCProducer", p.q.name, "Close")
	if p.closed {
		return
	}
	p.closed = true
	p.q.producers.Add(^uint32(0))
	if p.q.err == nil {
		p.q.err = fmt.Errorf("%w: this producer handle of MPSC queue %q was closed", lockword.ErrRingClosed, p.q.name)
	}
}
