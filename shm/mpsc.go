package shm

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/faultpoint"
	"github.com/lockword/lockword/internal/ringindex"
)

// The shared multi-producer, single-consumer byte queue: what its two
// handles share (the words, attach, sleeping, taking back a dead claimer's
// claim, validation, inspection). The handles are mpscproducer.go's and
// mpscconsumer.go's; the layout is mpsclayout.go's and docs/abi.md's.
//
// Errors are the shared ring's sentinels, since a user of one meets the
// same situations in the other: ErrPeerDead, ErrRingBusy (a second live
// consumer), ErrMessageTooLarge, lockword.ErrRingClosed; a queue whose
// words no valid history produces is lockword.ErrCorrupt.

func init() {
	registerKind(kindMPSC, &kindInfo{
		name: "mpsc queue", align: mpscAlign,
		ownerWords: []uint32{mpscConsumerRole},
		inspect:    inspectMPSC,
	})
}

// mpscQueue is what the producer and the consumer handles share: the
// queue's words in the mapping and the geometry, which the handle holds
// itself (from the object table) and never reads from the queue.
type mpscQueue struct {
	r    *Region
	name string

	data     []byte // the capacity bytes of records
	capacity uint64 // a power of two
	mask     uint64 // capacity-1
	maxMsg   uint64 // capacity - mpscHeaderSize

	consumerRole, producers *atomic.Uint32
	tail, head              *atomic.Uint64
	notEmpty, notFull       *atomic.Uint32
	prodSleeps, prodWakes   *atomic.Uint64
	consSleeps, consWakes   *atomic.Uint64
	sent, recvd             *atomic.Uint64
	recovered, lost         *atomic.Uint64

	token uint32 // our owner token
	err   error  // sticky: corrupt queue, or closed handle
}

// attachMPSC fills q with the named queue, creating it with capacity bytes
// of record space if the region has no object of that name.
func (r *Region) attachMPSC(q *mpscQueue, name string, capacity int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	obj, err := r.recordObject("MPSC queue", name, kindMPSC, mpscData, capacity, MinMPSCCapacity, MaxMPSCCapacity)
	if err != nil {
		return err
	}
	*q = mpscQueue{
		r: r, name: name,
		data:     obj[mpscData:],
		capacity: uint64(capacity), mask: uint64(capacity) - 1, maxMsg: uint64(capacity) - mpscHeaderSize,
		consumerRole: word32(obj, mpscConsumerRole), producers: word32(obj, mpscProducers),
		tail: word64(obj, mpscTail), head: word64(obj, mpscHead),
		notEmpty: word32(obj, mpscNotEmpty), notFull: word32(obj, mpscNotFull),
		prodSleeps: word64(obj, mpscProdSleeps), prodWakes: word64(obj, mpscProdWakes),
		consSleeps: word64(obj, mpscConsSleeps), consWakes: word64(obj, mpscConsWakes),
		sent: word64(obj, mpscMsgsSent), recvd: word64(obj, mpscMsgsRecvd),
		recovered: word64(obj, mpscRecovered), lost: word64(obj, mpscLost),
		token: r.token,
	}
	return nil
}

// corrupt records, and returns, a sticky error wrapping lockword.ErrCorrupt.
func (q *mpscQueue) corrupt(format string, a ...any) error {
	q.err = fmt.Errorf("%w: MPSC queue %q in %s: %s", lockword.ErrCorrupt, q.name, q.r.path, fmt.Sprintf(format, a...))
	return q.err
}

// state and pos return the two header words of the record at offset off.
func (q *mpscQueue) state(off uint64) *atomic.Uint64 { return word64(q.data, off+mpscRecState) }
func (q *mpscQueue) pos(off uint64) *atomic.Uint64   { return word64(q.data, off+mpscRecPos) }

