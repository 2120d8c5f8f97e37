package wait

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/lockword/lockword/internal/contention"
)

// The parking lot: a fixed table of buckets, each a FIFO queue of parked
// goroutines whose words hash to it. A bucket's mutex is held only for queue
// surgery and the value check, never while a goroutine sleeps.

const (
	bucketBits  = 8
	bucketCount = 1 << bucketBits
	cacheLine   = 64
)

type waiter struct {
	addr *atomic.Uint32
	// key is the waiter's key when keyed (WaitKey): only WakeKey with the
	// same address and key wakes it, and Wake passes it by.
	key        uint32
	keyed      bool
	prev, next *waiter
	// wakeNext chains waiters that Wake has dequeued, so that it can
	// signal them after releasing the bucket lock.
	wakeNext *waiter
	queued   bool          // guarded by the bucket's mu
	ready    chan struct{} // capacity 1: the wake-up token
	// note, since and marked are for diagnostics (WaitNoted): what the
	// waiter waits for and since when, as the caller gave them, and a mark
	// that Noted's callback sets (guarded by the bucket's mu).
	note   any
	since  int64
	marked bool
	// profNs stamps a park sampled for the contention profile's unlocker
	// view (contention.Take): the wake-up that ends it charges the wait
	// to its own stack, as the runtime's semrelease does. 0: unsampled.
	profNs int64
}

type bucket struct {
	mu         sync.Mutex
	head, tail *waiter
	// parked counts queued waiters so that Wake on an empty bucket costs
	// one load. Incremented before the value check in Wait (see there).
	parked atomic.Int32
	_      [cacheLine - 8 - 16 - 4]byte // one bucket per cache line: no false sharing between buckets
}

var table [bucketCount]bucket

var waiterPool = sync.Pool{New: func() any {
	return &waiter{ready: make(chan struct{}, 1)}
}}

func bucketOf(addr *atomic.Uint32) *bucket {
	// Fibonacci hashing of the address; the low two bits are always zero.
	h := uint64(uintptr(unsafe.Pointer(addr))>>2) * 0x9E3779B97F4A7C15
	return &table[h>>(64-bucketBits)]
}

// bucketOfKey spreads the keyed waiters of one word over the table, so that
// WakeKey finds its waiter in a short queue and parking and waking of
// different keys rarely take the same bucket lock.
func bucketOfKey(addr *atomic.Uint32, key uint32) *bucket {
	h := (uint64(uintptr(unsafe.Pointer(addr))>>2) + uint64(key)*0xBF58476D1CE4E5B9) * 0x9E3779B97F4A7C15
	return &table[h>>(64-bucketBits)]
}

// Wait parks the calling goroutine while *addr == val, until Wake wakes it
// or ctx is done. The comparison happens under the bucket lock that Wake
// also takes, so a Wake that follows a change of *addr cannot fall between
// the comparison and the enqueue and be lost.
//
// Wait returns nil when it was woken or when *addr no longer held val
// (callers re-check the word either way), and ctx.Err() only when ctx ended
// before any Wake chose this waiter: a cancelled Wait never swallows a
// wake-up meant for someone else. A nil ctx, or one that is never done,
// waits without a context.
func Wait(ctx context.Context, addr *atomic.Uint32, val uint32) error {
	w := waiterPool.Get().(*waiter)
	w.addr, w.keyed = addr, false
	return park(ctx, bucketOf(addr), w, val)
}

// WaitKey is Wait for a waiter that only WakeKey(addr, key, n) may wake:
// it parks while *addr == val, and Wake(addr, n) passes it by. It returns
// as Wait does. Keys let a protocol wake one chosen waiter among many on
// the same word, as FUTEX_WAIT_BITSET does: a ticket lock's Unlock wakes
// the holder of the next ticket, not every waiter.
func WaitKey(ctx context.Context, addr *atomic.Uint32, val, key uint32) error {
	w := waiterPool.Get().(*waiter)
	w.addr, w.key, w.keyed = addr, key, true
	return park(ctx, bucketOfKey(addr, key), w, val)
}

// WaitNoted is Wait that leaves a note for diagnostics while the goroutine
// is parked: note (any value, never compared or called here) and since (a
// time on the caller's clock), which Noted reports. It returns as Wait
// does. A nil note is Wait.
func WaitNoted(ctx context.Context, addr *atomic.Uint32, val uint32, note any, since int64) error {
	w := waiterPool.Get().(*waiter)
	w.addr, w.keyed = addr, false
	w.note, w.since = note, since
	return park(ctx, bucketOf(addr), w, val)
}

// WaitKeyNoted is WaitKey with a note, as WaitNoted.
func WaitKeyNoted(ctx context.Context, addr *atomic.Uint32, val, key uint32, note any, since int64) error {
	w := waiterPool.Get().(*waiter)
	w.addr, w.key, w.keyed = addr, key, true
	w.note, w.since = note, since
	return park(ctx, bucketOfKey(addr, key), w, val)
}

// OnNotedPark, if set (once, before any waiting), is called each time a
// waiter with a note has been queued, under its bucket's lock: so a
// diagnostic scan with Noted that starts after OnNotedPark returned is
// sure to see that waiter, and one that ended before it was called made
// it run after the scan. It must be short and must not call into this
// package.
var OnNotedPark func()

