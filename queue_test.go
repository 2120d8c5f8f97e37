package lockword

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword/internal/wait"
	"math/bits"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

func mustQueue[T any](t testing.TB, capacity int) *Queue[T] {
	t.Helper()
	q, err := NewQueue[T](capacity)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestNewQueueCapacity(t *testing.T) {
	for _, c := range []int{-1, 0, 1, 3, 1000} {
		if _, err := NewQueue[int](c); err == nil {
			t.Errorf("NewQueue(%d) succeeded", c)
		}
	}
	for _, c := range []int{2, 4, 1024} {
		if q, err := NewQueue[int](c); err != nil || q.Cap() != c {
			t.Errorf("NewQueue(%d) = %v, %v", c, q, err)
		}
	}
}

// TestNewQueueHugeCapacity: a power-of-two capacity whose slots cannot be
// allocated is an error, not a makeslice panic or a fatal out-of-memory.
func TestNewQueueHugeCapacity(t *testing.T) {
	if bits.UintSize != 64 {
		t.Skip("the capacities below assume 64-bit ints")
	}
	for _, c := range []int{MaxRingCapacity, MaxRingCapacity >> 14, MaxRingCapacity >> 18} { // 2^62, 2^48, 2^44
		if _, err := NewQueue[int](c); err == nil || !strings.Contains(err.Error(), "would take more than") {
			t.Errorf("NewQueue[int](%d) error = %v, want a too-much-memory error", c, err)
		}
	}
	// The message names the slot's size, not the item's: an int is 8 bytes,
	// its queue slot 128, and "72-byte items" (the slot of the time)
	// misled a reader.
	_, err := NewQueue[int](MaxRingCapacity)
	want := fmt.Sprintf("%d-byte slots", queueSlotStride[int]())
	if err == nil || strings.Contains(err.Error(), "-byte items") || !strings.Contains(err.Error(), want) {
		t.Errorf("NewQueue[int](MaxRingCapacity) error = %v, want it to say %q, not items", err, want)
	}
}

// TestQueueFIFO fills and drains the queue, single and batched, over many
// laps, so that every slot sees sequences of several laps.
func TestQueueFIFO(t *testing.T) {
	q := mustQueue[int](t, 8)
	next, want := 0, 0
	buf := make([]int, 5)
	for lap := range 50 {
		for q.TryPush(next) {
			next++
		}
		if q.Len() != 8 {
			t.Fatalf("lap %d: Len of a full queue = %d", lap, q.Len())
		}
		if n := q.TryPushSlice([]int{-1}); n != 0 {
			t.Fatalf("TryPushSlice on a full queue pushed %d", n)
		}
		for {
			n := q.TryPopSlice(buf[:1+lap%5])
			if n == 0 {
				break
			}
			for _, v := range buf[:n] {
				if v != want {
					t.Fatalf("lap %d: popped %d, want %d", lap, v, want)
				}
				want++
			}
			// Refill with fewer than were popped, in batches, so
			// that batches wrap and the loop ends.
			src := []int{next, next + 1, next + 2}
			next += q.TryPushSlice(src[:min(lap%3, n-1)])
		}
		for v, ok := q.TryPop(); ok; v, ok = q.TryPop() {
			if v != want {
				t.Fatalf("lap %d: popped %d, want %d", lap, v, want)
			}
			want++
		}
		if q.Len() != 0 || want != next {
			t.Fatalf("lap %d: Len %d, popped %d of %d", lap, q.Len(), want, next)
		}
	}
}

func TestQueueClearsPointerSlots(t *testing.T) {
	q := mustQueue[*int](t, 4)
	q.TryPush(new(int))
	q.TryPop()
	q.TryPushSlice([]*int{new(int), new(int)})
	q.TryPopSlice(make([]*int, 2))
	for i := range uint64(q.Cap()) {
		if q.slot(i).v != nil {
			t.Fatalf("slot %d still holds a popped pointer", i)
		}
	}
}

func TestQueueClose(t *testing.T) {
	ctx := context.Background()
	q := mustQueue[int](t, 4)
	q.TryPush(1)
	q.TryPushSlice([]int{2})
	q.Close()
	q.Close() // twice is fine
	if !q.Closed() {
		t.Fatal("Closed() = false after Close")
	}
	if q.TryPush(3) || q.TryPushSlice([]int{3}) != 0 {
		t.Fatal("push succeeded after Close")
	}
	if err := q.Push(ctx, 3); err != ErrQueueClosed {
		t.Fatalf("Push after Close = %v", err)
	}
	if n, err := q.PushSlice(ctx, []int{3}); n != 0 || err != ErrQueueClosed {
		t.Fatalf("PushSlice after Close = %d, %v", n, err)
	}
	for want := 1; want <= 2; want++ {
		if v, err := q.Pop(ctx); v != want || err != nil {
			t.Fatalf("Pop after Close = %d, %v, want %d", v, err, want)
		}
	}
	if _, err := q.Pop(ctx); err != ErrQueueClosed {
		t.Fatalf("Pop of a drained closed queue = %v", err)
	}
	if n, err := q.PopSlice(ctx, make([]int, 2)); n != 0 || err != ErrQueueClosed {
		t.Fatalf("PopSlice of a drained closed queue = %d, %v", n, err)
	}
}

// TestQueueCloseWakesSleepers: Close releases consumers parked on an empty
// queue and producers parked on a full one.
func TestQueueCloseWakesSleepers(t *testing.T) {
	defer watchdog("close", time.Minute)()
	ctx := context.Background()
	empty := mustQueue[int](t, 2)
	full := mustQueue[int](t, 2)
	full.TryPushSlice([]int{1, 2})
	const each = 3
	errs := make(chan error, 2*each)
	for range each {
		go func() { _, err := empty.Pop(ctx); errs <- err }()
		go func() { errs <- full.Push(ctx, 3) }()
	}
	waitParked(t, &empty.poppers, each)
	waitParked(t, &full.pushers, each)
	empty.Close()
	full.Close()
	for range 2 * each {
		if err := <-errs; err != ErrQueueClosed {
			t.Fatalf("sleeper returned %v, want ErrQueueClosed", err)
		}
	}
	if n, err := full.PopSlice(ctx, make([]int, 4)); n != 2 || err != nil {
		t.Fatalf("drain after Close = %d, %v", n, err)
	}
}

// TestQueueCloseDrainWakesAll: consumers parked on a closed queue whose
// last claimed slot is still being written all return once it is popped:
// the last publish after Close wakes every parked consumer, since no later
// publish will. Without that, all but one would park for ever.
func TestQueueCloseDrainWakesAll(t *testing.T) {
	ctx := context.Background()
	q := mustQueue[int](t, 4)
	// A producer that has claimed position 0 and not yet written it.
	q.tail.Store(1)
	const consumers = 3
	type res struct {
		v   int
		err error
	}
	out := make(chan res, consumers)
	for range consumers {
		go func() { v, err := q.Pop(ctx); out <- res{v, err} }()
	}
	waitParked(t, &q.poppers, consumers)
	q.Close()
	waitParked(t, &q.poppers, consumers) // woken by Close, parked again: the slot is not written
	s := q.slot(0)
	s.v = 7
	s.seq.Swap(1)
	q.wakePoppers(1)
	var got []res
	for range consumers {
		select {
		case r := <-out:
			got = append(got, r)
		case <-time.After(10 * time.Second): // a lost wake-up is for ever
			t.Fatalf("%d of %d consumers still parked 10 s after the last item of a closed queue", consumers-len(got), consumers)
		}
	}
	items := 0
	for _, r := range got {
		switch {
		case r.err == nil && r.v == 7:
			items++
		case r.err != ErrQueueClosed:
			t.Fatalf("consumer returned %v, %v", r.v, r.err)
		}
	}
	if items != 1 {
		t.Fatalf("%d consumers got the one item: %v", items, got)
	}
}

// waitParked polls until n goroutines are parked on w.
func waitParked(t *testing.T, w *queueWaiters, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for wait.Parked(&w.gen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d goroutines parked", wait.Parked(&w.gen), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestQueueContext(t *testing.T) {
	q := mustQueue[int](t, 2)
	if err := q.Push(nil, 1); err != ErrNilContext { //nolint:staticcheck // nil ctx on purpose
		t.Fatalf("Push(nil) = %v", err)
	}
	if _, err := q.Pop(nil); err != ErrNilContext { //nolint:staticcheck // nil ctx on purpose
		t.Fatalf("Pop(nil) = %v", err)
	}
	if _, err := q.PushSlice(nil, []int{1}); err != ErrNilContext { //nolint:staticcheck // nil ctx on purpose
		t.Fatalf("PushSlice(nil) = %v", err)
	}
	if _, err := q.PopSlice(nil, make([]int, 1)); err != ErrNilContext { //nolint:staticcheck // nil ctx on purpose
		t.Fatalf("PopSlice(nil) = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := q.Pop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pop of an empty queue = %v, want the deadline", err)
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	// Room (items) there: done contexts do not stop the call.
	if err := q.Push(done, 1); err != nil {
		t.Fatalf("Push with room and a done ctx = %v", err)
	}
	if n, err := q.PushSlice(done, []int{2, 3}); n != 1 || err != context.Canceled {
		t.Fatalf("PushSlice past the room with a done ctx = %d, %v", n, err)
	}
	if err := q.Push(done, 4); err != context.Canceled {
		t.Fatalf("Push on a full queue with a done ctx = %v", err)
	}
	if v, err := q.Pop(done); v != 1 || err != nil {
		t.Fatalf("Pop with an item and a done ctx = %d, %v", v, err)
	}
	if q.poppers.state.Load() != 0 || q.pushers.state.Load() != 0 {
		t.Fatal("a cancelled call left its announcement behind")
	}
}

func TestQueueStatsAndLen(t *testing.T) {
	q := mustQueue[int](t, 4)
	if q.Len() != 0 || q.Stats() != (QueueStats{}) {
		t.Fatalf("fresh queue: Len %d, %+v", q.Len(), q.Stats())
	}
	q.TryPushSlice([]int{1, 2, 3})
	if q.Len() != 3 {
		t.Fatalf("Len = %d, want 3", q.Len())
	}
	ctx := context.Background()
	q.TryPopSlice(make([]int, 3))
	go func() {
		time.Sleep(20 * time.Millisecond)
		q.TryPush(9)
	}()
	if v, err := q.Pop(ctx); v != 9 || err != nil {
		t.Fatalf("Pop = %d, %v", v, err)
	}
	if s := q.Stats(); s.PopSleeps == 0 || s.Wakes == 0 {
		t.Fatalf("a Pop that waited 20 ms did not count a sleep and a wake: %+v", s)
	}
}

// TestQueueWakesOncePerSleep: a goroutine parked on one side is woken once,
// however many releases the other side makes before it runs again. The run
// is crafted so that it cannot run: GOMAXPROCS is 1 while this goroutine,
// which never blocks, makes 100 releases (pushes to a parked consumer, pops
// from under a parked producer); a woken goroutine that still counted as
// parked drew a wake call from each of them. No timing is assumed: if the
// woken goroutine does run (a preemption), it leaves, and later releases
// find nobody parked.
func TestQueueWakesOncePerSleep(t *testing.T) {
	const releases = 100
	for _, side := range []string{"pop", "push"} {
		t.Run(side, func(t *testing.T) {
			ctx := context.Background()
			q := mustQueue[int](t, 128)
			done := make(chan error, 1)
			if side == "pop" {
				go func() { _, err := q.Pop(ctx); done <- err }()
				waitParked(t, &q.poppers, 1)
			} else {
				for q.TryPush(0) {
				}
				go func() { done <- q.Push(ctx, 1) }()
				waitParked(t, &q.pushers, 1)
			}
			prev := runtime.GOMAXPROCS(1)
			for i := range releases {
				if side == "pop" {
					q.TryPush(i)
				} else {
					q.TryPop()
				}
			}
			runtime.GOMAXPROCS(prev)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			s := q.Stats()
			if sleeps := s.PopSleeps + s.PushSleeps; s.Wakes > sleeps {
				t.Fatalf("%d wake calls for %d sleeps over %d releases: a woken goroutine drew more wake-ups", s.Wakes, sleeps, releases)
			}
		})
	}
}

// TestQueueLookAfterStalePosition: a goroutine that looks at the queue
// after announcing its sleep, and finds its position taken by another
// goroutine between the load of the position and the load of the slot
// (the hook makes that claim there), must look again at the new position
// instead of sleeping: the release it waits for may have happened before
// it announced, and nobody will wake it. Consumer: the last item of a
// closed queue is popped under it, and it must return ErrQueueClosed.
// Producer: the queue has room at the next position, freed before it
// announced, and it must push. The test does not wait for a time-out: it
// fails as soon as the goroutine is parked with its call unfinished.
func TestQueueLookAfterStalePosition(t *testing.T) {
	for _, side := range []string{"pop", "push"} {
		t.Run(side, func(t *testing.T) {
			defer func() { queueLookHook = nil }()
			ctx := context.Background()
			q := mustQueue[int](t, 2)
			w := &q.poppers
			done := make(chan error, 1)
			if side == "pop" {
				q.tail.Store(1) // a producer has claimed position 0, not yet written it
				go func() { _, err := q.Pop(ctx); done <- err }()
			} else {
				w = &q.pushers
				q.TryPushSlice([]int{1, 2})
				go func() { done <- q.Push(ctx, 3) }()
			}
			waitParked(t, w, 1)
			var fired atomic.Bool
			queueLookHook = func() {
				if fired.Load() {
					return
				}
				if side == "pop" {
					_, ok := q.TryPop() // another consumer takes the last item
					fired.Store(ok)
				} else {
					fired.Store(q.TryPush(4)) // another producer takes the freed slot
				}
			}
			if side == "pop" {
				q.Close() // woken: the slot is still unwritten, parked again
				waitParked(t, w, 1)
				s := q.slot(0)
				s.v = 7
				s.seq.Swap(1) // publish; the wake-up makes it look
				q.wakePoppers(1)
			} else {
				q.TryPop() // wakes the producer
				q.TryPop() // frees the next slot too
			}
			for {
				select {
				case err := <-done:
					if side == "pop" && err != ErrQueueClosed || side == "push" && err != nil {
						t.Fatalf("%s returned %v", side, err)
					}
					return
				default:
				}
				if fired.Load() && wait.Parked(&w.gen) == 1 {
					t.Fatalf("the %s call parked after its position went stale: %+v, fired %v", side, q.Stats(), fired.Load())
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
}

// TestQueueWokenBeforeItSleeps: a producer counted woken by a release
// that comes between its announcement and its sleep, and that then finds
// the queue full again (other producers took the room), must still be
// woken by the next release. If it loaded gen after that release bumped
// it, it would sleep counted as woken, and every later release would pass
// it by. The hook plays the other goroutines at that point; the last pop
// must make a wake call, and the producer must then push.
func TestQueueWokenBeforeItSleeps(t *testing.T) {
	defer func() { queueAnnounceHook = nil }()
	ctx := context.Background()
	q := mustQueue[int](t, 2)
	q.TryPushSlice([]int{1, 2})
	done := make(chan error, 1)
	go func() { done <- q.Push(ctx, 3) }()
	waitParked(t, &q.pushers, 1)
	var fired atomic.Bool
	queueAnnounceHook = func() {
		if fired.CompareAndSwap(false, true) {
			q.TryPop()                  // counts the producer woken, bumps gen
			q.TryPushSlice([]int{4, 5}) // other producers fill the queue again
		}
	}
	q.TryPop() // wakes the producer; it announces again and the hook runs
	for !fired.Load() || wait.Parked(&q.pushers.gen) != 1 {
		select {
		case err := <-done:
			t.Fatalf("Push returned %v on a full queue", err)
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
	before := q.Stats().Wakes
	q.TryPop() // room for the parked producer
	if after := q.Stats().Wakes; after == before {
		t.Fatalf("the pop that made room for a parked producer made no wake call (%+v): it sleeps for ever", q.Stats())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestQueueSlotsOnOwnLines: every slot starts on a 128-byte boundary
// (queueSlotAlign) and lies alone in its block, for items smaller and
// larger than a block, so that a producer and a consumer one slot apart do
// not share a line or a prefetched pair of lines; the guard before the
// first slot and after the last lie inside the allocation.
func TestQueueSlotsOnOwnLines(t *testing.T) {
	check := func(name string, capacity int, stride, size uintptr, slots func() (unsafe.Pointer, int)) {
		t.Helper()
		if stride%queueSlotAlign != 0 || stride < size {
			t.Errorf("%s: stride %d for a %d-byte slot: want a multiple of %d that holds it", name, stride, size, queueSlotAlign)
		}
		base, n := slots()
		if uintptr(base)%queueSlotAlign != 0 {
			t.Errorf("%s: first slot at %#x, not %d-byte aligned", name, uintptr(base), queueSlotAlign)
		}
		if n != capacity {
			t.Errorf("%s: Cap = %d, want %d", name, n, capacity)
		}
	}
	qb := mustQueue[byte](t, 4)
	check("Queue[byte]", 4, qb.stride, unsafe.Sizeof(queueSlot[byte]{}), func() (unsafe.Pointer, int) { return qb.slots, qb.Cap() })
	q3 := mustQueue[[3]uint64](t, 8)
	check("Queue[[3]uint64]", 8, q3.stride, unsafe.Sizeof(queueSlot[[3]uint64]{}), func() (unsafe.Pointer, int) { return q3.slots, q3.Cap() })
	q200 := mustQueue[[200]byte](t, 2)
	check("Queue[[200]byte]", 2, q200.stride, unsafe.Sizeof(queueSlot[[200]byte]{}), func() (unsafe.Pointer, int) { return q200.slots, q200.Cap() })
	if q200.stride != 256 {
		t.Errorf("Queue[[200]byte]: stride %d, want 256 (a 208-byte slot rounded up)", q200.stride)
	}
	for c := 2; c <= 1<<12; c <<= 1 { // small objects of several size classes, then large
		qc := mustQueue[int](t, c)
		check(fmt.Sprintf("Queue[int] of %d", c), c, qc.stride, unsafe.Sizeof(queueSlot[int]{}), func() (unsafe.Pointer, int) { return qc.slots, qc.Cap() })
		qw := mustQueue[[20]uint64](t, c)
		check(fmt.Sprintf("Queue[[20]uint64] of %d", c), c, qw.stride, unsafe.Sizeof(queueSlot[[20]uint64]{}), func() (unsafe.Pointer, int) { return qw.slots, qw.Cap() })
	}
	qe := mustQueue[struct{}](t, 2)
	check("Queue[struct{}]", 2, qe.stride, unsafe.Sizeof(queueSlot[struct{}]{}), func() (unsafe.Pointer, int) { return qe.slots, qe.Cap() })
	// Every slot is written and read back without touching its
	// neighbours' bytes.
	for i := range uint64(8) {
		q3.slot(i).v = [3]uint64{i, i, i}
	}
	for i := range uint64(8) {
		if v := q3.slot(i).v; v != [3]uint64{i, i, i} {
			t.Errorf("slot %d holds %v after every slot was written", i, v)
		}
	}
}

// TestQueueItemsSurviveGC: the slots are allocated through reflect with a
// pad (newQueueSlots); the garbage collector must still see the items'
// pointers, or a pushed pointer's object would be freed and reused while
// queued.
func TestQueueItemsSurviveGC(t *testing.T) {
	q := mustQueue[*[64]int](t, 64)
	for i := range 64 {
		p := new([64]int)
		for j := range p {
			p[j] = i
		}
		q.TryPush(p)
	}
	for range 3 {
		runtime.GC()
		junk := make([]*[64]int, 1000) // reuse freed memory, if any was freed
		for i := range junk {
			junk[i] = new([64]int)
			junk[i][0] = -1
		}
		runtime.KeepAlive(junk)
	}
	for i := range 64 {
		p, ok := q.TryPop()
		if !ok || p[0] != i || p[63] != i {
			t.Fatalf("item %d after GC: ok %v, holds %d..%d", i, ok, p[0], p[63])
		}
	}
}

// TestZeroQueuePanicsClearly: a Queue not made by NewQueue has no slots;
// using it panics with a message naming the mistake (before, an index out
// of range in TryPush).
func TestZeroQueuePanicsClearly(t *testing.T) {
	var q Queue[int]
	for name, use := range map[string]func(){
		"TryPush": func() { q.TryPush(1) }, "TryPop": func() { q.TryPop() },
		"TryPushSlice": func() { q.TryPushSlice([]int{1}) }, "TryPopSlice": func() { q.TryPopSlice(make([]int, 1)) },
		"Push": func() { q.Push(context.Background(), 1) }, "Pop": func() { q.Pop(context.Background()) },
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, "Queue used without NewQueue") {
					t.Errorf("%s on a zero Queue: recovered %q, want a panic naming NewQueue", name, r)
				}
			}()
			use()
		}()
	}
}