// claimEnd validates a claim word read with head h and returns the
// position where the published records end: the free position, or the
// claimed one. A word no valid history produces sets the sticky error.
func (q *mpscQueue) claimEnd(w, h uint64) (uint64, error) {
	p := w
	if w&mpscTailClaiming != 0 {
		if !validToken(uint32(w & ownerMask)) {
			return 0, q.corrupt("claim word %#x names no valid token", w)
		}
		p = mpscClaimPos(w, h)
	}
	if p%mpscRecAlign != 0 || p-h > q.capacity {
		return 0, q.corrupt("tail %d with head %d (capacity %d)", p, h, q.capacity)
	}
	return p, nil
}

// positions reads the claim word and head as one moment's: tail, head,
// tail again, until the two tails agree (a head judged against a tail read
// on either side of it alone may be ahead of it, or more than the capacity
// behind, on a busy queue), and validates them. t is where published
// records end.
func (q *mpscQueue) positions() (w, h, t uint64, err error) {
	w = q.tail.Load()
	for i := 0; ; i++ {
		h = q.head.Load()
		again := q.tail.Load()
		if again == w || i == 1000 {
			break
		}
		w = again
	}
	t, err = q.claimEnd(w, h)
	return w, h, t, err
}

// mpscCounts are the queue's counters, read by counts.
type mpscCounts struct{ sent, recovered, recvd, lost uint64 }

// counts reads the counters, then the positions, and checks each counter
// against its bound (mpsclayout.go); an impossible one sets the sticky
// error.
func (q *mpscQueue) counts() (mpscCounts, error) {
	s := mpscCounts{q.sent.Load(), q.recovered.Load(), q.recvd.Load(), q.lost.Load()}
	_, h, t, err := q.positions()
	if err != nil {
		return s, err
	}
	if reason := mpscCountsReason(s.sent, s.recovered, s.recvd, s.lost, h, t); reason != "" {
		return s, q.corrupt("%s", reason)
	}
	return s, nil
}

// wakeWordOK reports whether a wake word holds only its two bits, setting
// the sticky error if not.
func (q *mpscQueue) wakeWordOK(v uint32) bool {
	if v&^mpscWakeBits == 0 {
		return true
	}
	q.corrupt("wake word %#x holds bits other than sleeping and closed", v)
	return false
}

// takeBack frees the claim word w, which names a claimer whose process has
// died, as docs/abi.md says: past the claimer's record if it wrote the
// header (its position word is the claim's, its state word carries the
// token), else at the claimed position, where nothing was written. One CAS
// from w: of two takers, or a taker and a claimer that was alive after
// all, only one moves the word.
func (q *mpscQueue) takeBack(w uint64) {
	// Head first, then w again: a w still current lies at or past head.
	h := q.head.Load()
	if q.tail.Load() != w {
		return
	}
	p, err := q.claimEnd(w, h)
	if err != nil {
		return
	}
	next, off := p, p&q.mask
	st := q.state(off).Load()
	if q.pos(off).Load() == p && uint32(st&mpscRecTokenMask) == uint32(w&ownerMask) {
		length, room := st>>mpscRecLenShift, q.capacity-off
		switch st & (mpscRecStMask | 3<<30) >> mpscRecStShift {
		case mpscRecClaimed:
			if size := mpscRecordSize(length); length <= q.maxMsg && size <= room {
				next = p + size
			}
		case mpscRecPadding:
			if off != 0 && mpscHeaderSize+length == room {
				next = p + room
			}
		}
	}
	if q.tail.CompareAndSwap(w, next) {
		q.recovered.Add(1)
	}
}

// claimDead reports whether the claim word w names a process that has died
// (its token valid; the word corrupt otherwise, and reported by claimEnd).
func (q *mpscQueue) claimDead(w uint64) bool {
	tok := uint32(w & ownerMask)
	if !validToken(tok) {
		return false
	}
	alive, _ := q.r.tokenAlive(tok)
	return !alive
}

// mpscSleeper sleeps on one of the queue's wake words with the shared
// kernel futex, in slices of at most ringPeerCheckInterval, so that a
// context, a dead peer and a dead claimer are noticed. notFull has many
// sleepers (every waiting producer), woken all at once; notEmpty one.
type mpscSleeper struct {
	q *mpscQueue
	// peerDead, if set, is asked before each sleep (the producers ask
	// whether the consumer lives).
	peerDead func() error
}

