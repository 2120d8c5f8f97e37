package bench

// The etcd kinds: etcdlock.Mutex against etcd's own concurrency.Mutex, on
// one embedded member that runs in a child process (this binary
// re-executed), so that its CPU time is the server's alone: each sample
// reads it before and after and reports the server's CPU per acquisition
// beside the throughput. Two groups: clients (goroutines of this process,
// each with its own etcd client and lease) and processes (each with one
// client). The shapes themselves, and the check that the lock excluded,
// are internal/etcdbench's, which the etcdlock benchmarks share.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/etcdlock"
	"github.com/lockword/lockword/internal/etcdbench"
	"github.com/lockword/lockword/internal/etcdembed"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd kind follows the others in Kinds (and in the help), and "all"
// leaves it out: its samples last seconds each.
func init() {
	Kinds = append(Kinds, Kind{"etcd", "etcd", "etcdlock.Mutex vs etcd's concurrency.Mutex on an embedded member: 1, 8, 16, 50 clients and 4 processes; not in all", false})
	kindSubject["etcd"] = "etcdlock.Mutex"
	namedOnly = append(namedOnly, "etcd")
}

// etcdChildMain serves the etcd groups' children (the member, a bench
// process) and exits if this process is one; see ChildMain.
func etcdChildMain() {
	etcdembed.ChildMain()
	etcdbench.ChildMain(etcdKinds...)
}

// etcdGrid is the client counts of the etcd group, whatever -goroutines
// says: each client is an etcd client, a lease and a connection, not a
// goroutine, and these are the counts BENCHMARKS.md compares.
var etcdGrid = []int{1, 8, 16, 50}

// etcdProcsGrid is the process counts of the etcd-procs group.
var etcdProcsGrid = []int{4}

// etcdMinDuration is the shortest etcd sample: hundreds of acquisitions a
// second, and the server's CPU clock ticks in 10 ms, so -duration's
// default (150 ms) would measure a few dozen acquisitions and a few ticks.
const etcdMinDuration = 2 * time.Second

// etcdKinds are the locks of the etcd groups, by the name a bench child
// is given.
var etcdKinds = []etcdbench.Kind{
	{Name: "etcdlock.Mutex", New: func(ctx context.Context, cli *clientv3.Client, p string) (etcdbench.Locker, error) {
		m, err := etcdlock.NewMutex(ctx, cli, p, nil)
		if err != nil {
			return nil, err
		}
		return etcdMutex{m}, nil
	}},
	etcdbench.Concurrency,
}

type etcdMutex struct{ *etcdlock.Mutex }

func (m etcdMutex) Lock(ctx context.Context) error   { return m.LockContext(ctx) }
func (m etcdMutex) Unlock(ctx context.Context) error { return m.UnlockContext(ctx) }

// etcdServer is the member of a run: started by the first sample that
// needs it, stopped when the run ends.
type etcdServer struct {
	exe    string
	start  sync.Once
	child  *etcdembed.Child
	err    error
	prefix atomic.Int64 // each sample's lock has a name of its own
}

func (s *etcdServer) get() (*etcdembed.Child, error) {
	s.start.Do(func() { s.child, s.err = etcdembed.StartChild(s.exe) })
	return s.child, s.err
}

func (s *etcdServer) close() {
	s.start.Do(func() {}) // none is started after this
	if s.child != nil {
		s.child.Close()
		s.child = nil
	}
}

// etcdGroups returns the etcd groups, sharing one member.
func etcdGroups(exe string) []Group {
	srv := &etcdServer{exe: exe}
	subjects := func(procs bool) []Subject {
		var ss []Subject
		for i := len(etcdKinds) - 1; i >= 0; i-- { // the peer first, as in every group
			k := etcdKinds[i]
			var peers []string
			if i == 0 {
				peers = []string{etcdKinds[1].Name}
			}
			ss = append(ss, Subject{Name: k.Name, Peers: peers, run: func(ctx context.Context, p Params) (Sample, error) {
				return runEtcd(ctx, srv, k, procs, p)
			}})
		}
		return ss
	}
	const title = "Locks on etcd, one embedded member (a child process), Lock/Unlock: "
	return []Group{
		{Name: "etcd", Title: title + "clients in one process", Unit: "acq", Axis: "clients", Grid: etcdGrid,
			Subjects: subjects(false), MinDuration: etcdMinDuration, close: srv.close},
		{Name: "etcd-procs", Title: title + "processes", Unit: "acq", Axis: "processes", Grid: etcdProcsGrid,
			Subjects: subjects(true), MinDuration: etcdMinDuration, Processes: true, close: srv.close},
	}
}

// runEtcd measures kind in one sample: p.Goroutines clients or processes.
// Its Waits are the hand-overs (see etcdbench), timed for every
// acquisition that waited.
func runEtcd(ctx context.Context, srv *etcdServer, kind etcdbench.Kind, procs bool, p Params) (Sample, error) {
	c, err := srv.get()
	if err != nil {
		return Sample{}, err
	}
	prefix := fmt.Sprintf("/lockword-bench/%d/%d", time.Now().UnixNano(), srv.prefix.Add(1))
	ep := etcdbench.Params{Workers: p.Goroutines, Duration: p.Duration, ServerCPU: c.CPU}
	var es etcdbench.Sample
	if procs {
		es, err = etcdbench.Procs(ctx, srv.exe, c.Endpoints(), kind, prefix, ep)
	} else {
		es, err = etcdbench.Clients(ctx, c.Endpoints(), kind, prefix, ep)
	}
	if err != nil {
		return Sample{}, err
	}
	s := Sample{Ops: es.Acquisitions, Elapsed: es.Elapsed, PerWorker: es.PerWorker, ServerCPU: es.ServerCPU,
		Waits: new(Histogram)}
	for _, h := range es.Handovers {
		s.Waits.Record(int64(h))
	}
	return s, nil
}
