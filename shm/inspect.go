package shm

import (
	"encoding/json"
	"time"

	"github.com/lockword/lockword"
)

// RegionInfo is a snapshot of a region, as Inspect (and the
// `lockword inspect` command) reports it.
type RegionInfo struct {
	Path      string        `json:"path"`
	Size      int64         `json:"size_bytes"`
	Version   int           `json:"abi_version"`
	Created   time.Time     `json:"created"`
	Objects   []ObjectInfo  `json:"objects"`
	Processes []ProcessInfo `json:"processes"` // attached processes
	// Deadlocks are the cycles of the waits-for graph across processes
	// (see Deadlock): each process's kernel sleeper records the lock it
	// waits for, and each lock's holder token names the process it waits
	// on. A cycle is reported only if it reads the same twice, 50 ms
	// apart. Never nil; empty when there is none. Locks covered: Mutex.
	Deadlocks []Deadlock `json:"deadlocks"`
	// ReadOnly reports that the file was inspected read-only, without
	// write access: nothing was stamped, so HeldFor is unknown for holds
	// that began on the fast path (see Inspect).
	ReadOnly bool `json:"read_only"`
}

// ObjectInfo describes one object of a region and, for a lock, the live
// state of its lock word. Offset and Size are in bytes. The fields from
// Word on describe locks only: for an object that is not a lock (Kind
// "bytes", "value") they are zero, State is "", and the JSON form (MarshalJSON)
// leaves them out, so that no reader takes such an object for a free lock
// of a dead holder.
type ObjectInfo struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Offset int64  `json:"offset"`
	Size   int    `json:"size_bytes"`
	// Word is the raw lock word (layout in the kind's documentation).
	Word uint32 `json:"word"`
	// State is, for a lock, one of:
	//
	//	"free"             nobody holds it
	//	"held"             a live process holds it; no waiter sleeps
	//	"contended"        held, and some process may be asleep waiting
	//	                   (Waiters)
	//	"owner-dead"       the holder died and nobody has recovered the
	//	                   lock yet (HolderAlive false), or a recoverer
	//	                   holds it and has not called MarkConsistent
	//	                   (HolderAlive and Inconsistent true)
	//	"not-recoverable"  unlocked after a recovery without
	//	                   MarkConsistent: nobody holds it, and every
	//	                   lock call fails with ErrNotRecoverable
	//	"read-held"        an RW mutex held by readers only (Readers)
	//	"handoff"          a ticket mutex (or an RW mutex's write side)
	//	                   granted to the next ticket, whose process has
	//	                   not taken it yet: nobody holds it
	//
	//	"corrupt"          its words hold a state that no valid history
	//	                   produces (Reason says which): lock calls
	//	                   return ErrCorrupt; recreate the region
	//
	// for a Cond, "idle" or "waiting" (Queued goroutines wait on it), and
	// "" for an object that is neither (bytes).
	State string `json:"state"`
	// Reason says, for State "corrupt", what is impossible about the
	// words, with their values.
	Reason string `json:"reason,omitempty"`
	// HolderPID is the holding process's PID: 0 when free, and when
	// unknown (the holder died and its process-table slot has since been
	// taken by another process). HolderAlive is whether it is still
	// running (a stopped process is alive).
	HolderPID   int  `json:"holder_pid,omitempty"`
	HolderAlive bool `json:"holder_alive"`
	// Inconsistent: taken from a dead owner, MarkConsistent not yet called.
	Inconsistent bool `json:"inconsistent,omitempty"`
	// HeldFor is how long the lock has been held at least, when known
	// (HeldForKnown): the time since the hold's held-since stamp, which
	// follows the hold's start. The acquirer writes it, microseconds after
	// taking the lock, when the hold began on the slow path or with
	// statistics on; otherwise the first Inspect with write access
	// that saw the hold did (so that one reports 0 and later ones the
	// time since). Unknown for a fast-path hold that no such inspection
	// has seen.
	// In JSON, held_for_ns is always present for a lock: 0 with
	// held_for_known true is a hold stamped just now.
	HeldFor      time.Duration `json:"held_for_ns"`
	HeldForKnown bool          `json:"held_for_known"`
	// Waiters is the lock word's hint that a process sleeps waiting.
	Waiters bool `json:"waiters"`
	// Handoff is, for a Mutex (and a region SeqLock's writers'
	// lock), its hand-off word when it is not 0: "hand-off requested by
	// PID n" (a waiter that has waited 1 ms asks Unlock for the lock) or
	// "handed to PID n" (Unlock gave it that process, which has not yet
	// returned it to its caller). "" otherwise.
	Handoff string `json:"handoff,omitempty"`
	// HandedOff: the hand-off word grants the lock to its holder, which
	// has not returned it to a caller yet; if that holder dies now, the
	// next waiter takes the lock back without ErrOwnerDead. (A grant to
	// another process, the granter between its two CASes, is not: that
	// holder's death is reported.)
	HandedOff bool `json:"handed_off,omitempty"`
	// Queued is how many tickets wait behind the holder (ticket mutexes,
	// and an RW mutex's writers): one per waiting process; for a Cond,
	// how many goroutines wait on it (a process that died waiting stays
	// counted).
	Queued int `json:"queued,omitempty"`
	// Readers is how many read holds an RW mutex counts for live
	// processes: holding, or waiting behind a writer. The holds of a
	// reader process that died are not counted (see RWMutex: the
	// next writer drops them).
	Readers int `json:"readers,omitempty"`
	// DeadReaders is how many read holds an RW mutex still counts for
	// processes that died: the next writer drops them.
	DeadReaders int `json:"dead_readers,omitempty"`
	// Stats, when statistics are enabled (EnableStats), summed over all
	// processes.
	Stats *lockword.Stats `json:"stats,omitempty"`
	// SeqLock is, for a SeqLock in a region (kind "seqlock"), its
	// sequence and whether a Store is in progress; the fields above
	// describe its writers' lock. Nil for other kinds.
	SeqLock *SeqLockInfo `json:"seqlock,omitempty"`
	// Ring is, for a shared byte ring (kind "ring", which is not a lock:
	// State is ""), its roles, fill level and traffic. Nil for other
	// kinds.
	Ring *RingInfo `json:"ring,omitempty"`
	// MPSC is, for a shared MPSC byte queue (kind "mpsc queue", not a
	// lock: State is ""), its consumer, producers, fill and lost records.
	// Nil for other kinds.
	MPSC *MPSCInfo `json:"mpsc_queue,omitempty"`
	// Semaphore is, for a Semaphore (kind "semaphore"), its
	// permits in use by each process, dead holders and waiters; the
	// fields above give its State and Queued (waiting processes). Nil
	// for other kinds.
	Semaphore *SemaphoreInfo `json:"semaphore,omitempty"`
}

