package lockprof

import (
	"bytes"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// contendUntil runs contend(f) until recorded reports true, for at most
// 30 s, and reports whether it did. Eight goroutines contend on a quiet
// host at once, but a loaded host can run each one's whole loop in one
// time slice, none waiting for another: the rounds are repeated until a
// wait happens (the check can still fail: a profile that records nothing
// never reports true).
func contendUntil(f func(), recorded func() bool) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		contend(f)
		if recorded() {
			return true
		}
	}
	return false
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

// written writes the profile (write: WriteTo or WriteWaitersTo) and
// returns its flat delays.
func written(t *testing.T, write func(io.Writer) error) map[string]int64 {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	return flatDelay(t, buf.Bytes())
}

// TestContentionProfileNamesTheContendedFunction: a crafted contended
// workload on each kind of waiter (a Mutex, which registers its waits,
// and a TicketMutex, which sleeps with a note) shows up in the profile,
// written and parsed back, with the function that called Lock ranked
// first by delay; served over HTTP too. Timing assumption: none; the
// goroutines contend again until a wait is recorded (contendUntil).
func TestContentionProfileNamesTheContendedFunction(t *testing.T) {
	defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(1))
	before := written(t, WriteTo)
	var m lockword.Mutex
	var top string
	if !contendUntil(func() { contendedOrders(&m, 200) }, func() bool {
		after := written(t, WriteTo)
		top = topSince(before, after)
		return grew(before, after, ".contendedOrders")
	}) || !strings.HasSuffix(top, ".contendedOrders") {
		t.Fatalf("the profile's top function by delay is %q, want contendedOrders", top)
	}
	var tm lockword.TicketMutex
	var leaves map[string]bool
	if !contendUntil(func() { contendedTickets(&tm, 400) }, func() bool {
		rec := httptest.NewRecorder()
		Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/lockword", nil))
		leaves = leafFunctions(t, rec.Body.Bytes())
		return leaves[".contendedTickets"]
	}) {
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

// slowHolder takes m over and over, counting each hold in holds, and
// holds it long, until stop.
//
//go:noinline
func slowHolder(m *lockword.Mutex, holds *atomic.Int64, stop *atomic.Bool) {
	for !stop.Load() {
		m.Lock()
		holds.Add(1)
		for range 20 {
			holdBriefly()
		}
		m.Unlock()
		runtime.Gosched() // let the woken waiter in
	}
}

// quickWaiter, n times, waits until slowHolder has taken m again, then
// locks it (so that it finds it held) and unlocks it at once.
//
//go:noinline
func quickWaiter(m *lockword.Mutex, holds *atomic.Int64, n int) {
	for range n {
		for seen := holds.Load(); holds.Load() == seen; {
			runtime.Gosched()
		}
		m.Lock()
		m.Unlock()
	}
}

// TestContentionProfileChargesTheUnlocker: as the runtime's mutex
// profile, the default profile charges a wait to the Unlock that ended
// it, and the waiters' profile to the Lock that waited. slowHolder holds
// the lock long; quickWaiter, in one goroutine, only waits for it and
// releases it at once: the first tops the default profile, the second the
// waiters' one. (With several waiters, a waiter's quick Unlock would wake
// the next one, and be charged its wait, as the runtime would.) Timing
// assumption: none; a waiter that finds the lock held sleeps until
// slowHolder's Unlock wakes it, however slow the host.
func TestContentionProfileChargesTheUnlocker(t *testing.T) {
	defer lockword.SetContentionProfileRate(lockword.SetContentionProfileRate(1))
	unlockers, waiters := written(t, WriteTo), written(t, WriteWaitersTo)
	var m lockword.Mutex
	var stop atomic.Bool
	var holds atomic.Int64
	var holder sync.WaitGroup
	holder.Go(func() { slowHolder(&m, &holds, &stop) })
	quickWaiter(&m, &holds, 100)
	stop.Store(true)
	holder.Wait()
	if top := topSince(unlockers, written(t, WriteTo)); !strings.HasSuffix(top, ".slowHolder") {
		t.Errorf("the profile's top function by delay is %q, want slowHolder, whose Unlock ended the waits", top)
	}
	if top := topSince(waiters, written(t, WriteWaitersTo)); !strings.HasSuffix(top, ".quickWaiter") {
		t.Errorf("the waiters' profile's top function by delay is %q, want quickWaiter, which waited", top)
	}
}

// TestHandlerRefusesUnknownView: a mistyped view (?view=waiters) is a
// 400, not the unlockers' profile served as if it were the waiters'.
func TestHandlerRefusesUnknownView(t *testing.T) {
	for view, want := range map[string]int{"": 200, "unlocker": 200, "waiter": 200, "waiters": 400, "bogus": 400} {
		rec := httptest.NewRecorder()
		Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/lockword?view="+view, nil))
		if rec.Code != want {
			t.Errorf("?view=%s: status %d, want %d", view, rec.Code, want)
		}
	}
}
