package lockprof

import (
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword"
)

// contendedLocker is contendedOrders for any kind: the checks below run
// one kind at a time, so one leaf serves them all.
//
//go:noinline
func contendedLocker(l sync.Locker, n int) {
	for range n {
		l.Lock()
		holdBriefly()
		l.Unlock()
	}
}

// stuckOffKinds are the in-process locks whose waits the profile must
// record with stuck reports off: a Mutex registers its sleeps with the
// stuck watcher, a TicketMutex and an RWMutex sleep with a note, and
// turning reports off skips both.
var stuckOffKinds = []struct {
	name string
	new  func(stuck time.Duration) sync.Locker
}{
	{"Mutex", func(stuck time.Duration) sync.Locker {
		m := new(lockword.Mutex)
		m.SetStuckThreshold(stuck)
		return m
	}},
	{"TicketMutex", func(stuck time.Duration) sync.Locker {
		m := new(lockword.TicketMutex)
		m.SetStuckThreshold(stuck)
		return m
	}},
	{"RWMutex", func(stuck time.Duration) sync.Locker {
		m := new(lockword.RWMutex)
		m.SetStuckThreshold(stuck)
		return m
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
// Timing assumption: none; the goroutines contend again until a wait is
// recorded (contendUntil), for at most 30 s.
func TestContentionProfileStuckReportsOff(t *testing.T) {
	defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(1))
	for _, k := range stuckOffKinds {
		unlockers, waiters := written(t, WriteTo), written(t, WriteWaitersTo)
		l := k.new(-1)
		if !contendUntil(func() { contendedLocker(l, 100) }, func() bool {
			return grew(waiters, written(t, WriteWaitersTo), ".contendedLocker")
		}) {
			t.Errorf("%s, stuck reports off: no wait recorded at contendedLocker in the waiters' profile", k.name)
		}
		if !contendUntil(func() { contendedLocker(l, 100) }, func() bool {
			return grew(unlockers, written(t, WriteTo), ".contendedLocker")
		}) {
			t.Errorf("%s, stuck reports off: no wait charged to contendedLocker's Unlock in the unlockers' profile", k.name)
		}
	}
}
