//go:build linux

package lockprof

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/shm"
)

// A sharedLock is what the shared kinds below have in common.
type sharedLock interface {
	Lock()
	Unlock()
	SetStuckThreshold(time.Duration)
}

//go:noinline
func contendedSharedKind(m sharedLock, n int) {
	for range n {
		m.Lock()
		holdBriefly()
		m.Unlock()
	}
}

// TestContentionProfileSharedStuckReportsOff: this process's waits on
// shared locks (shm.Mutex, TicketMutex, RWMutex's writers) are in the
// waiters' profile with stuck reports off, as with them on
// (TestContentionProfileSharedMutex). Timing assumption: none; 8
// goroutines that each hold the lock 100 times contend on any host.
func TestContentionProfileSharedStuckReportsOff(t *testing.T) {
	defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(1))
	r, err := shm.Create(filepath.Join(t.TempDir(), "region"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.Mutex("m")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := r.TicketMutex("t")
	if err != nil {
		t.Fatal(err)
	}
	rw, err := r.RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]sharedLock{"shm.Mutex": m, "shm.TicketMutex": tm, "shm.RWMutex": rw} {
		l.SetStuckThreshold(-1)
		before := written(t, WriteWaitersTo)
		contend(func() { contendedSharedKind(l, 100) })
		if !grew(before, written(t, WriteWaitersTo), ".contendedSharedKind") {
			t.Errorf("%s, stuck reports off: no wait recorded at contendedSharedKind in the waiters' profile", name)
		}
	}
}
