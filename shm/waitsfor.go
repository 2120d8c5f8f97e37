package shm

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// The waits-for records: which shared lock each attached process's kernel
// sleeper waits for, so that `lockword inspect` (and a stuck report) can
// draw the waits-for graph across processes (holder tokens name the
// edges' other ends) and find a deadlock cycle. Portable: the records are
// plain words in the mapping.
//
// The process-table slot has no spare byte, and changing its fields would
// make older builds misread a live process as dead, so the records live in
// the header's reserved bytes, one 16-bit record per slot, slot s at
// hdrWaitsFor + 2s (native byte order). No atomic instruction is 16 bits
// wide in Go, so a record is changed by CAS on the aligned 32-bit word
// that holds it and its neighbour's (slot s^1, another process): a CAS
// that fails because the neighbour changed its half is retried.
//
//	bits  meaning
//	0-7   1 + the object table index of the lock waited for; 0: none
//	8-15  sequence: advanced by every set, so that a reader that sees
//	      the same record twice knows no wait ended in between (modulo
//	      256 sets)
//
// Who moves a record (T: the slot's process):
//
//	record       → record            by
//	any          → 0                 attach, under the file lock, before
//	                                 the slot is published live; Close
//	(i, seq)=0,s → (i', s+1)         T's kernel sleeper, before its first
//	                                 futex wait (CAS: a process with two
//	                                 sleepers records the first only)
//	(i', s)      → (0, s)            that sleeper, once its wait has ended
//	                                 (holding or not), if still its own
//
// A record may be stale: set while its process holds the lock already
// (woken, not yet cleared), left by a process that died, or by one stopped
// between its wait's end and the clear. None makes a false cycle: a
// waiter holding what it waits for is a self-edge, which is ignored; a
// dead process is no member; and a cycle counts only if every record and
// holder in it reads the same twice, deadlockConfirm apart.
const (
	hdrWaitsFor       = 2048 // [regionProcSlots]uint16, live: the records
	waitsForObjMask   = 0xff
	waitsForSeqShift  = 8
	waitsForRecordLen = 2
)

// deadlockConfirm is how long apart the two reads of a candidate cycle
// are. A deadlock lasts for ever, so any interval tells it from a
// transient; this one is long against a critical section's microseconds
// and short for a person running inspect.
const deadlockConfirm = 50 * time.Millisecond

// waitsForWord returns the 32-bit word holding slot's record and the
// record's shift in it.
func (r *Region) waitsForWord(slot uint32) (word *atomic.Uint32, shift uint32) {
	return word32(r.data, hdrWaitsFor+uint64(slot&^1)*waitsForRecordLen), (slot & 1) * 16
}

// waitsForRecord reads slot's record.
func (r *Region) waitsForRecord(slot uint32) uint16 {
	w, shift := r.waitsForWord(slot)
	return uint16(w.Load() >> shift)
}

// swapWaitsFor changes slot's record from old to new; false if it is not
// old. Only the neighbour's half may change under the CAS: retry then.
func (r *Region) swapWaitsFor(slot uint32, old, new uint16) bool {
	w, shift := r.waitsForWord(slot)
	for range retryLimit {
		cur := w.Load()
		if uint16(cur>>shift) != old {
			return false
		}
		if w.CompareAndSwap(cur, cur&^(0xffff<<shift)|uint32(new)<<shift) {
			return true
		}
	}
	return false // a neighbour rewriting its half for ever: record nothing
}

// setWaitsFor records that our kernel sleeper waits for the object at
// table index idx+1 (objIdx1; 0: unknown, nothing recorded). It returns the
// record to pass to clearWaitsFor, 0 if none was set (an observer handle,
// or another sleeper of ours holds the record).
func (r *Region) setWaitsFor(objIdx1 uint32) uint16 {
	if r.token == 0 || objIdx1 == 0 || objIdx1 > waitsForObjMask {
		return 0
	}
	old := r.waitsForRecord(r.slot)
	if old&waitsForObjMask != 0 {
		return 0
	}
	rec := (old>>waitsForSeqShift+1)<<waitsForSeqShift | uint16(objIdx1)
	if !r.swapWaitsFor(r.slot, old, rec) {
		return 0
	}
	return rec
}

// clearWaitsFor ends the wait recorded as rec (from setWaitsFor), keeping
// the sequence.
func (r *Region) clearWaitsFor(rec uint16) {
	if rec != 0 && !clearWaitsForBroken {
		r.swapWaitsFor(r.slot, rec, rec&^waitsForObjMask)
	}
}