// SeqLockInfo is the state of a SeqLock in a region, as Inspect
// reads it.
type SeqLockInfo struct {
	// Sequence is the raw sequence word: even when the value is stable,
	// odd while a Store is in progress. Stores is Sequence/2, the Stores
	// completed since the object was created.
	Sequence uint64 `json:"sequence"`
	Stores   uint64 `json:"stores"`
	// Writing: a Store is in progress (the sequence is odd). Torn: and its
	// writer's process is dead, so the value is torn until the next Store
	// (readers get ErrWriterDead).
	Writing bool `json:"writing"`
	Torn    bool `json:"torn"`
}

// RingInfo is the state of a shared byte ring (RingProducer,
// RingConsumer), as Inspect reads it. Byte counts are of record
// space: each message's 8-byte header and padding to 8 bytes included.
type RingInfo struct {
	Capacity int `json:"capacity_bytes"`
	// Producer and Consumer are the processes holding the two roles (Slot
	// is their process-table slot, PID 0 when unknown); nil, and left out
	// of the JSON form, when nobody holds the role.
	Producer *ProcessInfo `json:"producer,omitempty"`
	Consumer *ProcessInfo `json:"consumer,omitempty"`
	// Used is the record bytes published and not yet received (tail −
	// head), 0..Capacity.
	Used int64 `json:"used_bytes"`
	// Closed: Close was called by either side.
	Closed bool `json:"closed"`
	// BytesSent and BytesReceived are the free-running tail and head: the
	// record bytes published and released since the ring was created.
	BytesSent     uint64 `json:"bytes_sent"`
	BytesReceived uint64 `json:"bytes_received"`
	// MessagesSent and MessagesReceived count messages since the ring
	// was created, by producers and consumers of lockword versions that
	// keep the counts (older ones leave them 0); each may trail the bytes
	// by one message of a process that died in the middle of a call.
	MessagesSent     uint64 `json:"messages_sent"`
	MessagesReceived uint64 `json:"messages_received"`
	// Corrupt: the indices are impossible (tail behind head, more than
	// Capacity ahead, or not multiples of 8); Used is then 0. A process
	// wrote the ring's memory; its handles return ErrRingCorrupt.
	Corrupt bool `json:"corrupt,omitempty"`
}

// MarshalJSON encodes a lock with every field, and an object that is not a
// lock (State "") with name, kind, offset and size_bytes only, and ring
// for a ring, mpsc_queue for an MPSC queue.
func (o ObjectInfo) MarshalJSON() ([]byte, error) {
	type fields ObjectInfo // the same fields, without this method
	if o.State != "" {
		return json.Marshal(fields(o))
	}
	return json.Marshal(struct {
		Name   string    `json:"name"`
		Kind   string    `json:"kind"`
		Offset int64     `json:"offset"`
		Size   int       `json:"size_bytes"`
		Ring   *RingInfo `json:"ring,omitempty"`
		MPSC   *MPSCInfo `json:"mpsc_queue,omitempty"`
	}{o.Name, o.Kind, o.Offset, o.Size, o.Ring, o.MPSC})
}

// ProcessInfo is one attached process of a region.
type ProcessInfo struct {
	Slot  int  `json:"slot"`
	PID   int  `json:"pid"`
	Alive bool `json:"alive"`
}

