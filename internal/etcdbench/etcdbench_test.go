package etcdbench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// localLock is a Locker on a sync.Mutex.
type localLock struct{ mu *sync.Mutex }

func (l localLock) Lock(context.Context) error   { l.mu.Lock(); return nil }
func (l localLock) Unlock(context.Context) error { l.mu.Unlock(); return nil }
func (localLock) Close() error                   { return nil }

// TestExclusionCheck: four goroutines on a real lock pass, with every
// acquisition counted and hand-overs measured; holds that overlap, as a
// lock that excludes nothing makes them (here written out, since with an
// empty critical section a broken lock's holds last nanoseconds and
// overlap only by chance), are reported as ErrNotExcluded.
func TestExclusionCheck(t *testing.T) {
	var mu sync.Mutex
	start := time.Now()
	holds := make([][]hold, 4)
	var wg sync.WaitGroup
	for i := range holds {
		wg.Go(func() { holds[i], _ = work(context.Background(), localLock{&mu}, start, 50, time.Time{}) })
	}
	wg.Wait()
	s, err := sample(start, time.Time{}, holds)
	if err != nil || s.Acquisitions != 200 || len(s.PerWorker) != 4 || s.AcqPerSec() <= 0 {
		t.Fatalf("a real lock: %d acquisitions, per worker %v, %v", s.Acquisitions, s.PerWorker, err)
	}
	overlapping := [][]hold{{{Asked: 0, Got: 10, Left: 50}}, {{Asked: 5, Got: 40, Left: 60}}}
	if _, err := sample(time.Unix(0, 0), time.Time{}, overlapping); !errors.Is(err, ErrNotExcluded) {
		t.Fatalf("overlapping holds: %v, want ErrNotExcluded", err)
	}
	handedOver := [][]hold{{{Asked: 0, Got: 10, Left: 50}}, {{Asked: 5, Got: 70, Left: 80}}}
	if s, err := sample(time.Unix(0, 0), time.Time{}, handedOver); err != nil || len(s.Handovers) != 1 || s.Handovers[0] != 20 {
		t.Fatalf("a hand-over from 50 to 70 ns: %v, %v", s.Handovers, err)
	}
	// A timed run stops at its end even when the last Unlock was called
	// before it (the worker was then in that Unlock).
	if s, err := sample(time.Unix(0, 0), time.Unix(0, 100), handedOver); err != nil || s.Elapsed != 100 {
		t.Fatalf("a timed run to 100 ns whose last Unlock was called at 80: elapsed %v, %v", s.Elapsed, err)
	}
}