// clearWaitsForBroken leaves every record set: tests show that the false
// cycles it makes are reported, so the no-false-report check can fail.
var clearWaitsForBroken = false

// resetWaitsFor clears slot's record whatever it holds (attach and Close,
// under the exclusive file lock).
func (r *Region) resetWaitsFor(slot uint32) {
	for {
		old := r.waitsForRecord(slot)
		if old == 0 || r.swapWaitsFor(slot, old, 0) {
			return
		}
	}
}

// tableIndex1 returns 1 + the object table index of the object at offset
// off, 0 if the table has none there. Entries below the count never
// change, so the mapping is read without the file lock.
func (r *Region) tableIndex1(off uint64) uint32 {
	n := min(word32(r.data, hdrObjectCount).Load(), regionTableCap)
	for i := range n {
		if ne.Uint64(r.data[regionTableOffset+int(i)*tableEntrySize+entryOffset:]) == off {
			return i + 1
		}
	}
	return 0
}

// waitEdge is one edge of the waits-for graph: slot's process waits for
// the lock obj (its name), which the process holding token holds.
type waitEdge struct {
	slot, waiterPID uint32
	rec             uint16
	obj             string
	holder          uint32 // owner token
	holderPID       uint32
}

// waitsForEdges reads the graph once: an edge for every live, living
// process whose record names a lock held by another live, living process.
func (r *Region) waitsForEdges() map[uint32]waitEdge {
	edges := map[uint32]waitEdge{}
	n := min(word32(r.data, hdrObjectCount).Load(), regionTableCap)
	for s := range uint32(regionProcSlots) {
		st := word32(r.slotWord(s), procState).Load()
		if st&procLive == 0 {
			continue
		}
		rec := r.waitsForRecord(s)
		idx1 := uint32(rec & waitsForObjMask)
		if idx1 == 0 || idx1 > n {
			continue
		}
		name, holder, ok := r.tableHolder(idx1 - 1)
		if !ok || tokenSlot(holder) == s {
			continue // free, not a kind with one holder, or a self-edge
		}
		alive, pid := r.tokenAlive(makeToken(s, st&procGenMask))
		if !alive {
			continue
		}
		hAlive, hPID := r.tokenAlive(holder)
		if !hAlive {
			continue // owner death, recovered by the waiter: no deadlock
		}
		edges[s] = waitEdge{slot: s, waiterPID: pid, rec: rec, obj: name, holder: holder, holderPID: hPID}
	}
	return edges
}

// tableHolder returns the name of the object at table index i and the
// owner token of the holder its waiters wait for; ok false if it has none
// (free, not recoverable, corrupt) or its kind has no such holder. A
// Mutex's holder is its word's owner; a TicketMutex's or RWMutex's is the
// owner of the served ticket's record: the holder, or the writer being
// served (holding, or waiting for readers to leave), which every queued
// writer and every reader behind it waits for.
func (r *Region) tableHolder(i uint32) (name string, holder uint32, ok bool) {
	e := r.data[regionTableOffset+int(i)*tableEntrySize:][:tableEntrySize]
	kind := objectKind(ne.Uint32(e[entryKind:]) & entryKindMask)
	off, size := ne.Uint64(e[entryOffset:]), uint64(ne.Uint32(e[entrySize:]))
	if off < regionArenaOffset || off+size > uint64(len(r.data)) {
		return "", 0, false
	}
	switch {
	case kind == kindMutex && size == mutexObjSize:
		holder = word32(r.data, off+mutexObjWord).Load() & ownerMask
	case kind == kindTicketMutex && size == ticketObjSize, kind == kindRWMutex && size == rwObjSize:
		s := word32(r.data, off+ticketObjServing).Load()
		rec := word64(r.data, off+ticketObjRecords+uint64(s%queueRecords)*queueRecordLen).Load()
		if recTicket(rec) != s || (recState(rec) != recHolding && recState(rec) != recWaiting) {
			return "", 0, false // free, or a ticket being skipped
		}
		holder = recToken(rec)
	default:
		return "", 0, false
	}
	if holder == 0 || holder == ownerNotRecoverable || !validToken(holder) {
		return "", 0, false
	}
	n, _, _ := bytes.Cut(e[entryName:entryName+entryNameMax], []byte{0})
	return string(n), holder, true
}

