package shm

import (
	"testing"

	"github.com/lockword/lockword/internal/ringindex"
)

// TestMPSCLayout pins the queue's layout to docs/abi.md's tables, which a
// C twin reads.
func TestMPSCLayout(t *testing.T) {
	checkABI(t, []abiField[uint64]{
		{"kind", uint64(kindMPSC), 11}, {"consumer role", mpscConsumerRole, 0}, {"producers", mpscProducers, 4},
		{"tail", mpscTail, 128}, {"notEmpty", mpscNotEmpty, 136},
		{"producer sleeps", mpscProdSleeps, 144}, {"producer wakes", mpscProdWakes, 152},
		{"messages sent", mpscMsgsSent, 160}, {"claims recovered", mpscRecovered, 168},
		{"head", mpscHead, 256}, {"notFull", mpscNotFull, 264},
		{"consumer sleeps", mpscConsSleeps, 272}, {"consumer wakes", mpscConsWakes, 280},
		{"messages received", mpscMsgsRecvd, 288}, {"records lost", mpscLost, 296},
		{"data", mpscData, 512}, {"alignment", mpscAlign, 128},
		{"state word", mpscRecState, 0}, {"position word", mpscRecPos, 8}, {"header", mpscHeaderSize, 16}, {"record alignment", mpscRecAlign, 16}, {"record of 17 bytes", mpscRecordSize(17), 48},
		{"claimed", mpscRecClaimed, 1}, {"published", mpscRecPublished, 2}, {"padding", mpscRecPadding, 3},
		{"claiming bit", mpscTailClaiming, 1 << 63}, {"claim position shift", mpscTailPosShift, 28},
		{"claim position bits", mpscTailPosBits, 35},
		{"sleeping bit", ringindex.Sleeping, 1}, {"closed bit", ringindex.Closed, 2},
		{"min capacity", MinMPSCCapacity, 128}, {"max capacity", MaxMPSCCapacity, 1 << 30},
		{"state word of token 5, published, 300 bytes", mpscStateWord(5, mpscRecPublished, 300), 300<<32 | 2<<28 | 5},
		{"claim word of 4096 by token 5", mpscClaimWord(4096, 5), 1<<63 | 512<<28 | 5},
	})
	// A claiming word's position comes back whole from any head within a
	// capacity behind it, across the 2^38 wrap of its stored bits.
	for _, pos := range []uint64{0, 4096, 1<<38 - 8, 1 << 38, 5<<38 + 64} {
		for _, back := range []uint64{0, 8, MaxMPSCCapacity} {
			if back > pos {
				continue
			}
			if got := mpscClaimPos(mpscClaimWord(pos, 7), pos-back); got != pos {
				t.Errorf("claim at %d read from head %d: %d", pos, pos-back, got)
			}
		}
	}
}
