package lockword

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/lockword/lockword/internal/locktest"
)

func TestNewSeqLockRejectsPointers(t *testing.T) {
	type inner struct{ P *int }
	type quote struct {
		Price  int64
		Symbol string
	}
	check := func(err error, want string) {
		t.Helper()
		if !errors.Is(err, ErrHasPointers) || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want ErrHasPointers naming %q", err, want)
		}
	}
	_, err := NewSeqLock(quote{})
	check(err, "field Symbol is a string")
	_, err = NewSeqLock(struct{ In inner }{})
	check(err, "field In.P is a ptr")
	_, err = NewSeqLock([2][]byte{})
	check(err, "element [0] is a slice")
	_, err = NewSeqLock(new(int))
	check(err, "the type itself is a ptr")
	for _, f := range []func() error{
		func() error { _, err := NewSeqLock(map[int]int{}); return err },
		func() error { _, err := NewSeqLock[any](0); return err },
		func() error { _, err := NewSeqLock(make(chan int)); return err },
		func() error { _, err := NewSeqLock(func() {}); return err },
		func() error { _, err := NewSeqLock(unsafe.Pointer(nil)); return err },
	} {
		if err := f(); !errors.Is(err, ErrHasPointers) {
			t.Errorf("pointerful type accepted: %v", err)
		}
	}
	// Plain data is accepted, including zero-length arrays of pointers
	// (which hold none).
	for _, f := range []func() error{
		func() error { _, err := NewSeqLock(0); return err },
		func() error { _, err := NewSeqLock([3]uint64{}); return err },
		func() error { _, err := NewSeqLock(struct{}{}); return err },
		func() error { _, err := NewSeqLock([0]*int{}); return err },
		func() error {
			_, err := NewSeqLock(struct {
				A bool
				B float64
				C [3]int16
				D complex128
				E uintptr
			}{})
			return err
		},
	} {
		if err := f(); err != nil {
			t.Errorf("plain type rejected: %v", err)
		}
	}
}

func TestSeqLockZeroValuePanics(t *testing.T) {
	for name, f := range map[string]func(*SeqLock[int]){
		"Load":  func(s *SeqLock[int]) { s.Load() },
		"Store": func(s *SeqLock[int]) { s.Store(1) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "without NewSeqLock") {
					t.Errorf("%s on a zero SeqLock: recovered %v", name, r)
				}
			}()
			var s SeqLock[int]
			f(&s)
		}()
	}
}

// roundTrip stores and loads values of odd sizes, which use a partial last
// word.
func roundTrip[T comparable](t *testing.T, values ...T) {
	t.Helper()
	s, err := NewSeqLock(values[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Load(); got != values[0] {
		t.Fatalf("initial Load = %v, want %v", got, values[0])
	}
	for _, v := range values[1:] {
		s.Store(v)
		if got := s.Load(); got != v {
			t.Fatalf("Load = %v, want %v", got, v)
		}
	}
}

func TestSeqLockRoundTrip(t *testing.T) {
	roundTrip(t, [1]byte{1}, [1]byte{255})
	roundTrip(t, [5]byte{1, 2, 3, 4, 5}, [5]byte{9, 8, 7, 6, 5})
	roundTrip(t, [13]byte{1, 12: 13}, [13]byte{7: 7})
	roundTrip(t, struct {
		A uint32
		B uint16
	}{1, 2}, struct {
		A uint32
		B uint16
	}{0xffffffff, 0xfffe})
	roundTrip(t, struct{ X, Y, Z float64 }{1.5, -2, 3e300}, struct{ X, Y, Z float64 }{})
	roundTrip(t, struct{}{}, struct{}{})
	s, _ := NewSeqLock(7)
	if s.c.Seq.Load() != 0 {
		t.Fatalf("sequence %d after NewSeqLock, want 0", s.c.Seq.Load())
	}
	s.Store(8)
	if s.c.Seq.Load() != 2 {
		t.Fatalf("sequence %d after one Store, want 2 (even: stable)", s.c.Seq.Load())
	}
}

// tornPayload is locktest.TornPayload's shape, for positional literals.
type tornPayload struct{ A, B, C uint64 }

func newTornSeqLock(t testing.TB) *SeqLock[tornPayload] {
	s, err := NewSeqLock(tornPayload{0, 1000, 1000})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSeqLockTornReads is the seqlock's headline check: 10,000,000 reads
// (scaled down under -short and -race) against a writer that never stops,
// zero torn snapshots, and no reader ever sees time go backwards.
func TestSeqLockTornReads(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			s := newTornSeqLock(t)
			reads := scaled(10_000_000)
			if procs == 1 {
				reads /= 10 // the same interleavings, fewer of them
			}
			res := locktest.CheckTornReads(s.Store, s.Load, 4, 1, reads)
			t.Logf("%d reads by 4 readers, reader 0 saw %d distinct values", res.Reads, res.Distinct)
			if res.Violations != 0 || res.Backwards != 0 {
				t.Fatalf("%d torn reads, %d backwards in %d reads", res.Violations, res.Backwards, res.Reads)
			}
			if res.Distinct < 2 {
				t.Fatalf("reader 0 saw %d distinct values: the writer never overlapped the readers", res.Distinct)
			}
		})
	}
}

