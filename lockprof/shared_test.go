//go:build linux

package lockprof

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/shm"
)

//go:noinline
func contendedShared(m *shm.Mutex, n int) {
	for range n {
		m.Lock()
		holdBriefly()
		m.Unlock()
	}
}

// TestContentionProfileSharedMutex: this process's waits on a shm.Mutex
// are in the waiters' profile too, charged to the function that called
// Lock.
func TestContentionProfileSharedMutex(t *testing.T) {
	defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(1))
	r, err := shm.Create(filepath.Join(t.TempDir(), "region"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.Mutex("orders")
	if err != nil {
		t.Fatal(err)
	}
	contend(func() { contendedShared(m, 300) })
	var buf bytes.Buffer
	if err := WriteWaitersTo(&buf); err != nil {
		t.Fatal(err)
	}
	if leaves := leafFunctions(t, buf.Bytes()); !leaves[".contendedShared"] {
		t.Fatalf("no sample at contendedShared; leaves: %v", leaves)
	}
}
