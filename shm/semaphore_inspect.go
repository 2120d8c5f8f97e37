package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// What InspectRegion (and lockword inspect) shows of a Semaphore:
// its counts, and per process the permits it holds and what it awaits.

// SemaphoreInfo is the state of a Semaphore, as InspectRegion reads
// it (word by word, not a snapshot: the counts may disagree by a change
// made meanwhile).
type SemaphoreInfo struct {
	Capacity int64 `json:"capacity"`
	// InUse is the permits held, by live and dead processes alike.
	InUse int64 `json:"in_use"`
	// Processes are those holding permits or waiting, in slot order.
	Processes []SemaphoreProcess `json:"processes,omitempty"`
	// DeadHolders is how many processes in Processes are dead (their
	// permits come back when an acquirer finds the semaphore short).
	DeadHolders int `json:"dead_holders,omitempty"`
	// Recovered is the permits taken back from dead processes since the
	// semaphore was created, Reclaims the dead processes' entries cleared
	// (holders and waiters), LastDeadPID the last dead holder's PID (0:
	// none, or unknown).
	Recovered   uint64 `json:"recovered"`
	Reclaims    uint32 `json:"reclaims"`
	LastDeadPID int    `json:"last_dead_pid,omitempty"`
}

// SemaphoreProcess is one process's part in a Semaphore.
type SemaphoreProcess struct {
	ProcessInfo
	// Held is the permits it holds; Waiting, if not 0, what its waiting
	// goroutine asks for, with its queue Ticket (lower goes first).
	Held    int64  `json:"held"`
	Waiting int64  `json:"waiting,omitempty"`
	Ticket  uint32 `json:"ticket,omitempty"`
}

// inspectSemaphore describes a Semaphore object; it only reads.
func inspectSemaphore(insp *inspector, obj []byte, info *ObjectInfo) {
	si := &SemaphoreInfo{
		Capacity:    int64(word32(obj, semObjPermits).Load()),
		InUse:       int64(word32(obj, semObjInUse).Load()),
		Recovered:   word64(obj, semObjRecovered).Load(),
		Reclaims:    word32(obj, semObjDeadHolders).Load(),
		LastDeadPID: int(word32(obj, semObjDeadPID).Load()),
	}
	info.Semaphore = si
	info.Word = uint32(si.InUse)
	seq := word32(obj, semObjSeq).Load()
	info.Waiters = seq&semSleepers != 0
	info.Queued = int(word32(obj, semObjWaiters).Load())
	if reason := semInspectReason(obj); reason != "" {
		info.State, info.Reason = "corrupt", reason
		return
	}
	for slot := range uint32(regionProcSlots) {
		e := obj[semSlotOff(slot):][:semSlotSize]
		t := word32(e, semSlotToken).Load()
		if t == 0 {
			continue
		}
		a := insp.check(t)
		p := SemaphoreProcess{ProcessInfo: ProcessInfo{Slot: int(slot), PID: int(a.pid), Alive: a.alive},
			Held: int64(word32(e, semSlotHeld).Load()), Ticket: word32(e, semSlotTicket).Load()}
		if p.Ticket != 0 {
			p.Waiting = int64(word32(e, semSlotWant).Load())
		}
		if !a.alive {
			si.DeadHolders++
		}
		si.Processes = append(si.Processes, p)
	}
	switch {
	case si.DeadHolders > 0:
		info.State = "owner-dead"
	case info.Queued > 0:
		info.State = "contended"
	case si.InUse > 0:
		info.State = "held"
	default:
		info.State = "free"
	}
}

// semInspectReason returns why inspect calls a Semaphore object corrupt,
// or "": the checks that need no guard on the live words, then the
// guard's on a settled snapshot, if one is had (semSnapshot).
func semInspectReason(obj []byte) string {
	reason := semValidate(obj, false, -1)
	if snap := semSnapshot(obj); reason == "" && snap != nil {
		reason = semValidate(snap, true, -1)
	}
	return reason
}

