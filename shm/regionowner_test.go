//go:build linux

package shm

import (
	"context"
	"errors"
	"github.com/lockword/lockword"
	"os"
	"strings"
	"testing"
	"time"
)

// The process table (regionowner.go): slots, generations, liveness, the
// PID namespace record.

// TestRegionProcessTableReuse: slots of closed handles are reused, and a
// slot whose process died is reclaimed when the table is full.
func TestRegionProcessTableReuse(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	used := map[uint32]bool{r.slot: true}
	for range 5 {
		o, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		used[o.slot] = true
		o.Close()
	}
	// Fill every slot with a dead process, then attach.
	for s := range uint32(regionProcSlots) {
		if s == r.slot {
			continue
		}
		forgeSlot(r, s, procIdentity{pid: 4194303, start: 1, boot: mustSelf(t).boot}, 7)
	}
	o, err := Open(path, nil)
	if err != nil {
		t.Fatalf("attach with only dead slots free: %v", err)
	}
	if tokenGen(o.token) != 8 {
		t.Fatalf("reclaimed slot has generation %d, want 8", tokenGen(o.token))
	}
	o.Close()
}

// TestAttachSparesNamedDeadSlots: when every slot is live, attach reclaims
// a dead process's slot, but not the one a lock word still names while
// another is free to take: that slot is all that identifies the dead
// holder to its recoverer and to inspect.
func TestAttachSparesNamedDeadSlots(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	boot := mustSelf(t).boot
	for s := range uint32(regionProcSlots) {
		if s != r.slot {
			forgeSlot(r, s, procIdentity{pid: 4194303, start: 1, boot: boot}, 7)
		}
	}
	named := (r.slot + 1) % regionProcSlots
	holder := forgeSlot(r, named, procIdentity{pid: 4194302, start: 1, boot: boot}, 7)
	m.word.Store(holder)
	word32(r.data, hdrSlotHint).Store(named) // the search starts there
	o, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.slot == named {
		t.Fatalf("attach reclaimed slot %d, which the lock word names", named)
	}
	if alive, pid := r.tokenAlive(holder); alive || pid != 4194302 {
		t.Fatalf("dead holder: alive %v, PID %d; want dead, PID 4194302", alive, pid)
	}
	m.word.Store(0)
}

// TestGenerationSkipsStaleTokens: a lock word still naming (slot, g+1) —
// a holder that died long ago, a full generation cycle back — must not be
// reissued to a new process, or the dead holder would look alive.
func TestGenerationSkipsStaleTokens(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, _ := r.Mutex("m")
	slot := (r.slot + 1) % regionProcSlots
	forgeSlot(r, slot, procIdentity{}, 41)
	word32(r.slotWord(slot), procState).Store(41) // not live: next attach takes it
	word32(r.data, hdrSlotHint).Store(slot)
	m.word.Store(makeToken(slot, 42))
	o, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.slot != slot || tokenGen(o.token) == 42 {
		t.Fatalf("attached to slot %d generation %d: reissued a token a lock word names", o.slot, tokenGen(o.token))
	}
	if alive, _ := o.tokenAlive(makeToken(slot, 42)); alive {
		t.Fatal("stale token looks alive")
	}
	m.word.Store(0)
}

