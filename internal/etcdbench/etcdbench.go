// Package etcdbench measures locks on etcd under contention, in the shapes
// that the etcdlock benchmarks and `lockword bench -kinds etcd` share: N
// clients in one process (goroutines, each with its own etcd client and
// lock), or N processes (a binary re-executed, see ChildMain), each
// acquiring and releasing one lock with an empty critical section.
//
// A sample reports acquisitions per second, the hand-over latency of each
// acquisition that had to wait (from the holder's call to Unlock to the
// return of the next holder's Lock, asked for before that call) and, when
// given the server's CPU clock, the server's CPU time per acquisition. It
// also checks that the lock excluded: the holds, from Lock's return to the
// call to Unlock, on one machine's clock, must not overlap.
//
// It knows locks only through Kind, so that etcdlock's own tests can use
// it without an import cycle.
package etcdbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// A Locker is one client's handle on the lock under benchmark.
type Locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	// Close ends the handle's lease.
	Close() error
}

// A Kind makes Lockers of one lock type: New returns a handle on the lock
// named prefix through cli, with its own lease.
type Kind struct {
	Name string
	New  func(ctx context.Context, cli *clientv3.Client, prefix string) (Locker, error)
}

// leaseTTLSeconds is the peer's session TTL: etcdlock's DefaultTTL, so
// that both send keep-alives as often.
const leaseTTLSeconds = 5

// Concurrency is etcd's own concurrency.Mutex, the peer, with a session
// (lease) of leaseTTLSeconds per handle.
var Concurrency = Kind{Name: "concurrency.Mutex", New: func(ctx context.Context, cli *clientv3.Client, prefix string) (Locker, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(leaseTTLSeconds), concurrency.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	return peerLocker{concurrency.NewMutex(s, prefix), s}, nil
}}

type peerLocker struct {
	m *concurrency.Mutex
	s *concurrency.Session
}

func (p peerLocker) Lock(ctx context.Context) error   { return p.m.Lock(ctx) }
func (p peerLocker) Unlock(ctx context.Context) error { return p.m.Unlock(ctx) }
func (p peerLocker) Close() error                     { return p.s.Close() }

// NewClient returns an etcd client of endpoints, silent.
func NewClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// Params shape one sample.
type Params struct {
	Workers int // clients (goroutines or processes)
	// Count is the acquisitions each worker makes; 0 means as many as
	// fit in Duration.
	Count    int
	Duration time.Duration
	// ServerCPU, if set, reads the server's CPU time (etcdembed's Child):
	// read before the workers start and after they stop.
	ServerCPU func() (time.Duration, error)
}

// A hold is one acquisition, in Unix ns on the machine's clock: asked
// (Lock called), got (Lock returned), left (Unlock called).
type hold struct {
	Asked, Got, Left int64
}

// A Sample is what one run measured.
type Sample struct {
	Acquisitions int64
	// Elapsed runs from the workers' start to the stop: the later of the
	// end of a timed run and the last Unlock call. A worker stops asking
	// at the end, but the Unlock it is in then is still its work, so the
	// last Unlock call alone can fall short of the end.
	Elapsed   time.Duration
	ServerCPU time.Duration // 0: not measured
	// Handovers are the waits of acquisitions asked for before the
	// previous holder called Unlock: from that call to their Lock's
	// return, sorted.
	Handovers []time.Duration
	PerWorker []int64 // each worker's acquisitions
}

// AcqPerSec is the sample's throughput.
func (s *Sample) AcqPerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Acquisitions) / s.Elapsed.Seconds()
}

// ServerCPUPerAcq is the server's CPU time per acquisition, 0 if not
// measured.
func (s *Sample) ServerCPUPerAcq() time.Duration {
	if s.Acquisitions == 0 {
		return 0
	}
	return s.ServerCPU / time.Duration(s.Acquisitions)
}

// HandoverQuantile returns the q quantile (0..1) of the hand-overs, 0 if
// there were none.
func (s *Sample) HandoverQuantile(q float64) time.Duration {
	if len(s.Handovers) == 0 {
		return 0
	}
	return s.Handovers[min(int(q*float64(len(s.Handovers))), len(s.Handovers)-1)]
}

