package shm

import (
	"fmt"
	"os"
)

// Owner identity in a region: the owner tokens that robust lock words
// carry, and the process table behind them (attach, generations, liveness,
// the PID namespace). Portable: /proc is read by proc_linux.go.

// An owner token names one incarnation of a process attached to a region:
// its slot in the process table and the slot's generation, which changes
// at every attach. Robust lock words carry it in bits 0-27 (Mutex's
// word; the ticket queue's records; the rings' roles):
//
//	bits   meaning
//	0-17   owner generation: with the slot, the owner token; 0 when free
//	18-27  owner slot in the region's process table
//
// Bits 0-27 all ones (ownerNotRecoverable) mean not recoverable.
const (
	ownerGenBits        = 18
	ownerSlotBits       = 10
	ownerMask           = 1<<(ownerGenBits+ownerSlotBits) - 1
	ownerNotRecoverable = ownerMask
	// ownerGenMax is the largest generation issued: the all-ones
	// generation in slot 1023 would spell ownerNotRecoverable.
	ownerGenMax = 1<<ownerGenBits - 2
)

func makeToken(slot, gen uint32) uint32 { return slot<<ownerGenBits | gen }
func tokenSlot(t uint32) uint32         { return t >> ownerGenBits & (1<<ownerSlotBits - 1) }
func tokenGen(t uint32) uint32          { return t & (1<<ownerGenBits - 1) }

// procIdentity names one incarnation of a process: PIDs are reused (here
// pid_max is 32768), but a PID together with its start time (clock ticks
// since boot, /proc/PID/stat field 22) and the boot ID names one process
// for the life of the machine. Two processes would need the same PID within
// one clock tick (10 ms) of the same boot to collide.
//
// A PID means something only in its PID namespace: pidNS names the one it
// was recorded in (the inode number of /proc/self/ns/pid), 0 if unknown.
// For a region's slots it is the region's namespace record (all of a
// region's processes share one namespace; see Region).
type procIdentity struct {
	pid   uint32
	start uint64
	boot  [16]byte
	pidNS uint64
}

// attach claims a process-table slot, under the exclusive file lock. objs
// are the region's objects, whose owner words the new generation must not
// match.
func (r *Region) attach(objs []regionObject) error {
	me, err := selfIdentity()
	if err != nil {
		return err
	}
	if err := r.checkPIDNamespace(me, true); err != nil {
		return err
	}
	hint := word32(r.data, hdrSlotHint).Load() % regionProcSlots
	slot, found := uint32(0), false
	// A free slot first, searching round-robin from the hint so that
	// generations advance evenly; failing that, one whose process died.
	for i := range uint32(regionProcSlots) {
		s := (hint + i) % regionProcSlots
		if word32(r.slotWord(s), procState).Load()&procLive == 0 {
			slot, found = s, true
			break
		}
	}
	if !found {
		// Prefer a slot that no lock word names: a dead holder's slot
		// keeps its identity until the lock is recovered, so that the
		// recoverer and inspect can name its PID. One pass over the
		// others, then one over those.
		named := namedTokens(r.data, objs)
		for pass := 0; pass < 2 && !found; pass++ {
			for i := range uint32(regionProcSlots) {
				s := (hint + i) % regionProcSlots
				token := makeToken(s, word32(r.slotWord(s), procState).Load()&procGenMask)
				if named[token] != (pass == 1) {
					continue
				}
				if alive, _ := r.tokenAlive(token); !alive {
					slot, found = s, true
					break
				}
			}
		}
	}
	if !found {
		return fmt.Errorf("%w: %d processes attached", ErrTooManyProcesses, regionProcSlots)
	}
	sw := r.slotWord(slot)
	state := word32(sw, procState)
	gen := state.Load() & procGenMask
	// Not live while the identity changes: a checker that read the old
	// state sees it change and knows the old incarnation is gone.
	state.Store(gen)
	gen = r.nextGen(slot, gen, objs)
	word32(sw, procPID).Store(me.pid)
	word64(sw, procStart).Store(me.start)
	word64(sw, procBoot).Store(ne.Uint64(me.boot[:8]))
	word64(sw, procBoot+8).Store(ne.Uint64(me.boot[8:]))
	// A waits-for record left by the slot's previous process (killed
	// waiting) must not speak for us.
	r.resetWaitsFor(slot)
	// Publish: from here on lock words may name (slot, gen).
	state.Store(procLive | gen)
	word32(r.data, hdrSlotHint).Store((slot + 1) % regionProcSlots)
	r.slot, r.token = slot, makeToken(slot, gen)
	return nil
}

