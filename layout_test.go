package lockword

import (
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
	if statsFlag&(mutexStateMask|spinHeld|spinCount) != 0 {
		t.Error("statsFlag overlaps state bits")
	}
}