// findCycles returns the cycles of edges, each from its lowest slot. Every
// process has at most one record, so the graph is a functional one: a walk
// from each slot either ends or closes one cycle.
func findCycles(edges map[uint32]waitEdge) [][]waitEdge {
	var cycles [][]waitEdge
	done := map[uint32]bool{}
	for s := range uint32(regionProcSlots) {
		if _, ok := edges[s]; !ok || done[s] {
			continue
		}
		onPath := map[uint32]int{}
		var path []waitEdge
		cur := s
		for {
			e, ok := edges[cur]
			if !ok || done[cur] {
				break
			}
			if at, seen := onPath[cur]; seen {
				if len(path)-at <= deadlockMaxMembers {
					cycles = append(cycles, rotateLowest(path[at:]))
				}
				break
			}
			onPath[cur] = len(path)
			path = append(path, e)
			cur = tokenSlot(e.holder)
		}
		for _, e := range path {
			done[e.slot] = true
		}
	}
	return cycles
}

// deadlockMaxMembers bounds a reported cycle's length: every process of the
// region. Tests lower it to show the three-process check fails on a
// detector that stops at two.
var deadlockMaxMembers = regionProcSlots

func rotateLowest(c []waitEdge) []waitEdge {
	lo := 0
	for i, e := range c {
		if e.slot < c[lo].slot {
			lo = i
		}
	}
	return append(append([]waitEdge(nil), c[lo:]...), c[:lo]...)
}

// confirmedCycles reads the graph, and if it has cycles reads it again
// deadlockConfirm later, and returns the cycles whose every edge (record,
// sequence included, and holder token) read the same both times.
func (r *Region) confirmedCycles() [][]waitEdge {
	first := findCycles(r.waitsForEdges())
	if len(first) == 0 {
		return nil
	}
	time.Sleep(deadlockConfirm)
	again := r.waitsForEdges()
	var confirmed [][]waitEdge
	for _, c := range first {
		same := true
		for _, e := range c {
			if again[e.slot] != e {
				same = false
			}
		}
		if same {
			confirmed = append(confirmed, c)
		}
	}
	return confirmed
}

// Deadlock is a cycle of processes in a region's waits-for graph, as
// Inspect reports it: each member holds the lock the previous one waits
// for and waits for a lock the next one holds, so none can go on.
type Deadlock struct {
	Members []DeadlockMember `json:"members"`
}

// DeadlockMember is one process of a Deadlock: its PID and process-table
// slot, the lock it waits for, and the one it holds that the previous
// member waits for.
type DeadlockMember struct {
	PID      int    `json:"pid"`
	Slot     int    `json:"slot"`
	Holds    string `json:"holds"`
	WaitsFor string `json:"waits_for"`
}

// String describes d as "PID 41 holds a, waits for b; PID 42 holds b,
// waits for a".
func (d Deadlock) String() string {
	parts := make([]string, len(d.Members))
	for i, m := range d.Members {
		parts[i] = fmt.Sprintf("PID %d holds %s, waits for %s", m.PID, quoteName(m.Holds), quoteName(m.WaitsFor))
	}
	return strings.Join(parts, "; ")
}

func quoteName(s string) string {
	if strings.ContainsAny(s, " ,;\"") || s == "" {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// deadlocks returns the region's confirmed cycles as Deadlocks; never nil.
func (r *Region) deadlocks() []Deadlock {
	ds := []Deadlock{}
	for _, c := range r.confirmedCycles() {
		d := Deadlock{Members: make([]DeadlockMember, len(c))}
		for i, e := range c {
			d.Members[i] = DeadlockMember{PID: int(e.waiterPID), Slot: int(e.slot), WaitsFor: e.obj, Holds: c[(i+len(c)-1)%len(c)].obj}
		}
		ds = append(ds, d)
	}
	return ds
}

// deadlockOf returns the confirmed deadlock that our process is in, if
// any, for a stuck report.
func (r *Region) deadlockOf() (Deadlock, bool) {
	for _, d := range r.deadlocks() {
		for _, m := range d.Members {
			if m.Slot == int(r.slot) {
				return d, true
			}
		}
	}
	return Deadlock{}, false
}

// deadlockAttrs returns, for a stuck report, the confirmed deadlock that
// our process is in as log attributes; nil if none.
func (r *Region) deadlockAttrs() []any {
	if d, ok := r.deadlockOf(); ok {
		return []any{"deadlock", d.String()}
	}
	return nil
}
