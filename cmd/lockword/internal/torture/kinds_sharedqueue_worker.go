package torture

// A process of the shared-queue torture (kinds_sharedqueue.go): a
// producer or the consumer, over shm's MPSC queue or, for
// shared-queue-broken, over brokenMPSC.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lockword/lockword/internal/faultpoint"
	"github.com/lockword/lockword/internal/msgcheck"
	"github.com/lockword/lockword/shm"
)

// sharedQueueSpec tells a worker process its part; JSON in
// sharedQueueWorkerEnv.
type sharedQueueSpec struct {
	Region    string `json:"region"`
	ID        int    `json:"id"` // producer number; -1: the consumer
	Producers int    `json:"producers"`
	Items     int64  `json:"items"` // per producer
	Broken    bool   `json:"broken"`
}

// sharedQueueResult is what a worker prints as its last line of output.
type sharedQueueResult struct {
	Sent      int64    `json:"sent,omitempty"`
	Received  int64    `json:"received,omitempty"`
	Dups      int64    `json:"dups,omitempty"`
	Gaps      int64    `json:"gaps,omitempty"`
	Mangled   int64    `json:"mangled,omitempty"`
	Next      []uint64 `json:"next,omitempty"` // per producer: messages received in order
	Bytes     int64    `json:"bytes,omitempty"`
	ElapsedNs int64    `json:"elapsed_ns,omitempty"`
	Lost      uint64   `json:"lost,omitempty"`
	Recovered uint64   `json:"recovered,omitempty"`
	Err       string   `json:"error,omitempty"`
}

func sharedQueueWorkerMain(specJSON string) int {
	var spec sharedQueueSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "lockword torture shared-queue worker:", err)
		return exitUsage
	}
	res, err := sharedQueueWorker(&spec)
	if err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Printf("%s\n", b)
	return exitOK
}

// queueSender and queueReceiver are the two queues' sides: shm's and the
// broken one.
type queueSender interface {
	Send(ctx context.Context, msg []byte) error
}

type queueReceiver interface {
	Receive(ctx context.Context, buf []byte) ([]byte, error)
}

func sharedQueueWorker(spec *sharedQueueSpec) (res sharedQueueResult, err error) {
	r, err := openTortureRegion(spec.Region)
	if err != nil {
		return res, err
	}
	defer r.Close()
	st, err := r.Bytes(sharedQueueStateName, sqSize)
	if err != nil {
		return res, err
	}
	var broken *brokenMPSC
	if spec.Broken {
		if broken, err = openBrokenMPSC(r, st); err != nil {
			return res, err
		}
	}
	ctx := context.Background()
	if spec.ID >= 0 {
		var p queueSender = broken
		if !spec.Broken {
			sp, err := r.MPSCProducer(sharedQueueName, sharedQueueCapacity)
			if err != nil {
				return res, err
			}
			defer sp.Close()
			p = sp
			faultpoint.MPSC = func(step string) { holdForKill(st, spec.ID, step) }
		}
		put(st, sqReady+8*(spec.ID+1), 1)
		for get(st, sqGo) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		buf := make([]byte, 0, sharedQueueMaxMsg)
		for seq := range uint64(spec.Items) {
			if err := p.Send(ctx, msgcheck.Msg(buf, uint32(spec.ID), seq, sharedQueueMaxMsg)); err != nil {
				return res, err
			}
			res.Sent++
		}
		return res, nil
	}
	var c queueReceiver = broken
	var sc *shm.MPSCConsumer
	if !spec.Broken {
		if sc, err = r.MPSCConsumer(sharedQueueName, sharedQueueCapacity); err != nil {
			return res, err
		}
		defer sc.Detach()
		c = sc
	}
	put(st, sqReady, 1)
	for get(st, sqGo) == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	start := time.Now()
	chk := msgcheck.NewChecker(spec.Producers, sharedQueueMaxMsg)
	defer func() {
		res.Received, res.Dups, res.Gaps, res.Mangled = int64(chk.Received), int64(chk.Dups), int64(chk.Gaps), int64(chk.Mangled)
		res.Next, res.ElapsedNs = chk.Next, int64(time.Since(start))
		if sc != nil {
			var lerr, rerr error
			res.Lost, lerr = sc.Lost()
			res.Recovered, rerr = sc.ClaimsRecovered()
			if err == nil {
				err = errors.Join(lerr, rerr)
			}
		}
	}()
	buf := make([]byte, 0, sharedQueueCapacity)
	for {
		// The supervisor sets stop once every producer has exited: then
		// a quiet queue is a drained one (a dead claimer's record is
		// skipped within Receive's 10 ms checks, well inside the wait).
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		msg, err := c.Receive(wctx, buf)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			if get(st, sqStop) != 0 {
				return res, nil
			}
			continue
		}
		if err != nil {
			return res, err
		}
		chk.Check(msg)
		if spec.Broken && !chk.OK() {
			put(st, sqStop, 1) // caught: end the producers' waits too
			return res, nil
		}
		res.Bytes += int64(len(msg))
		if chk.Received%publishEvery == 0 {
			put(st, sqReceived, uint64(chk.Received))
		}
	}
}

