package lockword

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/wait"
)

// atRest checks the words of an idle RWMutex: no reader, no writer,
// nobody parked, nothing departing, the writers' word free.
func (rw *RWMutex) atRest() error {
	if s := rw.state.Load() &^ (rwPhase | rwStats); s != 0 {
		return fmt.Errorf("RWMutex at rest: state %#x (readers %d, writer %t, parked %t)", s, s>>rwCountOf, s&rwWriter != 0, s&rwParked != 0)
	}
	if d := rw.departing.Load(); d != 0 {
		return fmt.Errorf("RWMutex at rest: departing %#x", d)
	}
	if n := wait.Parked(&rw.state) + wait.Parked(&rw.departing) + wait.Parked(&rw.writers); n != 0 {
		return fmt.Errorf("RWMutex at rest: %d goroutines parked", n)
	}
	if w := rw.writers.Load(); w != 0 {
		return fmt.Errorf("RWMutex at rest: writers' word %#x", w)
	}
	return nil
}

// rwLocker is a reader-writer lock: RWMutex, sync.RWMutex, and the broken
// ones below.
type rwLocker interface {
	sync.Locker
	RLock()
	RUnlock()
}

// rwData is what a reader-writer lock protects in the hammer. activity is
// +1 per reader inside and +10000 per writer inside, checked inside every
// critical section (Concurrency Kit's and Go's reader-writer invariant);
// x and y are plain, written only by writers, with y == 2x, so that a
// reader that overlaps a writer can see them torn, and the race detector
// sees every access.
type rwData struct {
	activity atomic.Int32
	g        guarded // writers' counter and owner slot
	x, y     int
}

const rwWriterActivity = 10000

func (d *rwData) read(rnd uint32) (violations int) {
	if n := d.activity.Add(1); n < 1 || n >= rwWriterActivity {
		violations++ // a writer is inside
	}
	x := d.x
	if rnd%8 == 0 {
		spinWork(int(rnd>>8) % 64)
	}
	if d.y != 2*x {
		violations++ // torn: a writer changed them under us
	}
	if n := d.activity.Load(); n < 1 || n >= rwWriterActivity {
		violations++
	}
	d.activity.Add(-1)
	return violations
}

func (d *rwData) write(id int, rnd uint32) (violations int) {
	if n := d.activity.Add(rwWriterActivity); n != rwWriterActivity {
		violations++ // someone else is inside
	}
	violations += d.g.critical(id, rnd)
	d.x++
	d.y = 2 * d.x
	if n := d.activity.Load(); n != rwWriterActivity {
		violations++
	}
	d.activity.Add(-rwWriterActivity)
	return violations
}

// readUnchecked and writeUnchecked are read and write for broken locks,
// hidden from the race detector so that our own checks report.
//
//go:norace
func (d *rwData) readUnchecked(rnd uint32) (violations int) {
	if n := d.activity.Add(1); n < 1 || n >= rwWriterActivity {
		violations++
	}
	x := d.x
	if rnd%8 == 0 {
		spinWork(int(rnd>>8) % 64)
	} else if rnd%64 == 1 {
		runtime.Gosched()
	}
	if d.y != 2*x {
		violations++
	}
	if n := d.activity.Load(); n < 1 || n >= rwWriterActivity {
		violations++
	}
	d.activity.Add(-1)
	return violations
}

//go:norace
func (d *rwData) writeUnchecked(id int, rnd uint32) (violations int) {
	if n := d.activity.Add(rwWriterActivity); n != rwWriterActivity {
		violations++
	}
	violations += d.g.criticalUnchecked(id, rnd)
	d.x++
	runtime.Gosched() // widen the window, as a preempted writer would
	d.y = 2 * d.x
	if n := d.activity.Load(); n != rwWriterActivity {
		violations++
	}
	d.activity.Add(-rwWriterActivity)
	return violations
}

type rwHammerResult struct {
	writes, wantWrites, reads, violations int
}

func (r rwHammerResult) String() string {
	return fmt.Sprintf("writes %d (want %d), reads %d, violations %d", r.writes, r.wantWrites, r.reads, r.violations)
}

func (r rwHammerResult) ok() bool { return r.writes == r.wantWrites && r.violations == 0 }

