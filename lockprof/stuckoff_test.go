package lockprof

import (
	"testing"
	"time"

	"github.com/lockword/lockword"
)

//go:noinline
func contendedWriters(m *lockword.RWMutex, n int) {
	for range n {
		m.Lock()
		holdBriefly()
		m.Unlock()
	}
}

// stuckOffKinds are the in-process locks whose waits the profile must
// record with stuck reports off: a Mutex registers its sleeps with the
// stuck watcher, a TicketMutex and an RWMutex sleep with a note, and
// turning reports off skips both. leaf is the function that calls Lock.
var stuckOffKinds = []struct {
	name, leaf string
	run        func(stuck time.Duration)
}{
	{"Mutex", ".contendedOrders", func(stuck time.Duration) {
		var m lockword.Mutex
		m.SetStuckThreshold(stuck)
		contend(func() { contendedOrders(&m, 100) })
	}},
	{"TicketMutex", ".contendedTickets", func(stuck time.Duration) {
		var m lockword.TicketMutex
		m.SetStuckThreshold(stuck)
		contend(func() { contendedTickets(&m, 100) })
	}},
	{"RWMutex", ".contendedWriters", func(stuck time.Duration) {
		var m lockword.RWMutex
		m.SetStuckThreshold(stuck)
		contend(func() { contendedWriters(&m, 100) })
	}},
}

// grew reports whether a leaf function's delay (by the last element of
// its name) grew from before to after.
func grew(before, after map[string]int64, leaf string) bool {
	sum := func(m map[string]int64) (d int64) {
		for fn, v := range m {
			if len(fn) >= len(leaf) && fn[len(fn)-len(leaf):] == leaf {
				d += v
			}
		}
		return d
	}
	return sum(after) > sum(before)
}

// TestContentionProfileStuckReportsOff: both views record the waits of
// every kind with its stuck reports off (a negative threshold), as they
// do with them on (TestContentionProfileNamesTheContendedFunction).
// Timing assumption: none; 8 goroutines that each hold the lock 100
// times contend on any host.
func TestContentionProfileStuckReportsOff(t *testing.T) {
	defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(1))
	for _, k := range stuckOffKinds {
		unlockers, waiters := written(t, WriteTo), written(t, WriteWaitersTo)
		k.run(-1)
		if !grew(waiters, written(t, WriteWaitersTo), k.leaf) {
			t.Errorf("%s, stuck reports off: no wait recorded at %s in the waiters' profile", k.name, k.leaf)
		}
		if !grew(unlockers, written(t, WriteTo), k.leaf) {
			t.Errorf("%s, stuck reports off: no wait charged to %s's Unlock in the unlockers' profile", k.name, k.leaf)
		}
	}
}
