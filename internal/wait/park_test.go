package wait

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitValueMismatchReturnsAtOnce(t *testing.T) {
	var w atomic.Uint32
	w.Store(1)
	if err := Wait(context.Background(), &w, 0); err != nil {
		t.Fatalf("Wait on a word that does not hold val: %v", err)
	}
	if n := Parked(&w); n != 0 {
		t.Fatalf("Parked = %d after a mismatched Wait, want 0", n)
	}
}

func TestWakeWithoutWaiters(t *testing.T) {
	var w atomic.Uint32
	if n := Wake(&w, 1); n != 0 {
		t.Fatalf("Wake with no waiters = %d", n)
	}
	if n := Wake(&w, 0); n != 0 {
		t.Fatalf("Wake(0) = %d", n)
	}
}

// waitParked polls until n goroutines are parked on w.
func waitParked(t *testing.T, w *atomic.Uint32, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for try := 0; Parked(w) != n; try++ {
		if time.Now().After(deadline) {
			t.Fatalf("parked = %d, want %d", Parked(w), n)
		}
		pollPause(try)
	}
}

// pollPause is a poll loop's pause before its next look: a yield for the
// first tries (the goroutines awaited are runnable and park within a few
// of them), then 1 ms sleeps. The race tests poll thousands of times; a
// sleep every time made them wait on the timer (1 ms at best, often far
// more on a loaded host), not on the waiters.
func pollPause(try int) {
	if try < 100 {
		runtime.Gosched()
		return
	}
	time.Sleep(time.Millisecond)
}

func TestWakeOneAtATimeInFIFOOrder(t *testing.T) {
	var w atomic.Uint32
	const n = 5
	order := make(chan int, n)
	for i := range n {
		go func() {
			if err := Wait(nil, &w, 0); err != nil {
				t.Error(err)
			}
			order <- i
		}()
		waitParked(t, &w, i+1) // enqueue in a known order
	}
	for i := range n {
		if got := Wake(&w, 1); got != 1 {
			t.Fatalf("Wake = %d, want 1", got)
		}
		if got := <-order; got != i {
			t.Fatalf("woke waiter %d, want %d (FIFO)", got, i)
		}
	}
}

func TestWakeAllAndOnlyThisWord(t *testing.T) {
	// Many words share buckets (there are 256): Wake must leave waiters
	// of other words in place.
	words := make([]atomic.Uint32, 600)
	var wg sync.WaitGroup
	for i := range words {
		wg.Go(func() { Wait(nil, &words[i], 0) })
	}
	for i := range words {
		waitParked(t, &words[i], 1)
	}
	for i := range words {
		if n := Wake(&words[i], 1<<30); n != 1 {
			t.Fatalf("Wake(word %d) = %d, want 1", i, n)
		}
		if i+1 < len(words) && Parked(&words[i+1]) != 1 {
			t.Fatalf("waking word %d disturbed word %d", i, i+1)
		}
	}
	wg.Wait()
}

func TestWaitContextCancel(t *testing.T) {
	var w atomic.Uint32
	checkDeadlineLeavesNoWaiter(t, "Wait",
		func(ctx context.Context) error { return Wait(ctx, &w, 0) },
		func() int { return Parked(&w) },
		func() int { return Wake(&w, 1) })
}

// checkDeadlineLeavesNoWaiter runs wait under a 20 ms deadline: it must
// return DeadlineExceeded, not before the deadline, and leave nothing
// queued: parked reports 0 and wake finds nobody.
func checkDeadlineLeavesNoWaiter(t *testing.T, name string, wait func(ctx context.Context) error, parked, wake func() int) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("%s = %v, want DeadlineExceeded", name, err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("%s returned after %v, before the deadline", name, d)
	}
	if n := parked(); n != 0 {
		t.Fatalf("cancelled %s waiter still queued: %d", name, n)
	}
	if n := wake(); n != 0 {
		t.Fatalf("waking found %d %s waiters after cancellation", n, name)
	}
}

// TestCancelNeverSwallowsWake races cancellations against wake-ups. Every
// wake-up that Wake reports must reach a waiter that returns nil: a waiter
// that returns ctx.Err() must not have been counted by Wake.
func TestCancelNeverSwallowsWake(t *testing.T) {
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	var w atomic.Uint32
	for range rounds {
		cancelWakeRound(t, "Wake",
			func(ctx context.Context, i int) error { return Wait(ctx, &w, 0) },
			func() { waitParked(t, &w, cancelWakeWaiters) },
			func(int) int { return Wake(&w, 1) })
	}
}