// TestSeqLockConcurrentWriters: Stores from several goroutines are
// serialized, so snapshots stay whole.
func TestSeqLockConcurrentWriters(t *testing.T) {
	withGOMAXPROCS(t, 2)
	s := newTornSeqLock(t)
	res := locktest.CheckTornReads(s.Store, s.Load, 3, 3, scaled(1_000_000))
	if res.Violations != 0 {
		t.Fatalf("%d torn reads with 3 writers", res.Violations)
	}
	if q := s.c.Seq.Load(); q&1 != 0 {
		t.Fatalf("sequence %d left odd", q)
	}
}

// loadNoRetry is a deliberately broken reader: it copies the payload once,
// skipping the sequence check and retry.
func loadNoRetry(s *SeqLock[tornPayload]) (v tornPayload) {
	s.c.CopyOut(&v)
	return v
}

// loadIgnoringOdd is broken more subtly: it retries if the sequence
// changed but does not wait for an odd (write in progress) one to become
// even, so it accepts a copy made during a single Store.
func loadIgnoringOdd(s *SeqLock[tornPayload]) (v tornPayload) {
	for {
		seq := s.c.Seq.Load()
		s.c.CopyOut(&v)
		if s.c.Seq.Load() == seq {
			return v
		}
	}
}

// TestSeqLockCatchesBrokenReaders shows that the torn-read check fails when
// the reader skips the retry, or ignores a write in progress.
func TestSeqLockCatchesBrokenReaders(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("torn reads need a writer and a reader running at once")
	}
	withGOMAXPROCS(t, 2)
	for name, load := range map[string]func(*SeqLock[tornPayload]) tornPayload{
		"no-retry":     loadNoRetry,
		"ignoring-odd": loadIgnoringOdd,
	} {
		t.Run(name, func(t *testing.T) {
			s := newTornSeqLock(t)
			// The writer must sometimes be caught mid-Store while
			// preempted or slow: a long payload write makes that
			// likely, but give it a few rounds.
			for round := 0; ; round++ {
				res := locktest.CheckTornReads(s.Store, func() tornPayload { return load(s) }, 1, 1, scaled(2_000_000))
				if res.Violations > 0 {
					t.Logf("caught %d torn reads in %d", res.Violations, res.Reads)
					return
				}
				if round == 9 {
					t.Fatalf("broken reader passed %d rounds: the torn-read check cannot fail", round+1)
				}
			}
		})
	}
}

// TestSeqLockLargePayload: a payload of many words, all equal in every
// consistent snapshot.
func TestSeqLockLargePayload(t *testing.T) {
	withGOMAXPROCS(t, 2)
	type big [64]uint64
	s, err := NewSeqLock(big{})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	writing := make(chan struct{}) // closed after the first Store
	wg.Go(func() {
		for i := uint64(1); !stop.Load(); i++ {
			var v big
			for j := range v {
				v[j] = i
			}
			s.Store(v)
			if i == 1 {
				close(writing)
			}
			procyield(500) // read-mostly (~10 µs between Stores): a writer that never pauses starves 64-word readers
		}
	})
	<-writing
	// Read at least scaled(100,000) snapshots and until the writer has
	// changed the value a few times: on a loaded machine the OS may run
	// the two goroutines by turns, so a fixed count could miss the writer.
	changes, last := 0, uint64(0)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < scaled(100_000) || (changes < 10 && time.Now().Before(deadline)); i++ {
		v := s.Load()
		for j := range v {
			if v[j] != v[0] {
				stop.Store(true)
				t.Fatalf("torn snapshot: word %d is %d, word 0 is %d", j, v[j], v[0])
			}
		}
		if v[0] != last {
			changes, last = changes+1, v[0]
		}
	}
	stop.Store(true)
	wg.Wait()
	if changes < 2 {
		t.Fatalf("the reader saw %d values: the writer never overlapped it", changes)
	}
}

