package lockprof

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/lockword/lockword"
)

// holdBriefly is the work done holding a lock: long enough that the
// other goroutines find it held and wait.
func holdBriefly() {
	for i := 0; i < 2000; i++ {
		sink.Add(1)
	}
}

var sink atomic.Int64

//go:noinline
func contendedOrders(m *lockword.Mutex, n int) {
	for range n {
		m.Lock()
		holdBriefly()
		m.Unlock()
	}
}

//go:noinline
func contendedTickets(m *lockword.TicketMutex, n int) {
	for range n {
		m.Lock()
		holdBriefly()
		m.Unlock()
	}
}

// contend runs f in 8 goroutines at once.
func contend(f func()) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(f)
	}
	wg.Wait()
}

// flatDelay parses a written profile and returns each leaf function's
// delay (its flat delay, by which `go tool pprof -top` ranks it).
func flatDelay(t *testing.T, data []byte) map[string]int64 {
	t.Helper()
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse the written profile: %v", err)
	}
	if len(p.SampleType) != 2 || p.SampleType[1].Type != "delay" {
		t.Fatalf("sample types %v, want contentions and delay", p.SampleType)
	}
	flat := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
			continue
		}
		flat[s.Location[0].Line[0].Function.Name] += s.Value[1]
	}
	return flat
}

// topSince returns the function whose flat delay grew most from before
// to after: the profile, like the runtime's, accumulates for the life of
// the process (other tests, -count).
func topSince(before, after map[string]int64) string {
	top, most := "", int64(-1)
	for fn, d := range after {
		if d -= before[fn]; d > most {
			top, most = fn, d
		}
	}
	return top
}

// written writes the profile and returns its flat delays.
func written(t *testing.T) map[string]int64 {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return flatDelay(t, buf.Bytes())
}

// TestContentionProfileNamesTheContendedFunction: a crafted contended
// workload on each kind of waiter (a Mutex, which registers its waits,
// and a TicketMutex, which sleeps with a note) shows up in the profile,
// written and parsed back, with the function that called Lock ranked
// first by delay; served over HTTP too. Timing assumption: none; 8
// goroutines that each hold the lock 200 times contend on any host.
func TestContentionProfileNamesTheContendedFunction(t *testing.T) {
	defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(1))
	before := written(t)
	var m lockword.Mutex
	contend(func() { contendedOrders(&m, 200) })
	if top := topSince(before, written(t)); !strings.HasSuffix(top, ".contendedOrders") {
		t.Fatalf("the profile's top function by delay is %q, want contendedOrders", top)
	}
	var tm lockword.TicketMutex
	contend(func() { contendedTickets(&tm, 400) })
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/lockword", nil))
	if leaves := leafFunctions(t, rec.Body.Bytes()); !leaves[".contendedTickets"] {
		t.Fatalf("no sample at contendedTickets in the served profile; leaves: %v", leaves)
	}
}

// leaves returns the leaf functions of p's samples, by the last element
// of their names (".contendedTickets").
func leaves(p *profile.Profile) map[string]bool {
	m := map[string]bool{}
	for _, s := range p.Sample {
		name := s.Location[0].Line[0].Function.Name
		m[name[strings.LastIndexByte(name, '.'):]] = true
	}
	return m
}

// leafFunctions parses a written profile and returns its leaves.
func leafFunctions(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse the written profile: %v", err)
	}
	return leaves(p)
}