func (s mpscSleeper) Sleep(ctx context.Context, word *atomic.Uint32, val uint32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.peerDead != nil {
		if err := s.peerDead(); err != nil {
			return err
		}
	}
	sleepShared(ctx, word, val, ringSleepSlice)
	return nil
}

// ManySleepers reports that notFull has many sleepers (every waiting
// producer): a producer that stops waiting leaves the bit to the others
// (ringindex.ManySleeper).
func (s mpscSleeper) ManySleepers(word *atomic.Uint32) bool { return word == s.q.notFull }

var _ ringindex.ManySleeper = mpscSleeper{}

func (s mpscSleeper) Wake(word *atomic.Uint32) {
	n := 1
	if word == s.q.notFull {
		n = wakeAll
	}
	wakeShared(word, n)
}

// deadline paces the liveness checks of a blocked call: due reports true
// at most once per ringPeerCheckInterval, the first time an interval after
// start (so a claimer that is merely slow is not asked about at once).
type deadline struct{ next time.Time }

func (d *deadline) due() bool {
	now := time.Now()
	if d.next.IsZero() {
		d.next = now.Add(ringPeerCheckInterval)
		return false
	}
	if now.Before(d.next) {
		return false
	}
	d.next = now.Add(ringPeerCheckInterval)
	return true
}

func (d *deadline) reset() { d.next = time.Time{} }

// MPSCInfo is the state of a shared MPSC byte queue (MPSCProducer,
// MPSCConsumer), as Inspect reads it, word by word: the counts may
// disagree by a message sent meanwhile.
type MPSCInfo struct {
	Capacity int `json:"capacity_bytes"`
	// Consumer is the process holding the consumer role; nil, and left
	// out of the JSON form, for none.
	Consumer *ProcessInfo `json:"consumer,omitempty"`
	// Producers is the producer handles attached (a producer that died
	// without closing its handle stays counted).
	Producers int `json:"producers"`
	// Claiming is the process that holds the claim word now, if any.
	Claiming *ProcessInfo `json:"claiming,omitempty"`
	// Used is the record bytes claimed and not yet received, 0..Capacity.
	Used int64 `json:"used_bytes"`
	// Closed: the consumer closed the queue.
	Closed bool `json:"closed"`
	// MessagesSent and MessagesReceived count messages since the queue
	// was created. Lost counts records that the consumer skipped because
	// their producer died between claiming them and publishing them;
	// ClaimsRecovered, claim words taken back from dead claimers.
	MessagesSent     uint64 `json:"messages_sent"`
	MessagesReceived uint64 `json:"messages_received"`
	Lost             uint64 `json:"lost"`
	ClaimsRecovered  uint64 `json:"claims_recovered"`
	// Corrupt: a word holds what no valid history writes (impossible
	// indices, a negative producer count, a consumer word that is no
	// owner token); the handles return lockword.ErrCorrupt on the
	// indices. Used is then 0, and CorruptReason says which word.
	Corrupt       bool   `json:"corrupt,omitempty"`
	CorruptReason string `json:"corrupt_reason,omitempty"`
}