// ---- Benchmarks: reading a small snapshot while one writer updates it ----
//
//	flock /tmp/lockword-bench.lock go test -run '^$' -bench 'Snapshot' -cpu 2 -benchtime 200ms -count 5 .
//
// Readers share b.N reads of a three-word value; ns/op is wall time per
// read across all readers, Mreads/s its inverse. writer=none has no writer;
// writer=busy has one goroutine that stores a new value, works about
// 0.5 µs, and stores again, for the whole run.

type snapshotKind struct {
	name string
	make func() (load func() tornPayload, store func(tornPayload))
}

var snapshotKinds = []snapshotKind{
	{"seqlock", func() (func() tornPayload, func(tornPayload)) {
		s, _ := NewSeqLock(tornPayload{0, 1000, 1000})
		return s.Load, s.Store
	}},
	{"rwmutex", func() (func() tornPayload, func(tornPayload)) {
		var mu sync.RWMutex
		v := &tornPayload{0, 1000, 1000}
		return func() tornPayload {
				mu.RLock()
				defer mu.RUnlock()
				return *v
			}, func(p tornPayload) {
				mu.Lock()
				*v = p
				mu.Unlock()
			}
	}},
	{"mutex", func() (func() tornPayload, func(tornPayload)) {
		var mu Mutex
		v := &tornPayload{0, 1000, 1000}
		return func() tornPayload {
				mu.Lock()
				defer mu.Unlock()
				return *v
			}, func(p tornPayload) {
				mu.Lock()
				*v = p
				mu.Unlock()
			}
	}},
	// The idiomatic Go alternative: swap a pointer to an immutable copy
	// (one allocation per store).
	{"atomic-pointer", func() (func() tornPayload, func(tornPayload)) {
		var p atomic.Pointer[tornPayload]
		p.Store(&tornPayload{0, 1000, 1000})
		return func() tornPayload { return *p.Load() }, func(v tornPayload) { p.Store(&v) }
	}},
}

func benchmarkSnapshot(b *testing.B, k snapshotKind, readers int, writer bool) {
	load, store := k.make()
	var stop atomic.Bool
	var wwg sync.WaitGroup
	if writer {
		wwg.Go(func() {
			for a := uint64(1); !stop.Load(); a++ {
				store(tornPayload{a, a + 1000, 2*a + 1000})
				spinWork(500)
			}
		})
	}
	var bad atomic.Int64
	runShared(b, readers, "Mreads/s", func(_, n int) {
		torn := 0
		for range n {
			if !locktest.TornPayload(load()).Consistent() {
				torn++
			}
		}
		bad.Add(int64(torn))
	})
	stop.Store(true)
	wwg.Wait()
	if bad.Load() != 0 {
		b.Fatalf("%s: %d torn reads", k.name, bad.Load())
	}
}

func BenchmarkSnapshot(b *testing.B) {
	for _, writer := range []bool{false, true} {
		for _, readers := range []int{1, 4} {
			for _, k := range snapshotKinds {
				w := map[bool]string{false: "none", true: "busy"}[writer]
				b.Run(fmt.Sprintf("kind=%s/writer=%s/readers=%d", k.name, w, readers), func(b *testing.B) {
					benchmarkSnapshot(b, k, readers, writer)
				})
			}
		}
	}
}

// BenchmarkSeqLockUncontended is the cost of one Load and one Store of a
// three-word value with nobody else around.
func BenchmarkSeqLockUncontended(b *testing.B) {
	s := newTornSeqLock(b)
	b.Run("op=load", func(b *testing.B) {
		for b.Loop() {
			s.Load()
		}
	})
	b.Run("op=store", func(b *testing.B) {
		p := tornPayload{1, 1001, 1002}
		for b.Loop() {
			s.Store(p)
		}
	})
}