func BenchmarkWakeEmpty(b *testing.B) {
	var w atomic.Uint32
	for b.Loop() {
		Wake(&w, 1)
	}
}

func BenchmarkParkUnpark(b *testing.B) {
	// Ping-pong between two goroutines through two words: the cost of one
	// park plus one wake-up.
	var ping, pong atomic.Uint32
	done := make(chan struct{})
	go func() {
		for i := uint32(1); ; i++ {
			for ping.Load() < i {
				if Wait(nil, &ping, i-1) != nil {
					return
				}
			}
			select {
			case <-done:
				return
			default:
			}
			pong.Store(i)
			Wake(&pong, 1)
		}
	}()
	i := uint32(0)
	for b.Loop() {
		i++
		ping.Store(i)
		Wake(&ping, 1)
		for pong.Load() < i {
			Wait(nil, &pong, i-1)
		}
	}
	close(done)
	ping.Store(i + 1)
	Wake(&ping, 1)
}

// The keyed tests mirror the plain ones: a value mismatch returns at once,
// a wake-up reaches only its key (FIFO within a key), plain and keyed
// waiters of one word leave each other alone, and cancellation never
// swallows a keyed wake-up.

func TestWaitKeyValueMismatchReturnsAtOnce(t *testing.T) {
	var w atomic.Uint32
	w.Store(1)
	if err := WaitKey(context.Background(), &w, 0, 7); err != nil {
		t.Fatalf("WaitKey on a word that does not hold val: %v", err)
	}
	if n := Parked(&w); n != 0 {
		t.Fatalf("Parked = %d after a mismatched WaitKey, want 0", n)
	}
	if n := WakeKey(&w, 7, 1); n != 0 {
		t.Fatalf("WakeKey with no waiters = %d", n)
	}
}

// waitParkedKey polls until n goroutines are parked on (w, key).
func waitParkedKey(t *testing.T, w *atomic.Uint32, key uint32, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for try := 0; ParkedKey(w, key) != n; try++ {
		if time.Now().After(deadline) {
			t.Fatalf("parked on key %d = %d, want %d", key, ParkedKey(w, key), n)
		}
		pollPause(try)
	}
}

func TestWakeKeyWakesOnlyItsKey(t *testing.T) {
	var w atomic.Uint32
	const keys = 40 // more than fit one bucket's worth of luck
	woke := make(chan uint32, keys)
	for k := range uint32(keys) {
		go func() {
			if err := WaitKey(nil, &w, 0, k); err != nil {
				t.Error(err)
			}
			woke <- k
		}()
	}
	for k := range uint32(keys) {
		waitParkedKey(t, &w, k, 1)
	}
	if n := Parked(&w); n != keys {
		t.Fatalf("Parked = %d, want %d (Parked counts keyed waiters)", n, keys)
	}
	// Plain Wake passes keyed waiters by.
	if n := Wake(&w, keys); n != 0 {
		t.Fatalf("Wake woke %d keyed waiters", n)
	}
	// Wake in an order unrelated to parking order: each wake-up reaches
	// exactly its key.
	for i := range uint32(keys) {
		k := (i * 7) % keys
		if n := WakeKey(&w, k, 1); n != 1 {
			t.Fatalf("WakeKey(%d) = %d, want 1", k, n)
		}
		if got := <-woke; got != k {
			t.Fatalf("WakeKey(%d) woke key %d", k, got)
		}
	}
	if n := WakeKey(&w, 3, 1); n != 0 {
		t.Fatalf("second WakeKey(3) = %d, want 0", n)
	}
}