// hammerRW runs readers and writers goroutines of iters acquisitions each
// on rw. unchecked selects the race-detector-blind sections, for broken
// locks.
func hammerRW(rw rwLocker, readers, writers, iters int, unchecked bool) rwHammerResult {
	defer watchdog("reader-writer hammer", 2*time.Minute)()
	var d rwData
	var violations, reads atomic.Int64
	var wg sync.WaitGroup
	for w := 1; w <= readers+writers; w++ {
		wg.Go(func() {
			rnd := uint32(w) * 2654435761
			bad := 0
			for range iters {
				rnd ^= rnd << 13
				rnd ^= rnd >> 17
				rnd ^= rnd << 5
				if w <= readers {
					rw.RLock()
					if unchecked {
						bad += d.readUnchecked(rnd)
					} else {
						bad += d.read(rnd)
					}
					rw.RUnlock()
				} else {
					rw.Lock()
					if unchecked {
						bad += d.writeUnchecked(w, rnd)
					} else {
						bad += d.write(w, rnd)
					}
					rw.Unlock()
				}
			}
			if w <= readers {
				reads.Add(int64(iters))
			}
			violations.Add(int64(bad))
		})
	}
	wg.Wait()
	return rwHammerResult{
		writes:     readCounter(&d.g, unchecked),
		wantWrites: writers * iters,
		reads:      int(reads.Load()),
		violations: int(violations.Load()),
	}
}

func TestRWMutexHammer(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, c := range []struct{ readers, writers int }{{4, 1}, {3, 3}, {16, 4}, {64, 8}} {
			t.Run(fmt.Sprintf("procs=%d/readers=%d/writers=%d", procs, c.readers, c.writers), func(t *testing.T) {
				withGOMAXPROCS(t, procs)
				rw := new(RWMutex)
				iters := scaled(400_000) / (c.readers + c.writers)
				if r := hammerRW(rw, c.readers, c.writers, iters, false); !r.ok() {
					t.Fatal(r)
				}
				if err := rw.atRest(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// readersIgnoreWriters is a reader-writer lock whose readers take nothing:
// writers exclude each other, readers exclude nobody.
type readersIgnoreWriters struct{ sync.Mutex }

func (*readersIgnoreWriters) RLock()   {}
func (*readersIgnoreWriters) RUnlock() {}

// noRW excludes nobody at all.
type noRW struct{ brokenLock }

func (noRW) RLock()   {}
func (noRW) RUnlock() {}

// TestRWHammerCatchesBrokenLocks shows that the activity word and the torn
// pair catch readers overlapping writers, and the counter and owner slot
// catch writers overlapping writers.
func TestRWHammerCatchesBrokenLocks(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			if r := hammerRW(new(readersIgnoreWriters), 4, 2, 5000, true); r.violations == 0 {
				t.Errorf("readers that ignore writers: %v: the activity check cannot fail", r)
			}
			if r := hammerRW(noRW{}, 2, 4, 5000, true); r.ok() {
				t.Errorf("no lock at all: %v: the writer checks cannot fail", r)
			}
		})
	}
}

// readerPreferring admits readers whenever no writer holds the lock, so a
// stream of overlapping readers starves writers: the broken lock for the
// writer-starvation check.
type readerPreferring struct {
	mu      sync.Mutex
	c       sync.Cond
	readers int
	writer  bool
}

func newReaderPreferring() *readerPreferring {
	l := new(readerPreferring)
	l.c.L = &l.mu
	return l
}

func (l *readerPreferring) RLock() {
	l.mu.Lock()
	for l.writer {
		l.c.Wait()
	}
	l.readers++
	l.mu.Unlock()
}

func (l *readerPreferring) RUnlock() {
	l.mu.Lock()
	l.readers--
	l.c.Broadcast()
	l.mu.Unlock()
}

func (l *readerPreferring) Lock() {
	l.mu.Lock()
	for l.writer || l.readers > 0 {
		l.c.Wait()
	}
	l.writer = true
	l.mu.Unlock()
}

func (l *readerPreferring) Unlock() {
	l.mu.Lock()
	l.writer = false
	l.c.Broadcast()
	l.mu.Unlock()
}

// writerPreferring keeps readers out while any writer waits, so a stream
// of writers starves readers: the broken lock for the reader-starvation
// check.
type writerPreferring struct {
	readerPreferring
	waitingWriters int
}

func newWriterPreferring() *writerPreferring {
	l := new(writerPreferring)
	l.c.L = &l.mu
	return l
}

func (l *writerPreferring) RLock() {
	l.mu.Lock()
	for l.writer || l.waitingWriters > 0 {
		l.c.Wait()
	}
	l.readers++
	l.mu.Unlock()
}

func (l *writerPreferring) Lock() {
	l.mu.Lock()
	l.waitingWriters++
	for l.writer || l.readers > 0 {
		l.c.Wait()
	}
	l.waitingWriters--
	l.writer = true
	l.mu.Unlock()
}

// starvedWait measures how long one victim acquisition waits while a
// stream of others keeps rw busy: streamers goroutines that each hold the
// lock (reading if readStream, else writing) for about hold, let go and
// take it again at once, staggered so that the stream never pauses. It
// gives up after patience and reports ok = false: starved.
func starvedWait(rw rwLocker, readStream bool, streamers int, hold time.Duration, victim func(), patience time.Duration) (waited time.Duration, ok bool) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range streamers {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * hold / time.Duration(streamers)) // stagger
			for !stop.Load() {
				if readStream {
					rw.RLock()
					time.Sleep(hold)
					rw.RUnlock()
				} else {
					rw.Lock()
					time.Sleep(hold)
					rw.Unlock()
				}
			}
		})
	}
	time.Sleep(5 * hold) // the stream is flowing
	got := make(chan struct{})
	start := time.Now()
	go func() { victim(); close(got) }()
	select {
	case <-got:
		waited, ok = time.Since(start), true
	case <-time.After(patience):
		waited = time.Since(start)
	}
	stop.Store(true)
	<-got // with the stream stopped, the victim gets in
	wg.Wait()
	return waited, ok
}

