//go:build linux

package shm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/shm"
)

// orders is the data that the lock "orders-lock" protects: plain data
// (numbers, bools, arrays; no pointers), the same type in every process.
type orders struct {
	Count uint64
	// Intent is, while an update is under way, the count before it plus
	// one (0: none), so that a repair can roll a half-done update back.
	// It is stored with sync/atomic: the compiler may drop a plain store
	// that a later store to the same field overwrites, and the repair
	// needs this one to have happened, before the update.
	Intent atomic.Uint64
}

// The safe pattern for every process: LockContext, and on ErrOwnerDead
// (the previous holder died holding the lock, maybe half-way through an
// update) repair the data before MarkConsistent. Plain Lock panics on an
// owner death unless SetRepair declared how to repair.
func ExampleOpenOrCreate() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders") // or just "orders": /dev/shm/orders

	// Every process runs the same lines; exactly one creates the file.
	r, err := shm.OpenOrCreate(path, 0, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	mu, _ := r.Mutex("orders-lock")
	total, err := shm.Value[orders](r, "orders-total") // a *orders in the region
	if err != nil {
		fmt.Println(err) // ErrObjectBounds, ErrObjectKind: another type has that name
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch err := mu.LockContext(ctx); {
	case errors.Is(err, lockword.ErrOwnerDead):
		// We hold the lock: roll a half-done update back, then mark.
		if intent := total.Intent.Load(); intent != 0 {
			total.Count = intent - 1
			total.Intent.Store(0)
		}
		mu.MarkConsistent()
	case err != nil:
		// ErrNotRecoverable (see Mutex.Reinitialize) or the
		// context's error: we do not hold the lock.
		fmt.Println(err)
		return
	}
	total.Intent.Store(total.Count + 1) // intent: the count before, plus one
	total.Count++
	total.Intent.Store(0) // done
	n := total.Count
	mu.Unlock()
	fmt.Println(n)
	// Output: 1
}

// LockContext tells the caller when the previous holder died while holding
// the lock, so that it can repair the data before marking it consistent.
func ExampleMutex_LockContext() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := shm.Create(filepath.Join(dir, "jobs"), 0, nil)
	defer r.Close()
	mu, _ := r.Mutex("queue")

	err := mu.LockContext(context.Background())
	switch {
	case errors.Is(err, lockword.ErrOwnerDead):
		// We hold the lock; the data may be half updated: repair it
		// (roll back from an intent record, say), then:
		mu.MarkConsistent()
	case err != nil:
		fmt.Println(err) // ErrNotRecoverable, or the context's error
		return
	}
	fmt.Println("holding the lock")
	mu.Unlock()
	// Output: holding the lock
}

// With a repair function, the sync.Locker methods handle owner death too.
func ExampleMutex_SetRepair() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := shm.Create(filepath.Join(dir, "jobs"), 0, nil)
	defer r.Close()
	mu, _ := r.Mutex("queue")
	mu.SetRepair(func() error {
		// Runs holding the lock, only after a holder died holding it.
		return nil
	})
	mu.Lock()
	mu.Unlock()
	fmt.Println("ok")
	// Output: ok
}

func ExampleInspect() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders")
	r, _ := shm.Create(path, 0, nil)
	defer r.Close()
	mu, _ := r.Mutex("orders-lock")
	mu.Lock()
	info, _ := shm.Inspect(path)
	for _, o := range info.Objects {
		fmt.Println(o.Name, o.Kind, o.State, o.HolderPID == os.Getpid(), o.HolderAlive)
	}
	mu.Unlock()
	// Output: orders-lock mutex held true true
}

// One process sends, another receives; here both ends are in one process
// for the example's sake. Each side usually runs in its own process, both
// naming the ring and its capacity.
func ExampleRegion_RingProducer() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := shm.Create(filepath.Join(dir, "events"), 0, nil)
	defer r.Close()

	// The producer process:
	p, err := r.RingProducer("events", 64<<10) // 64 KiB of records
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, ev := range []string{"order 1 placed", "order 1 paid", "order 2 placed"} {
		if err := p.Send(ctx, []byte(ev)); err != nil {
			fmt.Println(err)
			return
		}
	}
	p.Close() // end of stream

	// The consumer process:
	c, _ := r.RingConsumer("events", 64<<10)
	buf := make([]byte, c.MaxMessage())
	for {
		msg, err := c.Receive(ctx, buf)
		switch {
		case errors.Is(err, lockword.ErrRingClosed):
			fmt.Println("end of stream")
			return
		case errors.Is(err, shm.ErrPeerDead):
			fmt.Println("the producer died; everything it sent was received")
			return
		case err != nil:
			fmt.Println(err) // ErrRingCorrupt, or the context's error
			return
		}
		fmt.Println(string(msg))
	}
	// Output:
	// order 1 placed
	// order 1 paid
	// order 2 placed
	// end of stream
}

// A seqlock in a region: one process publishes a snapshot, any number of
// processes read it without taking a lock.
func ExampleNewSeqLock() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := shm.Create(filepath.Join(dir, "quotes"), 0, nil)
	defer r.Close()

	type quote struct {
		BidMicros, AskMicros int64
		Seq                  uint32
	}
	q, err := shm.NewSeqLock[quote](r, "EURUSD")
	if err != nil {
		fmt.Println(err)
		return
	}
	q.Store(quote{BidMicros: 1_084_210, AskMicros: 1_084_230, Seq: 1}) // the writer process

	v, err := q.LoadContext(context.Background()) // a reader process
	if errors.Is(err, shm.ErrWriterDead) {
		fmt.Println("the writer died mid-Store; the next Store repairs the value")
		return
	}
	fmt.Println(v.BidMicros, v.AskMicros, v.Seq)
	// Output: 1084210 1084230 1
}

// The region records a value's size and alignment: asking for the name
// with another type, in any process, is an error, and so is a type with
// pointers.
func ExampleValue() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	r, _ := shm.Create(filepath.Join(dir, "stats"), 0, nil)
	defer r.Close()

	type stats struct {
		Requests, Errors uint64
	}
	mu, _ := r.Mutex("stats-lock")
	// Counters need no repair: a holder that died mid-update leaves them
	// at most one count off.
	mu.SetRepair(func() error { return nil })
	s, err := shm.Value[stats](r, "stats")
	if err != nil {
		fmt.Println(err)
		return
	}
	mu.Lock()
	s.Requests++
	v := *s
	mu.Unlock()
	fmt.Println(v.Requests, v.Errors)

	_, err = shm.Value[[4]uint32](r, "stats") // 16 bytes too, 4-byte aligned
	fmt.Println(errors.Is(err, shm.ErrObjectKind))
	_, err = shm.Value[uint64](r, "stats")
	fmt.Println(errors.Is(err, shm.ErrObjectBounds))
	_, err = shm.Value[struct{ Name string }](r, "names")
	fmt.Println(errors.Is(err, lockword.ErrHasPointers))
	// Output:
	// 1 0
	// true
	// true
	// true
}