// Noted calls f for every parked waiter that left a note, with the word it
// waits on, its note, its since, and its mark (false until f first
// returns true for this park); f's result becomes the mark. It is called
// under a bucket lock: it must be short and must not call into this
// package. Noted reports how many noted waiters it saw. It costs one load
// per empty bucket and a lock of each other one: for a diagnostic watcher
// that looks every few milliseconds, not for fast paths.
func Noted(f func(addr *atomic.Uint32, note any, since int64, marked bool) bool) int {
	n := 0
	eachParked(func(w *waiter) {
		if w.note != nil {
			n++
			w.marked = f(w.addr, w.note, w.since, w.marked)
		}
	})
	return n + slotsNoted(f)
}

// release returns w to the pool, holding nothing it pointed at.
func release(w *waiter) {
	w.addr, w.note, w.marked, w.profNs = nil, nil, false, 0
	waiterPool.Put(w)
}

// park enqueues w on b if *w.addr == val and sleeps until woken or ctx is
// done; then it returns w to the pool.
func park(ctx context.Context, b *bucket, w *waiter, val uint32) error {
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	addr := w.addr

	b.mu.Lock()
	// Count ourselves before loading the word: Wake stores the word before
	// loading parked, so (all atomics being sequentially consistent) either
	// we see its store or it sees our count.
	b.parked.Add(1)
	if addr.Load() != val {
		b.parked.Add(-1)
		b.mu.Unlock()
		release(w)
		return nil
	}
	// Stamped only once it is sure to sleep, so that a park that does not
	// sleep leaves the sample to the next one (WaitOne may have stamped w).
	if w.profNs == 0 && contention.Armed() { // one load while the profile is off
		w.profNs = contention.Take(addr, w.note)
	}
	b.enqueue(w)
	if w.note != nil && OnNotedPark != nil {
		OnNotedPark()
	}
	b.mu.Unlock()

	if done == nil {
		<-w.ready
		release(w)
		return nil
	}
	var err error
	select {
	case <-w.ready:
	case <-done:
		b.mu.Lock()
		if w.queued {
			b.remove(w)
			b.parked.Add(-1)
			err = ctx.Err()
			b.mu.Unlock()
		} else {
			// A Wake dequeued us before we could leave: its token is on
			// the way. Take it and report the wake-up, so the caller acts
			// on it instead of dropping it.
			b.mu.Unlock()
			<-w.ready
		}
	}
	release(w)
	return err
}

// Wake wakes up to n goroutines parked on addr by Wait, oldest first, and
// returns how many it woke. Callers change the word before calling Wake.
// Keyed waiters (WaitKey) are not woken.
func Wake(addr *atomic.Uint32, n int) int {
	return wake(bucketOf(addr), addr, false, 0, n)
}

// WakeKey wakes up to n goroutines parked on addr by WaitKey with this key,
// oldest first, and returns how many it woke. Callers change the word
// before calling WakeKey. With nobody parked in the key's bucket it costs
// one atomic load.
func WakeKey(addr *atomic.Uint32, key uint32, n int) int {
	return wake(bucketOfKey(addr, key), addr, true, key, n)
}

func wake(b *bucket, addr *atomic.Uint32, keyed bool, key uint32, n int) int {
	if n <= 0 || b.parked.Load() == 0 {
		return 0
	}
	var list *waiter
	woken := 0
	b.mu.Lock()
	for w := b.head; w != nil && woken < n; {
		next := w.next
		if w.addr == addr && w.keyed == keyed && (!keyed || w.key == key) {
			b.remove(w)
			w.wakeNext = list
			list = w
			woken++
		}
		w = next
	}
	if woken > 0 {
		b.parked.Add(int32(-woken))
	}
	b.mu.Unlock()
	// Signal outside the lock: the woken goroutines do not collide with us
	// on the bucket mutex when they run.
	for list != nil {
		w := list
		list = w.wakeNext
		w.wakeNext = nil
		profNs := w.profNs // w may be reused once woken
		w.ready <- struct{}{}
		if profNs != 0 {
			contention.Woken(profNs)
		}
	}
	return woken
}

// Parked reports how many goroutines are parked on addr, keyed or not. It
// is a snapshot, for diagnostics and tests only: it visits every bucket
// that has a parked goroutine, since keyed waiters are spread over them,
// and every slot (WaitOne).
func Parked(addr *atomic.Uint32) int {
	n := 0
	eachParked(func(w *waiter) {
		if w.addr == addr {
			n++
		}
	})
	return n + slotsParked(addr, false, 0)
}

// eachParked calls f for every waiter queued in a bucket, under that
// bucket's lock; it skips a bucket with nothing parked for the price of
// one load. For the diagnostic scans (Noted, Parked), not for fast paths.
func eachParked(f func(w *waiter)) {
	for i := range table {
		b := &table[i]
		if b.parked.Load() == 0 {
			continue
		}
		b.mu.Lock()
		for w := b.head; w != nil; w = w.next {
			f(w)
		}
		b.mu.Unlock()
	}
}

// ParkedKey reports how many goroutines are parked on addr by WaitKey (or
// WaitOne) with this key; a snapshot, for diagnostics and tests.
func ParkedKey(addr *atomic.Uint32, key uint32) int {
	n := slotsParked(addr, true, key)
	b := bucketOfKey(addr, key)
	if b.parked.Load() == 0 {
		return n
	}
	b.mu.Lock()
	for w := b.head; w != nil; w = w.next {
		if w.addr == addr && w.keyed && w.key == key {
			n++
		}
	}
	b.mu.Unlock()
	return n
}

func (b *bucket) enqueue(w *waiter) {
	w.queued = true
	w.prev = b.tail
	w.next = nil
	if b.tail != nil {
		b.tail.next = w
	} else {
		b.head = w
	}
	b.tail = w
}

func (b *bucket) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		b.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		b.tail = w.prev
	}
	w.prev, w.next = nil, nil
	w.queued = false
}