// holdForKill is a producer's faultpoint.MPSC under the torture: once the
// supervisor armed it with step, it says it is there and waits to be
// killed (armWait at most, then goes on), so that a kill lands between
// claim and publish. Unarmed, it costs a load per step.
func holdForKill(st []byte, id int, step string) {
	want := get(st, sqArm+8*id)
	if want == 0 || want > sqStepClaimed || step != [...]string{sqStepClaiming: "claiming", sqStepClaimed: "claimed"}[want] {
		return
	}
	put(st, sqArm+8*id, 0) // once
	put(st, sqInWindow+8*id, 1)
	for t := time.Now(); time.Since(t) < armWait; {
		time.Sleep(time.Millisecond)
	}
	put(st, sqInWindow+8*id, 0)
}

// brokenMPSC is shared-queue-broken's queue: the shared queue's record
// scheme with its publication order reversed: a producer claims space with
// a CAS of tail, then stores the record's header before it copies the
// payload, so the consumer can copy bytes not yet written (a torn
// message). It yields between the two, as a producer preempted there
// would, so that it fails on one core too. Its words are atomic, so only
// the torture's checks can catch it. A header holds the length + 1 (0:
// not yet written), or brokenPad: padding to the end of the buffer.
type brokenMPSC struct {
	base []byte // the Bytes object: tail at 0, head at 64, records from 128
	data []byte
	st   []byte // the torture's state: its sqStop ends every wait
}

// errBrokenStopped ends a broken queue's wait once the consumer has caught
// it (a torn message can leave it with a header it cannot parse, and the
// run would otherwise only end as stalled).
var errBrokenStopped = errors.New("stopped: the consumer caught the broken queue")

const (
	brokenHeader = 8
	brokenPad    = 1 << 62 // header bit: padding to the end of the buffer
	brokenSize   = 128 + sharedQueueCapacity
)

// openBrokenMPSC maps the broken queue onto a Bytes object of the region,
// created zero: empty.
func openBrokenMPSC(r *shm.Region, st []byte) (*brokenMPSC, error) {
	b, err := r.Bytes(sharedQueueName+"-broken", brokenSize)
	if err != nil {
		return nil, err
	}
	return &brokenMPSC{base: b, data: b[128:], st: st}, nil
}

// wait yields once, or reports why the wait must end.
func (q *brokenMPSC) wait(ctx context.Context) error {
	if get(q.st, sqStop) != 0 {
		return errBrokenStopped
	}
	runtime.Gosched()
	return ctx.Err()
}

// word is the 64-bit word at off of the object. Legal: objects are
// 64-aligned in a page-aligned mapping that outlives the worker's use of
// it, off is a multiple of 8 inside the object, and atomic.Uint64 is a
// plain 8-byte word.
func (q *brokenMPSC) word(off uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&q.base[off]))
}

// hdr is the header word of the record at offset off.
func (q *brokenMPSC) hdr(off uint64) *atomic.Uint64 { return q.word(128 + off) }

func (q *brokenMPSC) Send(ctx context.Context, msg []byte) error {
	size := uint64(brokenHeader + (len(msg)+7)&^7)
	for {
		tail, head := q.word(0), q.word(64)
		t := tail.Load()
		off := t % sharedQueueCapacity
		if room := sharedQueueCapacity - off; room < size {
			if t+room-head.Load() > sharedQueueCapacity {
				if err := q.wait(ctx); err != nil {
					return err
				}
				continue
			}
			if tail.CompareAndSwap(t, t+room) {
				q.hdr(off).Store(brokenPad)
			}
			continue
		}
		if t+size-head.Load() > sharedQueueCapacity {
			if err := q.wait(ctx); err != nil {
				return err
			}
			continue
		}
		if !tail.CompareAndSwap(t, t+size) {
			continue
		}
		q.hdr(off).Store(uint64(len(msg)) + 1) // BUG: published before the payload is written
		runtime.Gosched()                      // a producer preempted between the two
		copy(q.data[off+brokenHeader:], msg)
		return nil
	}
}

func (q *brokenMPSC) Receive(ctx context.Context, buf []byte) ([]byte, error) {
	head := q.word(64)
	for {
		h := head.Load()
		off := h % sharedQueueCapacity
		w := q.hdr(off).Load()
		switch {
		case w == 0:
			if err := q.wait(ctx); err != nil {
				return buf[:0], err
			}
			continue
		case w == brokenPad:
			q.hdr(off).Store(0)
			head.Store(h + sharedQueueCapacity - off)
			continue
		}
		n := min(w-1, sharedQueueCapacity-off-brokenHeader)
		msg := append(buf[:0], q.data[off+brokenHeader:off+brokenHeader+n]...)
		q.hdr(off).Store(0)
		head.Store(h + uint64(brokenHeader+(int(n)+7)&^7))
		return msg, nil
	}
}
