package lockword

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/lockword/lockword/internal/wait"
)

// semQueue is a Semaphore's FIFO queue of waiters. Its state table (every
// move is made under mu, except the waiter's own reads of granted):
//
//	waiter state         who moves it      to
//	queued, granted 0    join              (enters; sets the word's queued bit first)
//	queued, granted 0    grant (Release,   dequeued, permits taken for it,
//	                     or a leaver)      granted 1, then woken
//	queued, granted 0    leave             dequeued, nothing taken (its
//	                                       ctx ended); grants those behind
//
// Only a holder of mu takes permits from the word while the queued bit is
// set (the fast paths and the lock-free slow paths all fail on the bit),
// so grant can subtract without a CAS. The bit is cleared, under mu, only
// when the queue empties.
type semQueue struct {
	mu         Mutex
	head, tail *semWaiter
}

// semWaiter is one queued Acquire. granted is its futex word: 0 while
// queued, 1 once a Release (or a leaving waiter) has taken its permits for
// it and dequeued it.
type semWaiter struct {
	n          uint64
	granted    atomic.Uint32
	queued     bool // guarded by semQueue.mu
	prev, next *semWaiter
}

var semWaiters = sync.Pool{New: func() any { return new(semWaiter) }}

func getSemWaiter(n uint64) *semWaiter {
	w := semWaiters.Get().(*semWaiter)
	w.n, w.prev, w.next = n, nil, nil
	w.granted.Store(0)
	return w
}

// putSemWaiter recycles w once its owner saw its grant or left the queue.
// A Release that granted it may still be about to wake its word; that at
// worst wakes w's next user spuriously, which the futex contract allows
// (waiters loop on granted).
func putSemWaiter(w *semWaiter) { semWaiters.Put(w) }

// join takes n permits if nobody is queued and they are free (w nil, err
// nil), returns ctx.Err() if ctx is done before it would queue (w nil), or
// queues a waiter for n and returns it.
func (q *semQueue) join(s *Semaphore, n uint64, ctx context.Context) (*semWaiter, error) {
	q.mu.Lock()
	for {
		old := s.state.Load()
		if old&semQueued == 0 && old&semFreeMask >= n {
			if s.state.CompareAndSwap(old, old-n) {
				q.mu.Unlock()
				return nil, nil
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			q.mu.Unlock()
			return nil, err
		}
		// Set the queued bit before the waiter is visible, so that no
		// fast path takes permits meant for the queue from here on.
		if old&semQueued != 0 || s.state.CompareAndSwap(old, old|semQueued) {
			break
		}
	}
	w := getSemWaiter(n)
	w.queued = true
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next, w.prev = w, q.tail
	}
	q.tail = w
	q.mu.Unlock()
	return w, nil
}

// remove unlinks w. mu is held.
func (q *semQueue) remove(w *semWaiter) {
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
}

// semWakeBatch is how many granted waiters one grant wakes after dropping
// mu; beyond it, the rest are woken with mu held.
const semWakeBatch = 8

// grant gives free permits to the waiters at the front, in order, while
// the front one fits, and clears the queued bit if the queue empties. mu
// is held on entry and released on return; the wake-ups happen after, so
// that a woken waiter does not find mu held.
func (q *semQueue) grant(s *Semaphore) {
	var woken [semWakeBatch]*atomic.Uint32
	k := 0
	for w := q.head; w != nil && s.state.Load()&semFreeMask >= w.n; w = q.head {
		s.state.Add(-w.n) // only mu's holder takes permits while queued
		q.remove(w)
		w.granted.Store(1)
		if k < len(woken) {
			woken[k] = &w.granted
			k++
		} else {
			wait.Wake(&w.granted, 1)
		}
	}
	if q.head == nil {
		s.state.And(^uint64(semQueued))
	}
	q.mu.Unlock()
	for _, g := range woken[:k] {
		wait.Wake(g, 1)
	}
}

// release adds n permits under mu and grants them to the queue.
func (q *semQueue) release(s *Semaphore, n uint64) {
	q.mu.Lock()
	for {
		old := s.state.Load()
		if old&semFreeMask+n > uint64(s.capacity) {
			q.mu.Unlock()
			panicOverRelease(int64(n), old, s.capacity)
		}
		if s.state.CompareAndSwap(old, old+n) {
			break
		}
	}
	q.grant(s)
}

// leave takes w out of the queue for a waiter whose context ended and
// reports whether it did; false means w was granted first (granted is 1
// and the permits are the caller's). A waiter that leaves from the front
// may unblock those behind it: they are granted at once.
func (q *semQueue) leave(s *Semaphore, w *semWaiter) bool {
	q.mu.Lock()
	if !w.queued {
		q.mu.Unlock()
		return false
	}
	q.remove(w)
	q.grant(s)
	return true
}