func mustSelf(t *testing.T) procIdentity {
	id, err := selfIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// forgeSlot writes a process-table slot as attach would.
func forgeSlot(r *Region, slot uint32, id procIdentity, gen uint32) uint32 {
	sw := r.slotWord(slot)
	word32(sw, procState).Store(gen)
	word32(sw, procPID).Store(id.pid)
	word64(sw, procStart).Store(id.start)
	word64(sw, procBoot).Store(ne.Uint64(id.boot[:8]))
	word64(sw, procBoot+8).Store(ne.Uint64(id.boot[8:]))
	word32(sw, procState).Store(procLive | gen)
	return makeToken(slot, gen)
}

// TestRegionForeignPIDNamespace forges the region's PID namespace record:
// another namespace's region is refused by every way in, with the reason;
// ours opens; an unknown one (0) opens, but then no holder is declared
// dead by PID: its liveness cannot be checked, and a live holder must
// never be robbed.
func TestRegionForeignPIDNamespace(t *testing.T) {
	me := mustSelf(t)
	if me.pidNS == 0 {
		t.Skip("/proc/self/ns/pid cannot be read here")
	}
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	rec := word64(r.data, hdrPIDNamespace)
	if got := rec.Load(); got != me.pidNS {
		t.Fatalf("creator recorded PID namespace %d, want ours, %d", got, me.pidNS)
	}
	o, err := Open(path, nil)
	if err != nil {
		t.Fatalf("open in our own namespace: %v", err)
	}
	o.Close()

	rec.Store(me.pidNS + 1) // r, attached, stands for the other namespace's processes
	for name, open := range map[string]func() error{
		"OpenRegion":         func() error { _, err := Open(path, nil); return err },
		"OpenOrCreateRegion": func() error { _, err := OpenOrCreate(path, 0, nil); return err },
		"InspectRegion":      func() error { _, err := Inspect(path); return err },
	} {
		err := open()
		if !errors.Is(err, ErrForeignPIDNamespace) || !strings.Contains(err.Error(), "shareProcessNamespace") {
			t.Errorf("%s of another PID namespace's region = %v, want ErrForeignPIDNamespace with the remedy", name, err)
		}
	}

	// Unknown: opens, and a holder whose PID no process has here is
	// still not robbed.
	rec.Store(0)
	o, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if rec.Load() != 0 {
		t.Fatal("an opener rewrote the namespace record while processes of this boot were attached")
	}
	om, _ := o.Mutex("m")
	slot := (max(r.slot, o.slot) + 1) % regionProcSlots
	dead := forgeSlot(o, slot, procIdentity{pid: 4194303, start: 1, boot: me.boot}, 3)
	om.word.Store(dead)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := om.LockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext on a holder of unknown namespace = %v, want DeadlineExceeded (never robbed)", err)
	}
	if info, err := Inspect(path); err != nil || !info.Objects[0].HolderAlive {
		t.Fatalf("inspect of a holder of unknown namespace: %v %+v, want alive", err, info)
	}

	// Known to be ours again: the same holder is found dead.
	rec.Store(me.pidNS)
	o2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close()
	m2, _ := o2.Mutex("m")
	if err := m2.LockContext(context.Background()); !errors.Is(err, lockword.ErrOwnerDead) {
		t.Fatalf("LockContext on a dead holder = %v, want lockword.ErrOwnerDead", err)
	}
	m2.MarkConsistent()
	m2.Unlock()
}

// TestRegionPIDNamespaceRebinds: a record that binds nobody (no process of
// this boot is attached: a file that outlived a reboot, or whose
// processes all detached) is replaced by the next attacher's namespace;
// Inspect accepts it and writes nothing.
func TestRegionPIDNamespaceRebinds(t *testing.T) {
	me := mustSelf(t)
	if me.pidNS == 0 {
		t.Skip("/proc/self/ns/pid cannot be read here")
	}
	path := tempRegionPath(t)
	r, err := Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	earlierBoot := me.boot
	earlierBoot[0] ^= 0xff
	forgeSlot(r, (r.slot+1)%regionProcSlots, procIdentity{pid: me.pid, start: me.start, boot: earlierBoot}, 3)
	word64(r.data, hdrPIDNamespace).Store(me.pidNS + 1)
	r.Close()
	if _, err := Inspect(path); err != nil {
		t.Fatalf("inspect of a region nobody of this boot is attached to: %v", err)
	}
	record := func() uint64 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return ne.Uint64(b[hdrPIDNamespace:])
	}
	if got := record(); got != me.pidNS+1 {
		t.Fatalf("inspect rewrote the record: %d", got)
	}
	o, err := Open(path, nil)
	if err != nil {
		t.Fatalf("open of a region nobody of this boot is attached to: %v", err)
	}
	defer o.Close()
	if got := record(); got != me.pidNS {
		t.Fatalf("record %d after attach, want ours, %d", got, me.pidNS)
	}
}