// TestRWMutexWriterNotStarved: overlapping readers never leave the lock
// free, yet a writer gets in once the readers inside when it arrived have
// left. The same check starves a writer of a reader-preferring lock.
func TestRWMutexWriterNotStarved(t *testing.T) {
	const hold = time.Millisecond
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			rw := new(RWMutex)
			waited, ok := starvedWait(rw, true, 4, hold, func() { rw.Lock(); rw.Unlock() }, 5*time.Second)
			if !ok {
				t.Fatalf("writer starved by readers for %v", waited)
			}
			t.Logf("writer waited %v behind a stream of readers holding ~%v", waited, hold)
			if err := rw.atRest(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("checker-catches-reader-preferring", func(t *testing.T) {
		l := newReaderPreferring()
		if waited, ok := starvedWait(l, true, 4, hold, func() { l.Lock(); l.Unlock() }, 300*time.Millisecond); ok {
			t.Fatalf("a reader-preferring lock let the writer in after %v: the check cannot fail", waited)
		}
	})
}

// TestRWMutexReaderNotStarved: a continuous stream of writers keeps the
// lock busy, yet a reader gets in after at most the writer that holds it
// when the reader arrives. The same check starves a reader of a
// writer-preferring lock.
func TestRWMutexReaderNotStarved(t *testing.T) {
	const hold = time.Millisecond
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			rw := new(RWMutex)
			waited, ok := starvedWait(rw, false, 4, hold, func() { rw.RLock(); rw.RUnlock() }, 5*time.Second)
			if !ok {
				t.Fatalf("reader starved by writers for %v", waited)
			}
			t.Logf("reader waited %v behind a stream of writers holding ~%v", waited, hold)
			if err := rw.atRest(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("checker-catches-writer-preferring", func(t *testing.T) {
		l := newWriterPreferring()
		if waited, ok := starvedWait(l, false, 4, hold, func() { l.RLock(); l.RUnlock() }, 300*time.Millisecond); ok {
			t.Fatalf("a writer-preferring lock let the reader in after %v: the check cannot fail", waited)
		}
	})
}

// TestRWMutexPhases: readers that queue behind a waiting writer are
// admitted when it finishes, before the writer after it: the order is
// writer 1, the queued readers, writer 2.
func TestRWMutexPhases(t *testing.T) {
	defer watchdog("phases", time.Minute)()
	rw := new(RWMutex)
	var mu sync.Mutex
	var events []string
	note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	until := func(cond func() bool) {
		for !cond() {
			runtime.Gosched()
		}
	}

	rw.RLock() // reader 0 inside
	var wg sync.WaitGroup
	wg.Go(func() { rw.Lock(); note("W1"); time.Sleep(5 * time.Millisecond); rw.Unlock() })
	until(func() bool { return rw.state.Load()&rwWriter != 0 }) // W1 waits for reader 0
	for _, r := range []string{"R1", "R2"} {
		wg.Go(func() { rw.RLock(); note(r); time.Sleep(5 * time.Millisecond); rw.RUnlock() })
	}
	until(func() bool { return rw.state.Load()>>rwCountOf == 3 }) // R1, R2 queued behind W1
	wg.Go(func() { rw.Lock(); note("W2"); rw.Unlock() })
	until(func() bool { return wait.Parked(&rw.writers) == 1 }) // W2 parked behind W1
	rw.RUnlock()
	wg.Wait()
	if len(events) != 4 || events[0] != "W1" || events[3] != "W2" {
		t.Fatalf("order %v, want W1, then R1 and R2, then W2", events)
	}
	if err := rw.atRest(); err != nil {
		t.Fatal(err)
	}
}

func TestRWMutexReaderOverflow(t *testing.T) {
	const msg = "lockword: RWMutex reader count overflow: more than 134217727 readers at once (RLock without RUnlock?)"
	expectPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != msg {
				t.Fatalf("%s: recovered %v, want %q", what, r, msg)
			}
		}()
		f()
	}
	rw := new(RWMutex)
	rw.state.Store((rwMaxReaders - 1) << rwCountOf)
	rw.RLock() // the last reader that fits
	if n := rw.state.Load() >> rwCountOf; n != rwMaxReaders {
		t.Fatalf("readers %d, want %d", n, rwMaxReaders)
	}
	before := rw.state.Load()
	expectPanic("RLock", rw.RLock)
	expectPanic("TryRLock", func() { rw.TryRLock() })
	expectPanic("RLockContext", func() { rw.RLockContext(context.Background()) })
	if s := rw.state.Load(); s != before {
		t.Fatalf("state %#x after refused RLocks, want %#x unchanged", s, before)
	}
	// The readers still leave cleanly, and a writer gets in after them.
	rw.state.Store(1 << rwCountOf)
	rw.RUnlock()
	rw.Lock()
	rw.Unlock()
	if err := rw.atRest(); err != nil {
		t.Fatal(err)
	}
}

