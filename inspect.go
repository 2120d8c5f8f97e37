package lockword

import (
	"time"
)

// RegionInfo is a snapshot of a region, as InspectRegion (and the
// `lockword inspect` command) reports it.
type RegionInfo struct {
	Path      string        `json:"path"`
	Size      int64         `json:"size_bytes"`
	Version   int           `json:"abi_version"`
	Created   time.Time     `json:"created"`
	Objects   []ObjectInfo  `json:"objects"`
	Processes []ProcessInfo `json:"processes"` // attached processes
}

// ObjectInfo describes one object of a region and the live state of its
// lock word.
type ObjectInfo struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Offset int64  `json:"offset"`
	Size   int    `json:"size_bytes"`
	// Word is the raw lock word (layout in the kind's documentation).
	Word uint32 `json:"word"`
	// State is "free", "held", "contended" (held, and some process may
	// be asleep waiting), "owner-dead" (the holder died and nobody has
	// recovered the lock yet, or a recoverer holds it and has not called
	// MarkConsistent: see HolderAlive), or "not-recoverable". An RW mutex
	// may also be "read-held" (readers only, see Readers); a Cond is
	// "idle" or "waiting" (Queued goroutines wait on it).
	State string `json:"state"`
	// HolderPID is the holding process's PID (0 when free), and
	// HolderAlive whether it is still running (a stopped process is
	// alive).
	HolderPID   int  `json:"holder_pid,omitempty"`
	HolderAlive bool `json:"holder_alive"`
	// Inconsistent: taken from a dead owner, MarkConsistent not yet called.
	Inconsistent bool `json:"inconsistent,omitempty"`
	// HeldFor is how long the lock has been held, when known (HeldForKnown):
	// exactly for holds that began on the slow path or with statistics
	// on, else since the first inspection or wait that saw the hold.
	HeldFor      time.Duration `json:"held_for_ns,omitempty"`
	HeldForKnown bool          `json:"held_for_known"`
	// Waiters is the lock word's hint that a process sleeps waiting.
	Waiters bool `json:"waiters"`
	// Queued is how many tickets wait behind the holder (ticket mutexes,
	// and an RW mutex's writers): one per waiting process; for a Cond,
	// how many goroutines wait on it (a process that died waiting stays
	// counted).
	Queued int `json:"queued,omitempty"`
	// Readers is how many read holds an RW mutex counts: holding, or
	// waiting behind a writer. Readers are counted, not owned: a reader
	// process that died holding stays counted (see SharedRWMutex).
	Readers int `json:"readers,omitempty"`
	// Stats, when statistics are enabled (EnableStats), summed over all
	// processes.
	Stats *Stats `json:"stats,omitempty"`
}

// ProcessInfo is one attached process of a region.
type ProcessInfo struct {
	Slot  int  `json:"slot"`
	PID   int  `json:"pid"`
	Alive bool `json:"alive"`
}

// InspectRegion opens the region at path as an observer (without attaching
// to it: it takes no process slot and no lock) and describes every object.
// It returns the same validation errors as OpenRegion, without waiting for
// a creator.
//
// It writes one thing: for a held lock whose hold began on the fast path
// (so that no start time was recorded, which would cost the fast path a
// clock read) it stamps the current time as "held since at most now", so
// that the next inspection shows the hold growing. The stamp goes in the
// object's held-since field, never into ownership or waiter bits.
func InspectRegion(path string) (*RegionInfo, error) {
	r, err := openRegion(path, 0, &RegionOptions{InitTimeout: -1}, modeObserve)
	if err != nil {
		return nil, err
	}
	defer r.close()
	info := &RegionInfo{
		Path:    r.path,
		Size:    int64(len(r.data)),
		Version: int(ne.Uint32(r.data[hdrVersion:])),
		Created: time.Unix(0, int64(ne.Uint64(r.data[hdrCreatedNs:]))),
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
	return info, nil
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

func inspectMutex(insp *inspector, obj []byte, info *ObjectInfo) {
	word := word32(obj, mutexObjWord)
	w := word.Load()
	info.Word = w
	info.Waiters = w&sharedWaiters != 0
	info.Inconsistent = w&sharedInconsistent != 0
	if w&sharedStats != 0 {
		s := mutexObjStats(obj)
		info.Stats = &s
	}
	owner := w & ownerMask
	switch owner {
	case 0:
		info.State = "free"
		return
	case ownerNotRecoverable:
		info.State = "not-recoverable"
		return
	}
	a := insp.check(owner)
	info.HolderPID, info.HolderAlive = int(a.pid), a.alive
	switch {
	case !a.alive || info.Inconsistent:
		info.State = "owner-dead"
	case info.Waiters:
		info.State = "contended"
	default:
		info.State = "held"
	}
	since := word64(obj, mutexObjHeldSince)
	now := monoNowNs()
	if w&sharedTimed != 0 {
		info.HeldFor = time.Duration(max(now-int64(since.Load()), 0))
		info.HeldForKnown = true
		return
	}
	// Stamp "held since at most now": time first, then the bit, so that a
	// reader who sees the bit sees the time. If the word changed
	// meanwhile the CAS fails and nothing is claimed.
	since.Store(uint64(now))
	if word.CompareAndSwap(w, w|sharedTimed) {
		info.HeldForKnown = true
	}
}