func TestWakeKeyFIFOWithinKeyAndLeavesPlainWaiters(t *testing.T) {
	var w atomic.Uint32
	const n = 4
	order := make(chan int, n)
	for i := range n {
		go func() {
			WaitKey(nil, &w, 0, 9)
			order <- i
		}()
		waitParkedKey(t, &w, 9, i+1)
	}
	plain := make(chan struct{})
	go func() { Wait(nil, &w, 0); close(plain) }()
	waitParked(t, &w, n+1)
	for i := range n {
		if got := WakeKey(&w, 9, 1); got != 1 {
			t.Fatalf("WakeKey = %d", got)
		}
		if got := <-order; got != i {
			t.Fatalf("woke waiter %d of key 9, want %d (FIFO)", got, i)
		}
	}
	select {
	case <-plain:
		t.Fatal("WakeKey woke a plain waiter")
	case <-time.After(5 * time.Millisecond):
	}
	if got := Wake(&w, 1); got != 1 {
		t.Fatalf("Wake = %d, want the plain waiter", got)
	}
	<-plain
}

func TestWaitKeyContextCancel(t *testing.T) {
	var w atomic.Uint32
	checkDeadlineLeavesNoWaiter(t, "WaitKey",
		func(ctx context.Context) error { return WaitKey(ctx, &w, 0, 5) },
		func() int { return ParkedKey(&w, 5) },
		func() int { return WakeKey(&w, 5, 1) })
}

// TestCancelNeverSwallowsWakeKey: as TestCancelNeverSwallowsWake, for
// keyed waiters, each with its own key, woken by key.
func TestCancelNeverSwallowsWakeKey(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 200
	}
	var w atomic.Uint32
	for range rounds {
		cancelWakeRound(t, "WakeKey",
			func(ctx context.Context, i int) error { return WaitKey(ctx, &w, 0, uint32(i)) },
			func() { waitParkedKeys(t, &w) },
			func(i int) int { return WakeKey(&w, uint32(i), 1) },
			cancelToo)
	}
}

// TestWakeKeyNotLostAcrossValueChange: the futex guarantee for keyed
// waiters. A waker that changes the word and then wakes the key never
// misses a waiter that read the old value: many rounds of a handoff
// between two goroutines through one word, each keyed by the value it
// waits for.
func TestWakeKeyNotLostAcrossValueChange(t *testing.T) {
	rounds := uint32(1_000_000)
	if testing.Short() {
		rounds = 50_000
	}
	var w atomic.Uint32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := uint32(1); v < rounds; v += 2 {
			for w.Load() != v {
				WaitKey(nil, &w, v-1, v)
			}
			w.Store(v + 1)
			WakeKey(&w, v+1, 1)
		}
	}()
	for v := uint32(0); v+1 < rounds; v += 2 {
		for w.Load() != v {
			WaitKey(nil, &w, v-1, v)
		}
		w.Store(v + 1)
		WakeKey(&w, v+1, 1)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a keyed wake-up was lost: the handoff stalled")
	}
}

func BenchmarkParkUnparkKey(b *testing.B) {
	// BenchmarkParkUnpark with keyed waiting: the cost of the addition.
	var ping, pong atomic.Uint32
	done := make(chan struct{})
	go func() {
		for i := uint32(1); ; i++ {
			for ping.Load() < i {
				WaitKey(nil, &ping, i-1, i)
			}
			select {
			case <-done:
				return
			default:
			}
			pong.Store(i)
			WakeKey(&pong, i, 1)
		}
	}()
	i := uint32(0)
	for b.Loop() {
		i++
		ping.Store(i)
		WakeKey(&ping, i, 1)
		for pong.Load() < i {
			WaitKey(nil, &pong, i-1, i)
		}
	}
	close(done)
	ping.Store(i + 1)
	WakeKey(&ping, i+1, 1)
}

// TestWaitNoted: a noted waiter is seen by Noted with its note and since,
// keeps the mark Noted's callback gave it, runs OnNotedPark once queued,
// and is gone from Noted once woken; a plain waiter is never seen.
func TestWaitNoted(t *testing.T) {
	var word atomic.Uint32
	var hooked atomic.Int32
	OnNotedPark = func() { hooked.Add(1) }
	defer func() { OnNotedPark = nil }()
	type noteT struct{ name string }
	note := &noteT{"n"}
	done := make(chan struct{})
	go func() { WaitKeyNoted(nil, &word, 0, 7, note, 42); close(done) }()
	plain := make(chan struct{})
	go func() { Wait(nil, &word, 0); close(plain) }()
	for ParkedKey(&word, 7) != 1 || Parked(&word) != 2 {
		time.Sleep(time.Millisecond)
	}
	if h := hooked.Load(); h != 1 {
		t.Fatalf("OnNotedPark ran %d times for one noted waiter", h)
	}
	look := notedLook(&word, note, 42)
	checkNotedMark(t, look)
	word.Store(1)
	WakeKey(&word, 7, 1)
	Wake(&word, 1)
	<-done
	<-plain
	if seen, _ := look(false); seen != 0 {
		t.Fatalf("a woken waiter is still noted (%d)", seen)
	}
}