func TestRWMutexTry(t *testing.T) {
	for _, stats := range []bool{false, true} {
		rw := new(RWMutex)
		if stats {
			rw.EnableStats()
		}
		if !rw.TryRLock() || !rw.TryRLock() {
			t.Fatal("TryRLock on a free lock failed")
		}
		if rw.TryLock() {
			t.Fatal("TryLock succeeded with readers inside")
		}
		rw.RUnlock()
		rw.RUnlock()
		if !rw.TryLock() {
			t.Fatal("TryLock on a free lock failed")
		}
		if rw.TryLock() || rw.TryRLock() {
			t.Fatal("Try succeeded on a write-locked lock")
		}
		rw.Unlock()
		if err := rw.atRest(); err != nil {
			t.Fatal(err)
		}
		if stats {
			if n := rw.Stats().Acquisitions; n != 3 {
				t.Fatalf("Acquisitions = %d, want 3", n)
			}
		}
	}
}

func TestRWMutexRLocker(t *testing.T) {
	rw := new(RWMutex)
	rl := rw.RLocker()
	rl.Lock()
	rl.Lock()
	if rw.TryLock() {
		t.Fatal("TryLock succeeded while RLocker holds read locks")
	}
	rl.Unlock()
	rl.Unlock()
	if !rw.TryLock() {
		t.Fatal("TryLock failed after RLocker released")
	}
	rw.Unlock()
}

