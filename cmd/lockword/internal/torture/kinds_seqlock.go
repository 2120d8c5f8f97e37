package torture

// The seqlock kinds (registered in kinds_lockfree.go): one writer stores
// payloads whose fields agree (b == a+1000, c == a+b, Concurrency Kit's
// check), -workers readers check every snapshot they load.

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// payload is the seqlock's value. Every consistent snapshot has
// b == a+1000 and c == a+b (Concurrency Kit's seqlock regression).
type payload struct{ A, B, C uint64 }

func consistentPayload(a uint64) payload { return payload{a, a + 1000, 2*a + 1000} }

func (p payload) consistent() bool { return p.B == p.A+1000 && p.C == p.A+p.B }

// snapshotter is what the seqlock experiment drives: *lockword.SeqLock,
// or brokenSeqLock.
type snapshotter interface {
	Load() payload
	Store(payload)
}

// brokenSeqLock is the seqlock kinds' "none": the payload's words with no
// sequence at all, so a reader can copy them halfway through a Store. Its
// words are atomic (the race detector stays quiet); the writer yields
// between two words now and then, so that readers catch it even on one core.
type brokenSeqLock struct {
	a, b, c atomic.Uint64
	stores  int // the writer's own count
}

func (s *brokenSeqLock) Load() payload { return payload{s.a.Load(), s.b.Load(), s.c.Load()} }

func (s *brokenSeqLock) Store(p payload) {
	s.a.Store(p.A)
	if s.stores++; s.stores%64 == 0 {
		runtime.Gosched()
	}
	s.b.Store(p.B)
	s.c.Store(p.C)
}

// seqLockReport is the outcome of one seqlock run.
type seqLockReport struct {
	lock      string
	readers   int
	reads     int64 // snapshots checked
	stores    int64
	torn      int64 // inconsistent snapshots
	backwards int64 // a reader saw a smaller a than before
	elapsed   time.Duration
	duration  time.Duration // requested; 0 in a counted run
}

// tortureSeqLock runs one writer against cfg.workers readers.
func tortureSeqLock(cfg *config, name string, s snapshotter) *seqLockReport {
	reads := cfg.items
	if reads == 0 && !cfg.timed() {
		reads = defaultSeqLockReads
	}
	r := &seqLockReport{lock: name, readers: cfg.workers, duration: cfg.duration}
	var stopReaders, stopWriter atomic.Bool
	var done atomic.Int64 // reads so far, published every publishEvery
	var torn, backwards atomic.Int64
	var writer sync.WaitGroup
	writing := make(chan struct{}) // closed after the first Store
	writer.Go(func() {
		a := uint64(0)
		for !stopWriter.Load() {
			a++
			s.Store(consistentPayload(a))
			if a == 1 {
				close(writing)
			}
		}
		r.stores = int64(a)
	})
	// Readers start once the writer is running, so that they overlap it:
	// readers that finish before the first Store would prove nothing.
	<-writing

	start := time.Now()
	var wg sync.WaitGroup
	for i := range cfg.workers {
		n := reads / int64(cfg.workers)
		if int64(i) < reads%int64(cfg.workers) {
			n++
		}
		wg.Go(func() {
			last, bad, back := uint64(0), int64(0), int64(0)
			var k, published int64
			for ; reads == 0 || k < n; k++ {
				if k%publishEvery == 0 {
					done.Add(k - published)
					published = k
					if reads == 0 && stopReaders.Load() {
						break
					}
				}
				p := s.Load()
				if !p.consistent() {
					bad++
				}
				if p.A < last {
					back++
				}
				last = p.A
			}
			done.Add(k - published)
			torn.Add(bad)
			backwards.Add(back)
		})
	}
	spec := runProgress(cfg, name, start, reads, done.Load, "reads")
	defer stopAfterDuration(cfg, &stopReaders)()
	prog := startProgress(cfg.progress, spec)
	wg.Wait()
	r.elapsed = time.Since(start)
	stopWriter.Store(true)
	writer.Wait()
	prog.stop()
	r.reads = done.Load()
	r.torn = torn.Load()
	r.backwards = backwards.Load()
	return r
}

func (r *seqLockReport) failures() []string {
	var why []string
	if r.torn > 0 {
		why = append(why, fmt.Sprintf("%d torn reads (b != a+1000 or c != a+b)", r.torn))
	}
	if r.backwards > 0 {
		why = append(why, fmt.Sprintf("%d reads went backwards (a smaller than the reader saw before)", r.backwards))
	}
	return why
}

func (r *seqLockReport) passed() bool { return len(r.failures()) == 0 }

func (r *seqLockReport) rates() (reads, stores float64) {
	if r.elapsed <= 0 {
		return 0, 0
	}
	s := r.elapsed.Seconds()
	return float64(r.reads) / s / 1e6, float64(r.stores) / s / 1e6
}

func (r *seqLockReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: %s\n", r.lock)
	fmt.Fprintf(w, "Writers: 1\n")
	fmt.Fprintf(w, "Readers: %d\n", r.readers)
	if r.duration > 0 {
		fmt.Fprintf(w, "Duration: %v\n", r.duration)
	}
	fmt.Fprintf(w, "Reads: %d\n", r.reads)
	fmt.Fprintf(w, "Stores: %d\n", r.stores)
	fmt.Fprintf(w, "Torn reads: %d\n", r.torn)
	fmt.Fprintf(w, "Backwards: %d\n", r.backwards)
	reads, stores := r.rates()
	fmt.Fprintf(w, "Throughput: %.1f M reads/s, %.1f M stores/s\n", reads, stores)
	writeResult(w, r.failures())
}

func (r *seqLockReport) writeJSON(w io.Writer) error {
	reads, stores := r.rates()
	return writeJSONLine(w, struct {
		Lock        string   `json:"lock"`
		Readers     int      `json:"readers"`
		Reads       int64    `json:"reads"`
		Stores      int64    `json:"stores"`
		TornReads   int64    `json:"torn_reads"`
		Backwards   int64    `json:"backwards"`
		ReadsMPerS  float64  `json:"throughput_mreads_s"`
		StoresMPerS float64  `json:"throughput_mstores_s"`
		DurationS   float64  `json:"duration_s"`
		Result      string   `json:"result"`
		Failures    []string `json:"failures,omitempty"`
	}{r.lock, r.readers, r.reads, r.stores, r.torn, r.backwards, reads, stores,
		r.elapsed.Seconds(), verdict(r.failures()), r.failures()})
}

// ---- shared by the ring and seqlock reports ----

func verdict(failures []string) string {
	if len(failures) > 0 {
		return "FAIL"
	}
	return "PASS"
}

func writeResult(w io.Writer, failures []string) {
	if len(failures) > 0 {
		fmt.Fprintf(w, "Result: FAIL (%s)\n", strings.Join(failures, "; "))
	} else {
		fmt.Fprintln(w, "Result: PASS")
	}
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
