package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/lockword/lockword"
	"golang.org/x/sync/semaphore"
)

// A Kind is a name -kinds accepts: one lockword subject, measured with the
// peers of its group.
type Kind struct {
	Name  string // for -kinds
	Group string
	Desc  string
	// Procs marks kinds that run across processes: left out of "all"
	// unless asked for.
	Procs bool
}

// Kinds lists the -kinds names in table order.
var Kinds = []Kind{
	{"mutex", "mutex", "lockword.Mutex vs sync.Mutex", false},
	{"spin", "mutex", "lockword.SpinMutex vs sync.Mutex", false},
	{"ticket", "mutex", "lockword.TicketMutex vs sync.Mutex", false},
	{"rw", "rw", "lockword.RWMutex vs sync.RWMutex at -read", false},
	{"ring", "ring", "lockword.Ring Push/Pop vs a buffered channel, one item at a time", false},
	{"ring-batch", "ring", fmt.Sprintf("lockword.Ring PushSlice/PopSlice vs a channel of [%d]uint64, %d items a batch", ringBatch, ringBatch), false},
	{"queue", "queue", fmt.Sprintf("lockword.Queue vs a buffered channel and xsync's MPMCQueue, capacity %d, 1 and 4 consumers", queueCapacity), false},
	{"semaphore", "semaphore", fmt.Sprintf("lockword.Semaphore vs x/sync's semaphore.Weighted, %d permits, Acquire(1)/Release(1)", semPermits), false},
	{"shared", "shared", "shm.Mutex vs flock(2) on a kept fd and gofrs/flock, and a one-permit shm.Semaphore vs POSIX sem_t too, 2 and 4 processes", true},
}

// semPermits is the semaphore group's capacity: a pool of 4 (connections,
// GPU jobs), so that 1 and 2 goroutines never wait and 16 and 64 queue.
const semPermits = 4

// kindSubject maps a kind name to its subject's display name.
var kindSubject = map[string]string{
	"mutex": "Mutex", "spin": "SpinMutex", "ticket": "TicketMutex", "rw": "RWMutex",
	"ring": "Ring", "ring-batch": "Ring batch", "queue": "Queue", "semaphore": "Semaphore", "shared": "shm.Mutex",
}

// namedOnly are the kinds that "all" leaves out (etcd: see etcd.go).
var namedOnly []string

// ParseKinds parses a comma-separated list of kind names, or "all" (every
// in-process kind, and the cross-process ones too if procs).
func ParseKinds(s string, procs bool) ([]string, error) {
	var names []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "all":
			for _, k := range Kinds {
				if (!k.Procs || procs) && !slices.Contains(namedOnly, k.Name) {
					names = append(names, k.Name)
				}
			}
		case kindSubject[f] != "":
			names = append(names, f)
		case f == "":
		default:
			var all []string
			for _, k := range Kinds {
				all = append(all, k.Name)
			}
			return nil, fmt.Errorf("unknown kind %q (kinds: %s, all)", f, strings.Join(all, ", "))
		}
	}
	if procs && !slices.Contains(names, "shared") {
		names = append(names, "shared")
	}
	if len(names) == 0 {
		return nil, ErrNoKinds
	}
	if (slices.Contains(names, "shared") || slices.Contains(names, "shared-queue")) && runtime.GOOS != "linux" {
		return nil, errNoProcs
	}
	return names, nil
}

// DefaultGrid is the goroutine counts measured by default: 1 (uncontended),
// 2, 4, 16 and 64, and on machines with more than 4 CPUs also the CPU
// count and 4 times it, so that a big machine is driven past its cores.
func DefaultGrid() []int {
	grid := []int{1, 2, 4, 16, 64}
	if n := runtime.NumCPU(); n > 4 {
		grid = append(grid, n, 4*n)
	}
	slices.Sort(grid)
	return slices.Compact(grid)
}

// procsGrid is the process counts of the shared group.
var procsGrid = []int{2, 4}