// inspectMPSC describes an MPSC queue; it only reads.
func inspectMPSC(insp *inspector, obj []byte, info *ObjectInfo) {
	if len(obj) < mpscData+MinMPSCCapacity {
		return // too small to be one (attachMPSC refuses it)
	}
	mi := &MPSCInfo{
		Capacity:         len(obj) - mpscData,
		Consumer:         insp.role(word32(obj, mpscConsumerRole).Load()),
		Producers:        int(int32(word32(obj, mpscProducers).Load())),
		Closed:           word32(obj, mpscNotEmpty).Load()&ringindex.Closed != 0,
		MessagesSent:     word64(obj, mpscMsgsSent).Load(),
		MessagesReceived: word64(obj, mpscMsgsRecvd).Load(),
		Lost:             word64(obj, mpscLost).Load(),
		ClaimsRecovered:  word64(obj, mpscRecovered).Load(),
	}
	// Tail, head, tail, as positions does: a head read before the tail
	// may lie more than capacity behind it on a busy queue (head moved,
	// producers filled the room) and look impossible.
	tail, head := word64(obj, mpscTail), word64(obj, mpscHead)
	var h uint64
	w := tail.Load()
	for range 1000 {
		h = head.Load()
		if faultpoint.MPSC != nil {
			faultpoint.MPSC("inspect-head")
		}
		again := tail.Load()
		if again == w {
			break
		}
		w = again
	}
	t := w
	if w&mpscTailClaiming != 0 {
		mi.Claiming = insp.role(uint32(w & ownerMask))
		t = mpscClaimPos(w, h)
	}
	cw := word32(obj, mpscConsumerRole).Load()
	ne, nf := word32(obj, mpscNotEmpty).Load(), word32(obj, mpscNotFull).Load()
	switch used := t - h; {
	case used > uint64(mi.Capacity) || t%mpscRecAlign != 0 || h%mpscRecAlign != 0:
		mi.CorruptReason = fmt.Sprintf("indices impossible: head %d, tail %d", h, t)
	case w&mpscTailClaiming != 0 && !validToken(uint32(w&ownerMask)):
		mi.CorruptReason = fmt.Sprintf("claim word %#x names no owner token", w)
	case mi.Producers < 0:
		mi.CorruptReason = fmt.Sprintf("producer count %d", mi.Producers)
	case cw&^ownerMask != 0 || cw != 0 && !validToken(cw):
		mi.CorruptReason = fmt.Sprintf("consumer word %#x is no owner token", cw)
	case ne&^mpscWakeBits != 0 || nf&^mpscWakeBits != 0:
		mi.CorruptReason = fmt.Sprintf("wake words %#x, %#x hold bits other than sleeping and closed", ne, nf)
	default:
		// The counters were read before head and tail (above).
		mi.CorruptReason = mpscCountsReason(mi.MessagesSent, mi.ClaimsRecovered, mi.MessagesReceived, mi.Lost, h, t)
		if mi.CorruptReason == "" && used > 0 {
			mi.CorruptReason = mpscHeadRecordReason(obj, h, t)
		}
		if mi.CorruptReason == "" {
			mi.Used = int64(used)
		}
	}
	mi.Corrupt = mi.CorruptReason != ""
	info.MPSC = mi
}

// mpscHeadRecordReason judges the header of the record at head h, below
// the end t, as the consumer would before receiving it; "" if it is one
// the protocol writes. Its header was written before the claim word moved
// past it, so it is this record's unless the consumer released it since
// and a producer reused the bytes: a verdict stands only if head has not
// moved meanwhile.
func mpscHeadRecordReason(obj []byte, h, t uint64) string {
	data := obj[mpscData:]
	capacity := uint64(len(data))
	off := h & (capacity - 1)
	st, p := word64(data, off+mpscRecState).Load(), word64(data, off+mpscRecPos).Load()
	length, room := st>>mpscRecLenShift, capacity-off
	var reason string
	switch state := st & (mpscRecStMask | 3<<30) >> mpscRecStShift; {
	case p != h:
		reason = fmt.Sprintf("record at head %d says position %d", h, p)
	case !validToken(uint32(st & mpscRecTokenMask)):
		reason = fmt.Sprintf("record at head %d names token %#x", h, st&mpscRecTokenMask)
	case state == mpscRecPadding && (off == 0 || mpscHeaderSize+length != room || room > t-h),
		(state == mpscRecClaimed || state == mpscRecPublished) && (length > capacity-mpscHeaderSize || mpscRecordSize(length) > min(room, t-h)),
		state == 0 || state > mpscRecPadding:
		reason = fmt.Sprintf("record state word %#x at head %d (%d bytes to the end, %d claimed)", st, h, room, t-h)
	}
	if reason != "" && word64(obj, mpscHead).Load() != h {
		return "" // released meanwhile: the bytes may be a new record's
	}
	return reason
}
