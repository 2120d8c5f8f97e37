package shm

import (
	"fmt"

	"github.com/lockword/lockword/internal/ringindex"
)

// The layout of the shared multi-producer byte queue (MPSCProducer,
// MPSCConsumer): kind 11, docs/abi.md "MPSC queue object". A C twin reads
// the same words; offsets are asserted by TestMPSCLayout. Offsets are
// within the object; words are in native byte order. All zero is an empty,
// open queue with no consumer and no producer.
const (
	mpscConsumerRole = 0   // uint32: the consumer's owner token; 0: none
	mpscProducers    = 4   // uint32: producer handles attached (attach +1, Close -1; a dead one's stays)
	mpscTail         = 128 // uint64: the claim word (mpscTail* states below)
	mpscNotEmpty     = 136 // uint32: the consumer's wake word (ringindex.Sleeping, ringindex.Closed)
	mpscProdSleeps   = 144 // uint64: statistics, every producer (atomic add)
	mpscProdWakes    = 152 // uint64
	mpscMsgsSent     = 160 // uint64: messages published (atomic add, after the publish)
	mpscRecovered    = 168 // uint64: claims of dead producers taken back from the claim word (anyone)
	mpscHead         = 256 // uint64: bytes released by the consumer (free-running, a multiple of 16)
	mpscNotFull      = 264 // uint32: the producers' wake word (every producer sleeps on it)
	mpscConsSleeps   = 272 // uint64
	mpscConsWakes    = 280 // uint64
	mpscMsgsRecvd    = 288 // uint64: messages received (consumer)
	mpscLost         = 296 // uint64: records skipped because their claimer died before publishing (consumer)
	mpscData         = 512 // capacity bytes of records
	mpscAlign        = ringindex.FalseSharingRange

	// The claim word (tail) has two states. Free: bit 63 clear, bits
	// 0-62 the byte position where the next record goes (free-running, a
	// multiple of 16). Claiming: bit 63 set, bits 28-62 that position
	// divided by 8, modulo 2^35, and bits 0-27 the claimer's owner token;
	// the claimer writes its record's header, then stores the free state
	// with the position past its record. Bits 28-62 are rebuilt into a
	// full position from head (the position lies within capacity of it).
	mpscTailClaiming = 1 << 63
	mpscTailPosShift = 28
	mpscTailPosBits  = 35

	// A record is a 16-byte header and its payload padded to 16 bytes; it
	// starts at a multiple of 16 and never wraps (so the space left
	// before the end of the buffer always holds a padding header). The header is two
	// 64-bit words: the state word at 0, then the position word at 8.
	mpscRecState     = 0  // uint64: bits 0-27 token, 28-29 state, 30-31 zero, 32-63 length
	mpscRecPos       = 8  // uint64: the record's free-running position, written after the state word
	mpscHeaderSize   = 16 // bytes before the payload
	mpscRecAlign     = 16 // records start at multiples of this
	mpscRecTokenMask = ownerMask
	mpscRecStShift   = 28
	mpscRecStMask    = 3 << mpscRecStShift
	mpscRecLenShift  = 32

	// Record states (bits 28-29 of the state word).
	mpscRecClaimed   = 1 // claimed: the payload is being written; wait, or skip once the token's process is dead
	mpscRecPublished = 2 // a message of length bytes, complete
	mpscRecPadding   = 3 // nothing: skip length bytes, to the end of the buffer
)

// Capacity limits of a shared MPSC queue, in bytes of record space.
const (
	// MinMPSCCapacity is the smallest capacity Region.MPSCProducer and
	// MPSCConsumer accept: 128 bytes.
	MinMPSCCapacity = 128
	// MaxMPSCCapacity is the largest: 1 GiB.
	MaxMPSCCapacity = 1 << 30
)

// Bounds on the words that have one, checked wherever they are read (and
// by Inspect): a word past its bound is lockword.ErrCorrupt.
//   - The wake words hold only ringindex.Sleeping and ringindex.Closed.
//   - Every record takes at least mpscRecAlign bytes and is counted after
//     its bytes were claimed (sent, after the claim that lies below tail)
//     or released (received and lost, after head moved past it): so
//     sent <= tail/16 and received+lost <= head/16, each counter read
//     before the position it is judged against.
//   - A claim taken back either moves tail past a record (at least 16
//     bytes) or belongs to a process that died holding the claim word,
//     and a region issues at most mpscMaxDeaths owner tokens before one
//     comes back: claims recovered <= tail/16 + mpscMaxDeaths.
//   - The consumer's head word is its own: it must read back as the
//     consumer stored it, and the role word must stay its token.
//
// The sleep and wake statistics have no bound, and are only shown.
const (
	mpscWakeBits  = ringindex.Sleeping | ringindex.Closed
	mpscMaxDeaths = regionProcSlots * ownerGenMax
)

// mpscCountsReason judges the counters against the positions, tail t and
// head h, each read after the counters it bounds; "" if they hold.
func mpscCountsReason(sent, recovered, recvd, lost, h, t uint64) string {
	switch recs := t / mpscRecAlign; {
	case sent > recs:
		return fmt.Sprintf("messages sent %d, more than the %d records below tail %d", sent, recs, t)
	case recovered > recs+mpscMaxDeaths:
		return fmt.Sprintf("claims recovered %d, more than the %d records below tail %d and %d process deaths", recovered, recs, t, uint64(mpscMaxDeaths))
	case !mpscConsumedOK(recvd, lost, h):
		return fmt.Sprintf("messages received %d and lost %d, more than the %d records below head %d", recvd, lost, h/mpscRecAlign, h)
	}
	return ""
}

// mpscConsumedOK reports whether recvd messages received and lost skipped
// fit below head h.
func mpscConsumedOK(recvd, lost, h uint64) bool {
	recs := h / mpscRecAlign
	return recvd <= recs && lost <= recs-recvd
}

// mpscRecordSize is the space a record of n payload bytes takes.
func mpscRecordSize(n uint64) uint64 { return mpscHeaderSize + (n+mpscRecAlign-1)&^(mpscRecAlign-1) }

// mpscStateWord makes a record's state word.
func mpscStateWord(token, state uint32, length uint64) uint64 {
	return length<<mpscRecLenShift | uint64(state)<<mpscRecStShift | uint64(token&mpscRecTokenMask)
}

// mpscClaimWord makes the claim word of a claim at position pos by token.
func mpscClaimWord(pos uint64, token uint32) uint64 {
	return mpscTailClaiming | (pos>>3)&(1<<mpscTailPosBits-1)<<mpscTailPosShift | uint64(token&ownerMask)
}

// mpscClaimPos rebuilds the full position of a claim word in the claiming
// state, knowing that it lies at most capacity bytes past head.
func mpscClaimPos(w, head uint64) uint64 {
	low := (w >> mpscTailPosShift & (1<<mpscTailPosBits - 1)) << 3
	const span = 1 << (mpscTailPosBits + 3)
	return head + (low-head)&(span-1)
}