// semSnapshot returns a copy of obj's words that the guard's checks
// can judge (semValidate guarded), or nil if it gets none: the words are
// copied (one atomic load each, the guard word first) until two copies in
// a row agree and show the guard free. A critical section in progress at
// a copy began after its guard load, and either still holds the guard at
// the next copy's, or had landed all its stores by then, so the two
// copies differ: seq, next and the counts move with every change, and no
// change puts them back. A guard held by a stopped or dead process, or
// words that keep changing for semSnapshotTries copies, give nil: inspect
// then makes only the checks that need no guard, rather than call a busy
// semaphore corrupt.
func semSnapshot(obj []byte) []byte {
	prev, cur := make([]byte, len(obj)), make([]byte, len(obj))
	semCopy(prev, obj)
	for range semSnapshotTries {
		semCopy(cur, obj)
		if bytes.Equal(prev, cur) && word32(cur, semObjGuard+mutexObjWord).Load()&ownerMask == 0 {
			return cur
		}
		prev, cur = cur, prev
	}
	return nil
}

// semSnapshotTries bounds semSnapshot's copies (16 KiB each, a few
// microseconds): a guard's critical section is a few stores, so a quiet
// moment comes within a few copies unless the guard's holder stopped or
// died, which no number of copies waits out.
const semSnapshotTries = 64

// semCopy copies src's 32-bit words into dst, in offset order, one atomic
// load each (other processes store them concurrently); dst is the
// caller's own, so its stores are plain (under the race detector an
// atomic store costs as much as the load, and a busy semaphore's
// inspection copies 16 KiB up to 65 times).
func semCopy(dst, src []byte) {
	for off := uint64(0); off+4 <= uint64(len(src)); off += 4 {
		binary.NativeEndian.PutUint32(dst[off:], word32(src, off).Load())
	}
}

// semValidate returns why a Semaphore object's words are corrupt, or ""
// if some valid history writes them. The API calls it under the guard
// (guarded: every check); inspect and (*Region).Semaphore call it without
// the guard (not guarded), and then skip the checks that a change made
// meanwhile could fail: the entries' sum against in use, their tickets
// against waiters, and an entry naming no process that holds or waits
// (a taker stores its token before its held, a releaser clears it
// after). Checked always: in use at most the capacity, waiters at most
// the process table's slots, and each entry's token valid and of its own
// slot, its held and wanted permits at most the capacity; a zero capacity
// (not yet recorded) then admits no holder.
//
// only ≥ 0 checks the counts and that slot's entry alone (the sums are
// then not checked): the API's check between two full ones, as a full one
// reads 16 KiB and costs ten times an uncontended Acquire.
func semValidate(obj []byte, guarded bool, only int) string {
	c := uint64(word32(obj, semObjPermits).Load())
	inUse := uint64(word32(obj, semObjInUse).Load())
	waiters := word32(obj, semObjWaiters).Load()
	if inUse > c {
		return fmt.Sprintf("%d permits in use of %d", inUse, c)
	}
	if waiters > regionProcSlots {
		return fmt.Sprintf("%d waiting processes, more than the process table's %d slots", waiters, regionProcSlots)
	}
	if c == 0 && waiters != 0 {
		return fmt.Sprintf("capacity 0 with %d waiting processes", waiters)
	}
	var sum uint64
	var tickets uint32
	first, end := uint32(0), uint32(regionProcSlots)
	if only >= 0 {
		first, end = uint32(only), uint32(only)+1
	}
	for slot := first; slot < end; slot++ {
		e := obj[semSlotOff(slot):][:semSlotSize]
		t := word32(e, semSlotToken).Load()
		h := uint64(word32(e, semSlotHeld).Load())
		ticket := word32(e, semSlotTicket).Load()
		// want outlives its ticket, but was a valid weight when stored.
		want := uint64(word32(e, semSlotWant).Load())
		switch {
		case h > c:
			return fmt.Sprintf("entry of slot %d holds %d permits of %d", slot, h, c)
		case want > c:
			return fmt.Sprintf("entry of slot %d waits for %d permits of %d", slot, want, c)
		case t == 0 && guarded && (h != 0 || ticket != 0):
			return fmt.Sprintf("entry of slot %d holds %d permits (ticket %d) for no process", slot, h, ticket)
		case t != 0 && (!validToken(t) || tokenSlot(t) != slot):
			return fmt.Sprintf("entry of slot %d names owner token %#x", slot, t)
		}
		sum += h
		if ticket != 0 {
			tickets++
		}
	}
	if only >= 0 {
		return ""
	}
	if guarded && sum != inUse {
		return fmt.Sprintf("%d permits in use, but the entries hold %d", inUse, sum)
	}
	if guarded && tickets != waiters {
		return fmt.Sprintf("%d waiting processes, but %d entries hold a ticket", waiters, tickets)
	}
	return ""
}