// TestRWMutexRLockContext: a reader behind a writer gives up; the lock is
// unchanged by it.
func TestRWMutexRLockContext(t *testing.T) {
	rw := new(RWMutex)
	if err := rw.RLockContext(nil); err == nil {
		t.Fatal("RLockContext(nil) = nil")
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rw.RLockContext(done); err != nil {
		t.Fatalf("RLockContext(done) on a free lock = %v, want nil", err)
	}
	rw.RUnlock()
	rw.Lock()
	ctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if err := rw.RLockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RLockContext behind a writer = %v, want DeadlineExceeded", err)
	}
	if n := rw.state.Load() >> rwCountOf; n != 0 {
		t.Fatalf("%d readers counted after the reader gave up", n)
	}
	rw.Unlock()
	if err := rw.atRest(); err != nil {
		t.Fatal(err)
	}
}

// TestRWMutexWriterGivesUpWhileReadersLeave: a writer whose context ends
// while readers are inside returns the error at once; readers that queued
// behind it wait only until the readers inside leave, and the last of
// those releases on the writer's behalf.
func TestRWMutexWriterGivesUpWhileReadersLeave(t *testing.T) {
	defer watchdog("writer gives up", time.Minute)()
	rw := new(RWMutex)
	rw.RLock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := rw.LockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("gave up after %v", d)
	}
	late := make(chan struct{})
	go func() { rw.RLock(); rw.RUnlock(); close(late) }()
	select {
	case <-late:
		t.Fatal("a reader got in while the reader inside still held the lock the writer was draining")
	case <-time.After(5 * time.Millisecond):
	}
	rw.RUnlock() // the last reader out releases for the writer
	<-late
	if err := rw.atRest(); err != nil {
		t.Fatal(err)
	}
}

