package torture

// Worker processes of the etcd toolkit kinds (etcd-election, etcd-rw,
// etcd-semaphore and their twins) with -procs N: the supervisor spawns
// them (this binary re-executed, its orders in etcdKitWorkerEnv), lets
// them go once every worker is ready, kills, pauses and replaces them,
// and stops them through etcd. A worker process runs the kind's worker
// goroutines, the same code as the in-process run, until the stop key
// appears; what the checks need it writes to etcd as it happens, since a
// killed process reports nothing at its end.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const etcdKitWorkerEnv = "LOCKWORD_TORTURE_ETCDKIT_WORKER"

// etcdKitSpec tells a worker process of a toolkit kind what to run; it
// travels as JSON in etcdKitWorkerEnv.
type etcdKitSpec struct {
	Kind      string        `json:"kind"` // "election", "rw" or "semaphore"
	Endpoints []string      `json:"endpoints"`
	Data      string        `json:"data"`
	IDs       []int         `json:"ids"`
	TTL       time.Duration `json:"ttl"`
	Iters     int64         `json:"iters"`
	Value     int64         `json:"value"`
	Fenced    bool          `json:"fenced"`   // etcd-election
	Broken    bool          `json:"broken"`   // etcd-rw-broken
	Unfenced  bool          `json:"unfenced"` // etcd-rw-unfenced
	Permits   int           `json:"permits"`  // etcd-semaphore
}

// etcdKitProcs are a toolkit run's worker processes, as the supervisor
// sees them.
type etcdKitProcs struct {
	cfg  *config
	cli  *clientv3.Client
	keys etcdKeys
	spec etcdKitSpec
	exe  string

	mu     sync.Mutex
	procs  []*workerProc
	killed map[int]bool // PIDs the supervisor killed: their exit is no error
}

// startKitProcs spawns cfg.procs worker processes running spec for
// cfg.workers worker ids, waits until every worker is ready, and lets
// them go.
func startKitProcs(cfg *config, cli *clientv3.Client, keys etcdKeys, spec etcdKitSpec) (*etcdKitProcs, error) {
	exe, err := workerExe()
	if err != nil {
		return nil, err
	}
	k := &etcdKitProcs{cfg: cfg, cli: cli, keys: keys, spec: spec, exe: exe, killed: map[int]bool{}}
	for _, ids := range spreadIDs(cfg.workers, cfg.procs) {
		w, err := k.spawn(ids)
		if err != nil {
			k.killAll()
			return nil, err
		}
		k.procs = append(k.procs, w)
	}
	ready := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		defer cancel()
		g, err := cli.Get(ctx, keys.list("ready"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && g.Count >= int64(cfg.workers)
	}
	if err := awaitAttach(k.procs, ready, 5*time.Millisecond, nil, "worker process", "the workers",
		"the etcd workers did not start within a minute"); err != nil {
		k.killAll()
		return nil, err
	}
	if err := k.put(keys.start(), "1"); err != nil {
		k.killAll()
		return nil, err
	}
	return k, nil
}

func (k *etcdKitProcs) spawn(ids []int) (*workerProc, error) {
	s := k.spec
	s.IDs = ids
	return spawnEtcdWorker(k.exe, etcdKitWorkerEnv, s, ids)
}

func (k *etcdKitProcs) put(key, val string) error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	_, err := k.cli.Put(ctx, key, val)
	return err
}

// slotOf returns the index of the live worker process with PID pid, or -1.
func (k *etcdKitProcs) slotOf(pid int) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, w := range k.procs {
		if w.cmd.Process.Pid == pid && !exited(w) {
			return i
		}
	}
	return -1
}

// kill SIGKILLs the worker process in slot i and starts a replacement
// running the same ids.
func (k *etcdKitProcs) kill(i int) error {
	k.mu.Lock()
	w := k.procs[i]
	k.killed[w.cmd.Process.Pid] = true
	k.mu.Unlock()
	w.cmd.Process.Kill()
	<-w.done
	nw, err := k.spawn(w.ids)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.procs[i] = nw
	k.mu.Unlock()
	return nil
}

// stop writes the stop key and waits for every worker process to exit,
// for up to etcdHangBound and the TTL; it kills the rest and reports
// whether any had to be killed (a hang).
func (k *etcdKitProcs) stop() (hung bool) {
	k.put(k.keys.stop(), "1")
	deadline := time.After(etcdHangBound() + k.spec.TTL)
	k.mu.Lock()
	procs := append([]*workerProc(nil), k.procs...)
	k.mu.Unlock()
	for _, w := range procs {
		select {
		case <-w.done:
		case <-deadline:
			hung = true
			k.killAll()
		}
	}
	return hung
}

func (k *etcdKitProcs) killAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.procs {
		if !exited(w) {
			k.killed[w.cmd.Process.Pid] = true
		}
	}
	killWorkers(k.procs)
}

// errors returns the failures of the worker processes the supervisor
// did not kill: a non-zero exit, with what it printed.
func (k *etcdKitProcs) errors() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, w := range k.procs {
		if w.err != nil && !k.killed[w.cmd.Process.Pid] {
			out = append(out, fmt.Sprintf("PID %d: %v: %s", w.cmd.Process.Pid, w.err, strings.TrimSpace(w.output())))
		}
	}
	return out
}

// etcdKitWorkerMain is a worker process of a toolkit kind: it marks its
// workers ready, waits for the go key, and runs them until they end or
// the stop key appears. Their errors go to standard error, and make the
// exit status exitFail.
func etcdKitWorkerMain(specJSON string) int {
	var spec etcdKitSpec
	cli, status := etcdWorkerStart(specJSON, &spec, &spec.Endpoints)
	if cli == nil {
		return status
	}
	defer cli.Close()
	keys := etcdKeys{spec.Data}
	var stop atomic.Bool
	if err := kitAwaitGo(cli, keys, spec.IDs, &stop); err != nil {
		fmt.Fprintln(os.Stderr, "lockword torture etcd worker:", err)
		return exitFail
	}
	var errs []string
	switch spec.Kind {
	case "election":
		errs = electionProcWorkers(cli, &spec, &stop)
	case "rw":
		errs = etcdRWProcWorkers(cli, &spec, &stop)
	case "semaphore":
		errs = etcdSemProcWorkers(cli, &spec, &stop)
	default:
		errs = []string{"unknown kind " + spec.Kind}
	}
	for _, e := range errs {
		fmt.Fprintf(os.Stderr, "lockword torture etcd worker %d: %s\n", os.Getpid(), e)
	}
	if len(errs) > 0 {
		return exitFail
	}
	return exitOK
}

// kitAwaitGo marks ids ready, waits for the go key, and starts a
// goroutine that sets stop when the stop key appears.
func kitAwaitGo(cli *clientv3.Client, keys etcdKeys, ids []int, stop *atomic.Bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), attachTimeout)
	defer cancel()
	for _, id := range ids {
		if _, err := cli.Put(ctx, keys.ready(id)+fmt.Sprintf("-%d", os.Getpid()), "1"); err != nil {
			return err
		}
	}
	for {
		g, err := cli.Get(ctx, keys.start())
		if err != nil {
			return err
		}
		if len(g.Kvs) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	go func() {
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
			g, err := cli.Get(ctx, keys.stop())
			cancel()
			if err == nil && len(g.Kvs) > 0 {
				stop.Store(true)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return nil
}
