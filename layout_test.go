package lockword

import (
	"fmt"
	"testing"
	"unsafe"
)

// TestLayout pins the sizes and lock-word offsets that docs promise.
func TestLayout(t *testing.T) {
	for _, c := range []struct {
		name         string
		size, offset uintptr
		wantSize     uintptr
	}{
		{"Mutex", unsafe.Sizeof(Mutex{}), unsafe.Offsetof(Mutex{}.state), 16},
		{"SpinMutex", unsafe.Sizeof(SpinMutex{}), unsafe.Offsetof(SpinMutex{}.state), 16},
	} {
		if c.size != c.wantSize || c.offset != 0 {
			t.Errorf("%s: size %d offset of lock word %d, want size %d offset 0", c.name, c.size, c.offset, c.wantSize)
		}
	}
	var tm TicketMutex
	var rw RWMutex
	var c Cond
	for _, f := range []struct {
		name        string
		size        uintptr
		offsets     []uintptr
		wantSize    uintptr
		wantOffsets []uintptr
	}{
		{"TicketMutex", unsafe.Sizeof(tm), []uintptr{unsafe.Offsetof(tm.next), unsafe.Offsetof(tm.serving), unsafe.Offsetof(tm.aux)}, 24, []uintptr{0, 4, 8}},
		{"RWMutex", unsafe.Sizeof(rw), []uintptr{unsafe.Offsetof(rw.state), unsafe.Offsetof(rw.departing), unsafe.Offsetof(rw.writers)}, 24, []uintptr{0, 4, 8}},
		{"Cond", unsafe.Sizeof(c), []uintptr{unsafe.Offsetof(c.mu), unsafe.Offsetof(c.nl), unsafe.Offsetof(c.queued)}, 128, []uintptr{0, 16, 48}},
	} {
		if f.size != f.wantSize || fmt.Sprint(f.offsets) != fmt.Sprint(f.wantOffsets) {
			t.Errorf("%s: size %d, word offsets %v; want size %d, offsets %v", f.name, f.size, f.offsets, f.wantSize, f.wantOffsets)
		}
	}
	if rwPhase|rwWriter|rwParked|rwStats != rwReader-1 || rwMaxReaders != 134217727 || rwUnread != ^uint32(rwReader)+1 {
		t.Error("RWMutex state bits do not tile the low nibble, or the reader limit is not the documented one")
	}
	if statsFlag&(mutexStateMask|spinHeld|spinCount) != 0 {
		t.Error("statsFlag overlaps state bits")
	}
}