// TestRWMutexCancelStress mixes readers and writers that give up at random
// moments with ones that do not, checking the activity word throughout and
// that the lock ends at rest.
func TestRWMutexCancelStress(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			withGOMAXPROCS(t, procs)
			defer watchdog("reader-writer cancellation stress", 2*time.Minute)()
			rw := new(RWMutex)
			var d rwData
			var violations, writes, cancelled atomic.Int64
			rounds := scaled(100_000) / 12
			var wg sync.WaitGroup
			for w := 1; w <= 12; w++ {
				wg.Go(func() {
					for range rounds {
						rnd := rand.Uint32()
						var ctx context.Context = context.Background()
						cancel := func() {}
						if rnd%2 == 0 {
							ctx, cancel = context.WithTimeout(ctx, time.Duration(rnd%200)*time.Microsecond)
						}
						if w%3 == 0 {
							if err := rw.LockContext(ctx); err != nil {
								cancelled.Add(1)
								cancel()
								continue
							}
							violations.Add(int64(d.write(w, rnd)))
							if rnd%97 == 0 {
								time.Sleep(20 * time.Microsecond)
							}
							writes.Add(1)
							rw.Unlock()
						} else {
							if err := rw.RLockContext(ctx); err != nil {
								cancelled.Add(1)
								cancel()
								continue
							}
							violations.Add(int64(d.read(rnd)))
							if rnd%97 == 0 {
								time.Sleep(20 * time.Microsecond)
							}
							rw.RUnlock()
						}
						cancel()
					}
				})
			}
			wg.Wait()
			if v, got, want := violations.Load(), d.g.counter, writes.Load(); v != 0 || int64(got) != want {
				t.Fatalf("violations %d, writes counted %d, made %d", v, got, want)
			}
			if cancelled.Load() == 0 {
				t.Error("nobody gave up: the test did not exercise cancellation")
			}
			t.Logf("%d writes, %d gave up", writes.Load(), cancelled.Load())
			if err := rw.atRest(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// handoffServed: a writer parked for longer than rwStarveNs is handed the
// writers' word: once it has asked (the hand-off bit is set), the holder's
// Unlock leaves the word reserved for it, and a writer arriving right
// after, which would otherwise take the free word, cannot (TryLock fails).
// It reports an error if the barging writer got in. Getting the victim to
// ask needs the barging writer to win one race against the woken victim
// (likely: the victim is woken, not yet running); a try in which the
// victim wins is retried. With the hand-off, a barge never succeeds (the
// word is reserved before the victim is woken); without it, the barging
// TryLock races the woken victim and wins only some of the time (about a
// fifth of tries under -race on 2 cores): so the check asks for
// handoffTries tries that reached the hand-off, and any barge fails it.
func handoffServed(t *testing.T) error {
	defer watchdog("writer hand-off", 2*time.Minute)()
	const handoffTries = 40
	asked := 0
	for range 20 * handoffTries {
		barged, ok := handoffTry(t)
		if !ok {
			continue
		}
		if barged {
			return fmt.Errorf("a barging writer took the writers' word reserved for a starving one")
		}
		if asked++; asked == handoffTries {
			return nil
		}
	}
	t.Fatalf("in %d tries the victim lost a race to a barging writer only %d times: cannot check the hand-off", 20*handoffTries, asked)
	return nil
}

// handoffTry is one try of handoffServed: asked reports whether the victim
// asked for the hand-off, barged whether a writer then got in before it.
func handoffTry(t *testing.T) (barged, asked bool) {
	rw := new(RWMutex)
	rw.Lock()
	got, leave := make(chan struct{}), make(chan struct{})
	go func() { rw.Lock(); close(got); <-leave; rw.Unlock() }()
	defer func() {
		<-got
		close(leave)
		for rw.atRest() != nil {
			time.Sleep(100 * time.Microsecond)
		}
	}()
	parked := func() bool {
		for deadline := time.Now().Add(20 * time.Second); wait.Parked(&rw.writers) != 1; time.Sleep(100 * time.Microsecond) {
			select {
			case <-got:
				return false
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the victim never parked (writers' word %#x)", rw.writers.Load())
			}
		}
		return true
	}
	for rw.writers.Load()&rwwHandoff == 0 {
		if !parked() {
			return false, false
		}
		time.Sleep(2 * time.Duration(rwStarveNs))
		rw.Unlock()
		// Barge: take the word before the woken victim runs.
		for !rw.TryLock() {
			select {
			case <-got:
				return false, false // the victim won
			default:
			}
		}
		if !parked() {
			rw.Unlock()
			return false, false
		}
	}
	rw.Unlock()
	if barged = rw.TryLock(); barged {
		rw.Unlock()
	}
	return barged, true
}

func TestRWMutexWriterHandoff(t *testing.T) {
	if err := handoffServed(t); err != nil {
		t.Fatal(err)
	}
}

// TestRWMutexHandoffCheckerCatchesBarging: with the hand-off disabled the
// check above fails.
func TestRWMutexHandoffCheckerCatchesBarging(t *testing.T) {
	rwTestNoHandoff = true
	defer func() { rwTestNoHandoff = false }()
	if err := handoffServed(t); err == nil {
		t.Fatal("a writers' word without hand-off passed the hand-off check")
	}
}

// TestRWMutexReadersParkGoroutinesNotThreads: 10,000 readers blocked
// behind a writer hold no OS thread each, and all get in after it.
func TestRWMutexReadersParkGoroutinesNotThreads(t *testing.T) {
	n := 10_000
	if raceEnabled {
		n = 7_000 // the race detector allows 8128 live goroutines
	}
	defer watchdog("10,000 readers", 2*time.Minute)()
	rw := new(RWMutex)
	rw.Lock()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { rw.RLock(); rw.RUnlock() })
	}
	wantParkedNotThreads(t, &rw.state, n, "readers")
	rw.Unlock()
	wg.Wait()
	if err := rw.atRest(); err != nil {
		t.Fatal(err)
	}
}

// TestRWMutexStatsCountReadsAndWrites: with statistics on, every read and
// write acquisition is counted, however contended.
func TestRWMutexStatsCountReadsAndWrites(t *testing.T) {
	rw := new(RWMutex)
	rw.EnableStats()
	r := hammerRW(rw, 6, 2, scaled(100_000), false)
	if !r.ok() {
		t.Fatal(r)
	}
	s := rw.Stats()
	if want := uint64(r.reads + r.wantWrites); s.Acquisitions != want {
		t.Fatalf("Acquisitions = %d, want %d reads + writes", s.Acquisitions, want)
	}
	if s.SlowPath == 0 || s.SlowPath > s.Acquisitions {
		t.Fatalf("SlowPath = %d of %d", s.SlowPath, s.Acquisitions)
	}
	t.Logf("%+v, slow path %.1f%%", s, 100*s.SlowPathFraction())
}