// ErrNotExcluded is returned when two holds overlapped: the lock did not
// exclude.
var ErrNotExcluded = errors.New("etcdbench: two holds overlapped: the lock did not exclude")

// work makes acquisitions of l from start: count of them, or (count 0)
// until end.
func work(ctx context.Context, l Locker, start time.Time, count int, end time.Time) ([]hold, error) {
	time.Sleep(time.Until(start))
	var hs []hold
	for i := 0; count == 0 || i < count; i++ {
		asked := time.Now()
		if count == 0 && !asked.Before(end) {
			break
		}
		if err := l.Lock(ctx); err != nil {
			return hs, err
		}
		got := time.Now().UnixNano()
		left := time.Now().UnixNano()
		hs = append(hs, hold{asked.UnixNano(), got, left})
		if err := l.Unlock(ctx); err != nil {
			return hs, err
		}
	}
	return hs, nil
}

// sample turns every worker's holds into a Sample, checking that no two
// overlap. end is the end of a timed run, zero for a counted one.
func sample(start, end time.Time, perWorker [][]hold) (Sample, error) {
	var s Sample
	all := slices.Concat(perWorker...)
	for _, hs := range perWorker {
		s.PerWorker = append(s.PerWorker, int64(len(hs)))
	}
	s.Acquisitions = int64(len(all))
	if len(all) == 0 {
		return s, nil
	}
	slices.SortFunc(all, func(a, b hold) int { return int(a.Got - b.Got) })
	for i := 1; i < len(all); i++ {
		prev, h := all[i-1], all[i]
		if h.Got < prev.Left {
			return s, fmt.Errorf("%w: one held from %d to %d ns, another from %d", ErrNotExcluded, prev.Got, prev.Left, h.Got)
		}
		if h.Asked < prev.Left {
			s.Handovers = append(s.Handovers, time.Duration(h.Got-prev.Left))
		}
	}
	slices.Sort(s.Handovers)
	stop := all[len(all)-1].Left
	if !end.IsZero() {
		stop = max(stop, end.UnixNano())
	}
	s.Elapsed = time.Duration(stop - start.UnixNano())
	return s, nil
}

// startAhead is how far ahead of now the workers are told to start, so
// that every one is waiting when it comes.
const startAhead = 50 * time.Millisecond

// Clients measures kind with p.Workers goroutines in this process, each
// with its own client of endpoints and its own handle on the lock named
// prefix. Setting up and closing the clients is not timed.
func Clients(ctx context.Context, endpoints []string, kind Kind, prefix string, p Params) (s Sample, err error) {
	ls := make([]Locker, p.Workers)
	clis := make([]*clientv3.Client, p.Workers)
	defer func() {
		// The handles first: they revoke their leases through the clients.
		for i := range ls {
			if ls[i] != nil {
				ls[i].Close()
			}
			if clis[i] != nil {
				clis[i].Close()
			}
		}
	}()
	for i := range ls {
		cli, err := NewClient(endpoints)
		if err != nil {
			return s, err
		}
		clis[i] = cli
		if ls[i], err = kind.New(ctx, cli, prefix); err != nil {
			return s, fmt.Errorf("%s: %w", kind.Name, err)
		}
	}
	cpu0, err := readCPU(p.ServerCPU)
	if err != nil {
		return s, err
	}
	start := time.Now().Add(startAhead)
	end := start.Add(p.Duration)
	holds := make([][]hold, p.Workers)
	errs := make([]error, p.Workers)
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() { holds[i], errs[i] = work(ctx, l, start, p.Count, end) })
	}
	wg.Wait()
	cpu1, err := readCPU(p.ServerCPU)
	if err := errors.Join(append(errs, err)...); err != nil {
		return s, fmt.Errorf("%s: %w", kind.Name, err)
	}
	s, err = sample(start, timedEnd(start, p), holds)
	s.ServerCPU = cpu1 - cpu0
	return s, err
}

// timedEnd is the end of a run of p from start: zero for a counted run.
func timedEnd(start time.Time, p Params) time.Time {
	if p.Count != 0 {
		return time.Time{}
	}
	return start.Add(p.Duration)
}

func readCPU(f func() (time.Duration, error)) (time.Duration, error) {
	if f == nil {
		return 0, nil
	}
	return f()
}