// checkPIDNamespace compares the region's PID namespace record with ours,
// under the file lock (exclusive if bind). The record binds while a
// process of this boot is attached (a live slot, its process dead or not:
// a dead holder's liveness must stay checkable); otherwise it is stale,
// and with bind (attach) we record our own namespace. It fails with
// ErrForeignPIDNamespace when both namespaces are known and differ, and
// sets r.pidNS, the namespace in which the region's PIDs can be checked.
func (r *Region) checkPIDNamespace(me procIdentity, bind bool) error {
	rec := word64(r.data, hdrPIDNamespace)
	ns := rec.Load()
	if ns != me.pidNS && !r.attachedThisBoot(me.boot) {
		if bind {
			rec.Store(me.pidNS)
		}
		ns = me.pidNS
	}
	if ns != 0 && me.pidNS != 0 && ns != me.pidNS {
		return fmt.Errorf("%w: its processes are in PID namespace pid:[%d], this process is in pid:[%d]; "+
			"owner-death detection looks holders up by PID in /proc, so every process of a region must share one PID namespace "+
			"(Kubernetes: shareProcessNamespace: true for the containers of a pod)", ErrForeignPIDNamespace, ns, me.pidNS)
	}
	r.pidNS = ns
	return nil
}

// attachedThisBoot reports whether a live slot holds a process of the boot
// with ID boot.
func (r *Region) attachedThisBoot(boot [16]byte) bool {
	for s := range uint32(regionProcSlots) {
		sw := r.slotWord(s)
		if word32(sw, procState).Load()&procLive != 0 &&
			word64(sw, procBoot).Load() == ne.Uint64(boot[:8]) && word64(sw, procBoot+8).Load() == ne.Uint64(boot[8:]) {
			return true
		}
	}
	return false
}

// nextGen returns the generation after gen for slot, skipping 0, the
// reserved all-ones value, and any generation that an owner word in the
// region still names (a holder that died long ago): reissuing it would make
// a dead holder look alive.
func (r *Region) nextGen(slot, gen uint32, objs []regionObject) uint32 {
	inUse := namedTokens(r.data, objs)
	for range ownerGenMax { // every generation once: if all are named, reuse the next
		gen++
		if gen > ownerGenMax {
			gen = 1
		}
		if !inUse[makeToken(slot, gen)] {
			return gen
		}
	}
	// Only a region whose owner words were written to name every
	// generation of this slot gets here; their "owners" are not ours.
	return gen%ownerGenMax + 1
}

// namedTokens returns the owner tokens that the owner words of objs, in the
// mapping data, name now.
func namedTokens(data []byte, objs []regionObject) map[uint32]bool {
	named := map[uint32]bool{}
	for _, o := range objs {
		for _, w := range objectKinds[o.kind].ownerWords {
			named[word32(data, o.offset+uint64(w)).Load()&ownerMask] = true
		}
	}
	return named
}

// tokenAlive reports whether the process that owns token is alive, and
// its PID: 0 if unknown, when the slot no longer carries the token's
// incarnation (the PID there now is another process's). It errs towards
// alive (see processAlive).
func (r *Region) tokenAlive(token uint32) (alive bool, pid uint32) {
	if token == r.token {
		return true, uint32(os.Getpid())
	}
	sw := r.slotWord(tokenSlot(token))
	state := word32(sw, procState)
	st := state.Load()
	id := procIdentity{pid: word32(sw, procPID).Load(), start: word64(sw, procStart).Load(), pidNS: r.pidNS}
	ne.PutUint64(id.boot[:8], word64(sw, procBoot).Load())
	ne.PutUint64(id.boot[8:], word64(sw, procBoot+8).Load())
	if st != procLive|tokenGen(token) || state.Load() != st {
		// The slot no longer carries this incarnation: it detached
		// (never while holding) or was reclaimed after it died. Its
		// identity is gone with it: whoever is there now is not the
		// holder.
		return false, 0
	}
	return processAliveFunc(id), id.pid
}

// processAliveFunc is processAlive; tests replace it with deliberately
// broken checks to show that the owner-identity tests catch them.
var processAliveFunc = processAlive

func (r *Region) pid() int { return os.Getpid() }

// livePIDs lists the PIDs of the live processes attached to r.
func (r *Region) livePIDs() []int {
	var pids []int
	for s := range uint32(regionProcSlots) {
		st := word32(r.slotWord(s), procState).Load()
		if st&procLive == 0 {
			continue
		}
		if alive, pid := r.tokenAlive(makeToken(s, st&procGenMask)); alive {
			pids = append(pids, int(pid))
		}
	}
	return pids
}

// slotWord returns the bytes of process-table slot number slot.
func (r *Region) slotWord(slot uint32) []byte {
	off := regionProcOffset + int(slot)*procSlotSize
	return r.data[off : off+procSlotSize]
}
