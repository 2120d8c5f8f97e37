// Package msgcheck is the message format and the stream checker of the
// multi-producer queue's tests, torture and benchmark: each message names
// its producer and its number and carries a body drawn from both, so a
// consumer can tell, per producer, a lost, repeated, reordered or torn
// message from a good one.
package msgcheck

import (
	"encoding/binary"
	"fmt"
)

// HeaderLen is the bytes of a message before its body: the producer (4
// bytes), a check word (4), the number (8). The shortest message.
const HeaderLen = 16

// Msg returns message seq of producer p, appended to buf[:0]: HeaderLen to
// maxLen bytes (maxLen at least HeaderLen), its length and body drawn from
// p and seq.
func Msg(buf []byte, p uint32, seq uint64, maxLen int) []byte {
	n := HeaderLen + int(mix(uint64(p)<<40^seq)%uint64(maxLen-HeaderLen+1))
	buf = binary.LittleEndian.AppendUint32(buf[:0], p)
	buf = binary.LittleEndian.AppendUint32(buf, ^p)
	buf = binary.LittleEndian.AppendUint64(buf, seq)
	for j := HeaderLen; j < n; j++ {
		buf = append(buf, byte(seq*131+uint64(p)*7+uint64(j)))
	}
	return buf
}

// mix is SplitMix64's finaliser: lengths that vary from message to message.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Checker checks a stream of Msg messages from producers 0..Producers-1:
// per producer, every number once and in order, every byte right.
type Checker struct {
	MaxLen int
	// Next is, per producer, the number expected next: once the stream
	// is over, how many of its messages arrived in order.
	Next []uint64
	// Received counts messages; Dups those whose number was seen already,
	// Gaps those that skipped numbers (out of order or lost), Mangled
	// those whose bytes are wrong (torn, or not a Msg at all).
	Received, Dups, Gaps, Mangled int
	want                          []byte
}

// NewChecker returns a Checker for producers 0..producers-1.
func NewChecker(producers, maxLen int) *Checker {
	return &Checker{MaxLen: maxLen, Next: make([]uint64, producers)}
}

// Check checks one message.
func (c *Checker) Check(msg []byte) {
	c.Received++
	if len(msg) < HeaderLen {
		c.Mangled++
		return
	}
	p, seq := binary.LittleEndian.Uint32(msg), binary.LittleEndian.Uint64(msg[8:])
	if int(p) >= len(c.Next) || binary.LittleEndian.Uint32(msg[4:]) != ^p {
		c.Mangled++
		return
	}
	if c.want = Msg(c.want, p, seq, c.MaxLen); string(c.want) != string(msg) {
		c.Mangled++
	}
	switch next := c.Next[p]; {
	case seq == next:
		c.Next[p]++
	case seq < next:
		c.Dups++
	default:
		c.Gaps++
		c.Next[p] = seq + 1
	}
}

// OK reports whether every message so far was whole, once and in order.
func (c *Checker) OK() bool { return c.Dups == 0 && c.Gaps == 0 && c.Mangled == 0 }

func (c *Checker) String() string {
	return fmt.Sprintf("%d received, %d duplicated, %d gaps, %d mangled", c.Received, c.Dups, c.Gaps, c.Mangled)
}