// notedLook returns a look at Noted: it counts the noted waiters on word
// with note and since, gives each the mark mark (a waiter marked before
// keeps its mark), and returns the count and the mark the last one seen
// had before this look.
func notedLook(word *atomic.Uint32, note any, since int64) func(mark bool) (seen int, marked bool) {
	return func(mark bool) (seen int, marked bool) {
		Noted(func(addr *atomic.Uint32, n any, s int64, m bool) bool {
			if addr == word && n == note && s == since {
				seen++
				marked = m
			}
			return m || mark
		})
		return seen, marked
	}
}

// checkNotedMark checks, through look, that one waiter is noted, unmarked
// at first, and that the mark the first look gave it stays.
func checkNotedMark(t *testing.T, look func(mark bool) (seen int, marked bool)) {
	t.Helper()
	if seen, marked := look(true); seen != 1 || marked {
		t.Fatalf("first look: seen %d, marked %v; want 1, false", seen, marked)
	}
	if seen, marked := look(false); seen != 1 || !marked {
		t.Fatalf("second look: seen %d, marked %v; want 1, true (the mark stays)", seen, marked)
	}
}

// cancellable is a set of waiters, each with a context of its own.
type cancellable struct {
	cancel []context.CancelFunc // cancel[i] ends waiter i's context
	woken  atomic.Int32         // waiters whose wait returned nil
	wg     sync.WaitGroup       // the waiters
}

// startCancellable starts n waiters: waiter i runs wait with its own
// cancellable context and counts in woken if wait returns nil.
func startCancellable(n int, wait func(ctx context.Context, i int) error) *cancellable {
	c := &cancellable{cancel: make([]context.CancelFunc, n)}
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel[i] = cancel
		c.wg.Go(func() {
			if wait(ctx, i) == nil {
				c.woken.Add(1)
			}
		})
	}
	return c
}

// cancelWakeWaiters is how many waiters a cancelWakeRound starts.
const cancelWakeWaiters = 8

// cancelWakeRound is one round of the TestCancelNeverSwallowsWake tests.
// It starts cancelWakeWaiters waiters, waiter i running wait, and calls
// parked to wait until all are parked. Then, for each waiter i, it races a
// coin toss between cancelling waiter i and wake(i) (which returns the
// wake-ups it reports) against the racers in also. It then cancels every
// waiter so the round ends, and fails unless the wake-ups reported equal
// the waiters that returned nil: a wake-up counted for a waiter that gave
// up was swallowed. name is the waking call, for the message.
func cancelWakeRound(t *testing.T, name string, wait func(ctx context.Context, i int) error, parked func(), wake func(i int) int, also ...func(c *cancellable, i int)) {
	t.Helper()
	c := startCancellable(cancelWakeWaiters, wait)
	parked()
	var reported atomic.Int32
	var race sync.WaitGroup
	for i := range cancelWakeWaiters {
		race.Go(func() {
			if rand.IntN(2) == 0 {
				c.cancel[i]()
			} else {
				reported.Add(int32(wake(i)))
			}
		})
		for _, f := range also {
			race.Go(func() { f(c, i) })
		}
	}
	race.Wait()
	for i := range cancelWakeWaiters {
		c.cancel[i]()
	}
	c.wg.Wait()
	if r, got := reported.Load(), c.woken.Load(); got != r {
		t.Fatalf("%s reported %d wake-ups but %d waiters returned woken", name, r, got)
	}
}

// cancelToo, a racer for cancelWakeRound, always races a cancel of waiter
// i against the coin toss.
func cancelToo(c *cancellable, i int) { c.cancel[i]() }

// waitParkedKeys waits until waiter i of a cancelWakeRound is parked on
// key i, for every i.
func waitParkedKeys(t *testing.T, w *atomic.Uint32) {
	t.Helper()
	for i := range cancelWakeWaiters {
		waitParkedKey(t, w, uint32(i), 1)
	}
}