// Inspect opens the region at path as an observer (without attaching
// to it: it takes no process slot and no lock) and describes every object.
// It returns the same validation errors as Open, without waiting for
// a creator, and ErrFileLockTimeout, naming the holder, if the region's
// file lock stays held for DefaultInitTimeout.
//
// It needs read access only. Where it may also write the file, it stamps
// each held lock whose hold began on the fast path (which records no start
// time: that would cost the fast path a clock read): it stores the current
// time in the object's held-since field, then sets the lock word's timed
// bit (bit 31) with a compare-and-swap from the word it read, never
// changing ownership, waiter or other bits, so that the next inspection
// shows the hold growing. The bit sends the holder's next Unlock down its
// slow path, which clears it. Without write access (file permissions, a
// read-only file system) it opens and maps the file read-only, writes
// nothing, and sets RegionInfo.ReadOnly; such holds' HeldFor is then
// unknown.
func Inspect(path string) (*RegionInfo, error) { return inspectRegion(path, modeObserve) }

// inspectRegion is Inspect; mode modeObserveReadOnly makes it
// read-only even where it could write.
func inspectRegion(path string, mode openMode) (*RegionInfo, error) {
	r, err := openRegion(path, 0, &Options{InitTimeout: -1}, mode)
	if err != nil {
		return nil, err
	}
	defer r.close()
	// A monitor must survive what it monitors: a file truncated while we
	// read it faults, and that is reported (ErrTruncated), not fatal.
	var info *RegionInfo
	err = guardFault(func() error { return &regionError{op: "inspect region " + r.path, err: r.faultCause()} }, func() error {
		info = r.inspect()
		return nil
	})
	return info, err
}

// Inspect describes r's objects and processes as Inspect does, through
// this open handle: for a region that has no path to open (CreateMemfd,
// OpenFile) and for a process that has the region open anyway. It
// first re-reads the object table under the region's file lock, so objects
// that other processes created since are included. It stamps fast-path
// holds as Inspect does (unless r is read-only). It returns
// ErrRegionClosed after Close, and ErrTruncated (and ErrBadSize) if the file
// has shrunk under the mapping; a corrupt table is reported as an open
// reports it.
func (r *Region) Inspect() (*RegionInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrRegionClosed
	}
	if err := r.refreshObjects(); err != nil {
		return nil, err
	}
	var info *RegionInfo
	err := guardFault(func() error { return &regionError{op: "inspect region " + r.path, err: r.faultCause()} }, func() error {
		info = r.inspect()
		return nil
	})
	return info, err
}

// inspect describes r's objects and processes (see Inspect).
func (r *Region) inspect() *RegionInfo {
	info := &RegionInfo{
		Path:     r.path,
		Size:     int64(len(r.data)),
		Version:  int(ne.Uint32(r.data[hdrVersion:])),
		Created:  time.Unix(0, int64(ne.Uint64(r.data[hdrCreatedNs:]))),
		ReadOnly: r.readOnly,
	}
	insp := &inspector{r: r, alive: map[uint32]aliveness{}}
	for _, o := range r.sortedObjects() {
		oi := ObjectInfo{Name: o.name, Kind: objectKinds[o.kind].name, Offset: int64(o.offset), Size: int(o.size)}
		objectKinds[o.kind].inspect(insp, r.data[o.offset:o.offset+uint64(o.size)], &oi)
		info.Objects = append(info.Objects, oi)
	}
	for s := range uint32(regionProcSlots) {
		st := word32(r.slotWord(s), procState).Load()
		if st&procLive == 0 {
			continue
		}
		a := insp.check(makeToken(s, st&procGenMask))
		info.Processes = append(info.Processes, ProcessInfo{Slot: int(s), PID: int(a.pid), Alive: a.alive})
	}
	info.Deadlocks = r.deadlocks()
	return info
}

func (r *Region) sortedObjects() []regionObject {
	objs := make([]regionObject, 0, len(r.objects))
	for _, o := range r.objects {
		objs = append(objs, o)
	}
	// Table order is creation order; show by offset, which is the same.
	for i := 1; i < len(objs); i++ {
		for j := i; j > 0 && objs[j].offset < objs[j-1].offset; j-- {
			objs[j], objs[j-1] = objs[j-1], objs[j]
		}
	}
	return objs
}

type aliveness struct {
	alive bool
	pid   uint32
}

// inspector caches liveness per owner token for one inspection.
type inspector struct {
	r     *Region
	alive map[uint32]aliveness
}

func (insp *inspector) check(token uint32) aliveness {
	if a, ok := insp.alive[token]; ok {
		return a
	}
	alive, pid := insp.r.tokenAlive(token)
	a := aliveness{alive, pid}
	insp.alive[token] = a
	return a
}

// setHolder fills in a held lock's holder and its state from the holder's
// aliveness (info.Inconsistent and info.Waiters already set).
func setHolder(info *ObjectInfo, a aliveness) {
	info.HolderPID, info.HolderAlive = int(a.pid), a.alive
	switch {
	case !a.alive || info.Inconsistent:
		info.State = "owner-dead"
	case info.Waiters:
		info.State = "contended"
	default:
		info.State = "held"
	}
}