// Groups returns the groups that measure kinds: each group holds its
// peers and the selected kinds of it, in Kinds order. grid is the
// goroutine counts of the lock groups; exe is the binary re-executed for
// the cross-process kinds (see ChildMain).
func Groups(kinds []string, grid []int, exe string) []Group {
	want := func(k string) bool { return slices.Contains(kinds, k) }
	var gs []Group
	var mutex []Subject
	for _, k := range []struct {
		name string
		new  func() Locker
	}{
		{"mutex", func() Locker { return new(lockword.Mutex) }},
		{"spin", func() Locker { return new(lockword.SpinMutex) }},
		{"ticket", func() Locker { return new(lockword.TicketMutex) }},
	} {
		if want(k.name) {
			mutex = append(mutex, LockerSubject(kindSubject[k.name], []string{"sync.Mutex"}, k.new))
		}
	}
	if len(mutex) > 0 {
		peer := LockerSubject("sync.Mutex", nil, func() Locker { return new(sync.Mutex) })
		gs = append(gs, Group{Name: "mutex", Title: "Exclusive locks: Lock/Unlock", Unit: "acq", Axis: "goroutines",
			Grid: grid, Subjects: append([]Subject{peer}, mutex...)})
	}
	if want("rw") {
		gs = append(gs, Group{Name: "rw", Title: "Reader-writer locks", Unit: "acq", Axis: "goroutines", Grid: grid,
			Subjects: []Subject{
				RWSubject("sync.RWMutex", nil, func() RWLocker { return new(sync.RWMutex) }),
				RWSubject("RWMutex", []string{"sync.RWMutex"}, func() RWLocker { return new(lockword.RWMutex) }),
			}})
	}
	var ring []Subject
	if want("ring") {
		ring = append(ring, queueSubject("chan", nil, chanQueue), queueSubject("Ring", []string{"chan", "xsync SPSCQueue"}, ringQueue))
	}
	if want("ring-batch") {
		name := fmt.Sprintf("chan [%d]", ringBatch)
		ring = append(ring, queueSubject(name, nil, chanBatchQueue), queueSubject("Ring batch", []string{name}, ringBatchQueue))
	}
	if want("ring") {
		// Last, so that the peers before it keep their chart colours.
		ring = append(ring, queueSubject("xsync SPSCQueue", nil, xsyncQueue))
	}
	if len(ring) > 0 {
		gs = append(gs, Group{Name: "ring", Title: fmt.Sprintf("SPSC queues, capacity %d", ringCapacity), Unit: "items",
			Axis: "goroutines", Grid: []int{2}, Subjects: ring, ChartX: "a producer and a consumer goroutine"})
	}
	if want("queue") {
		gs = append(gs, queueGroups()...)
	}
	if want("semaphore") {
		gs = append(gs, Group{Name: "semaphore", Title: fmt.Sprintf("Semaphores, %d permits: Acquire(1)/Release(1)", semPermits),
			Unit: "acq", Axis: "goroutines", Grid: grid, Subjects: []Subject{
				LockerSubject("x/sync Weighted", nil, func() Locker { return weightedLocker{semaphore.NewWeighted(semPermits)} }),
				LockerSubject("Semaphore", []string{"x/sync Weighted"}, func() Locker { return lockword.NewSemaphore(semPermits) }),
			}})
	}
	if want("shared") {
		g := Group{Name: "shared", Title: "Cross-process locks", Unit: "acq", Axis: "processes", Grid: procsGrid,
			Subjects: procsSubjects(exe), Processes: true}
		addSemt(&g)
		gs = append(gs, g)
	}
	if want("shared-queue") {
		gs = append(gs, sharedQueueGroups(exe)...)
	}
	if want("etcd") {
		gs = append(gs, etcdGroups(exe)...)
	}
	return gs
}

// weightedLocker takes and gives back one permit of x/sync's semaphore,
// the peer of Semaphore's Lock and Unlock.
type weightedLocker struct{ s *semaphore.Weighted }

func (w weightedLocker) Lock()   { w.s.Acquire(context.Background(), 1) }
func (w weightedLocker) Unlock() { w.s.Release(1) }

// LockerSubject measures a fresh lock from newLock in each sample.
func LockerSubject(name string, peers []string, newLock func() Locker) Subject {
	return Subject{Name: name, Peers: peers, run: func(ctx context.Context, p Params) (Sample, error) {
		return runLocker(ctx, newLock(), p)
	}}
}

// RWSubject measures a fresh reader-writer lock in each sample.
func RWSubject(name string, peers []string, newLock func() RWLocker) Subject {
	return Subject{Name: name, Peers: peers, run: func(ctx context.Context, p Params) (Sample, error) {
		return runRW(ctx, newLock(), p)
	}}
}

func queueSubject(name string, peers []string, newQueue func() queue) Subject {
	return Subject{Name: name, Peers: peers, run: func(ctx context.Context, p Params) (Sample, error) {
		return runQueue(ctx, newQueue(), p)
	}}
}
