package shm

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/ringindex"
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
	shringNotEmpty       = 136 // uint32: the consumer's wake word (ringindex.Sleeping, ringindex.Closed)
	shringProducerSleeps = 144 // uint64: statistics
	shringProducerWakes  = 152 // uint64
	shringMessagesSent   = 160 // uint64: messages published, for inspection (producer)
	shringHead           = 256 // uint64: bytes released by the consumer (free-running)
	shringNotFull        = 264 // uint32: the producer's wake word
	shringConsumerSleeps = 272 // uint64
	shringConsumerWakes  = 280 // uint64
	shringMessagesRecvd  = 288 // uint64: messages received, for inspection (consumer)
	shringData           = 512 // capacity bytes of records
	shringAlign          = ringindex.FalseSharingRange

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

	token     uint32            // our owner token, written into role
	sl        ringindex.Sleeper // futex in bounded slices, checking the peer
	err       error             // sticky: corrupt ring, or detached
	lastCheck time.Time         // when the peer's liveness was last checked
	deadPeer  uint32            // a peer token found dead: no need to ask /proc again
	deadPID   uint32            // its PID
}

// sharedRingSleeper sleeps on a shared ring's wake word with the kernel
// futex (shared: the waker is another process), in slices of at most
// ringPeerCheckInterval, so that a context or a dead peer ends the wait.
type sharedRingSleeper struct{ e *ringEnd }

func (s sharedRingSleeper) Sleep(ctx context.Context, word *atomic.Uint32, val uint32) error {
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

func (s sharedRingSleeper) Wake(word *atomic.Uint32) { wakeShared(word, 1) }

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

// recordObject returns the bytes of the named object of kind, a header of
// header bytes then capacity bytes of records, creating it if the region
// has none of that name: the shape of a ring and of an MPSC queue, what
// naming the kind in errors. capacity must be a power of two from minCap
// to maxCap bytes, and equal to an existing object's (ErrObjectBounds).
// The caller holds r.mu.
func (r *Region) recordObject(what, name string, kind objectKind, header, capacity, minCap, maxCap int) ([]byte, error) {
	if capacity < minCap || capacity > maxCap || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("%w: %s %q capacity %d: must be a power of two from %d to %d bytes",
			ErrObjectBounds, what, name, capacity, minCap, maxCap)
	}
	o, err := r.object(name, kind, uint32(header+capacity))
	if err != nil {
		return nil, err
	}
	if o.size != uint32(header+capacity) {
		return nil, fmt.Errorf("%w: %s %q exists with %d bytes of records, not %d",
			ErrObjectBounds, what, name, int64(o.size)-int64(header), capacity)
	}
	return r.data[o.offset : o.offset+uint64(o.size) : o.offset+uint64(o.size)], nil
}

// attachRing fills e with the named ring, creating the ring with capacity
// bytes if the region has none of that name, and claims the producer's or
// the consumer's role.
func (r *Region) attachRing(e *ringEnd, name string, capacity int, producer bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	obj, err := r.recordObject("ring", name, kindRing, shringData, capacity, MinSharedRingCapacity, MaxSharedRingCapacity)
	if err != nil {
		return err
	}
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
	if (e.notEmpty.Load()|e.notFull.Load())&ringindex.Closed == 0 || e.head.Load() != e.tail.Load() {
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
	e.notEmpty.And(^uint32(ringindex.Closed))
	e.notFull.And(^uint32(ringindex.Closed))
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
		e.err = fmt.Errorf("%w: this %s handle of ring %q was closed or detached", lockword.ErrRingClosed, e.side, e.name)
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

func (e *ringEnd) stats() lockword.RingStats {
	s := lockword.RingStats{Wakes: e.wakes.Load() + e.peerWk.Load()}
	if e.side == "producer" {
		s.ProducerSleeps, s.ConsumerSleeps = e.sleeps.Load(), e.peerSleeps.Load()
	} else {
		s.ProducerSleeps, s.ConsumerSleeps = e.peerSleeps.Load(), e.sleeps.Load()
	}
	return s
}

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
		Closed:           word32(obj, shringNotEmpty).Load()&ringindex.Closed != 0,
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
