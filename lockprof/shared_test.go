//go:build linux

package lockprof

import (
	"bytes"
	"path/filepath"
	"sync"
	"testing"
	"time"

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
// Lock; and those on shm.Mutex, TicketMutex and RWMutex's writers with
// their stuck reports off. Timing assumption: none; the goroutines contend
// again until a wait is recorded (contendUntil), for at most 30 s.
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
	var leaves map[string]bool
	if !contendUntil(func() { contendedShared(m, 300) }, func() bool {
		var buf bytes.Buffer
		if err := WriteWaitersTo(&buf); err != nil {
			t.Fatal(err)
		}
		leaves = leafFunctions(t, buf.Bytes())
		return leaves[".contendedShared"]
	}) {
		t.Fatalf("no sample at contendedShared; leaves: %v", leaves)
	}
	tm, err := r.TicketMutex("tickets")
	if err != nil {
		t.Fatal(err)
	}
	rw, err := r.RWMutex("catalog")
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]interface {
		sync.Locker
		SetStuckThreshold(time.Duration)
	}{"shm.Mutex": m, "shm.TicketMutex": tm, "shm.RWMutex": rw} {
		l.SetStuckThreshold(-1)
		before := written(t, WriteWaitersTo)
		if !contendUntil(func() { contendedLocker(l, 100) }, func() bool {
			return grew(before, written(t, WriteWaitersTo), ".contendedLocker")
		}) {
			t.Errorf("%s, stuck reports off: no wait recorded at contendedLocker in the waiters' profile", name)
		}
	}
}
