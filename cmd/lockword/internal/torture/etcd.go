package torture

// The supervisor of the etcd kinds (kinds_etcd.go): the server, the
// workers (goroutines, or processes with -procs), the kill, pause and
// leader-stop loops, and the report.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/internal/etcdembed"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type etcdResponseOp = pb.ResponseOp

// etcdRun is one etcd kind's run in progress.
type etcdRun struct {
	cfg     *config
	name    string
	cli     *clientv3.Client
	wcli    *clientv3.Client // the in-process workers': cli, or with -chaos one that also reaches the slow link
	keys    etcdKeys
	spec    etcdWorkerSpec
	cluster *etcdembed.Cluster // nil with -etcd
	exe     string

	mu    sync.Mutex
	procs []*workerProc // -procs: the live process of each slot
	local struct {      // in-process: the goroutines
		wg    sync.WaitGroup
		stats etcdWorkerStats
		errs  []string
	}

	committed atomic.Int64 // Σ committed, as last polled
	extra     etcdExtra
	// -kill: when each victim was killed, and which died holding.
	killedAt    map[int]time.Time
	heldAtDeath map[int]bool
}

func tortureEtcd(cfg *config, name string, fenced, cluster bool) (report, error) {
	ec := cfg.etcd
	r := &etcdRun{cfg: cfg, name: name}
	eps := ec.endpoints
	stopLeader := cluster
	cluster = cluster || ec.chaos
	switch {
	case cluster && len(eps) > 0:
		return nil, errors.New("etcd-cluster starts its own three-member cluster (it stops its leader): do not give -etcd")
	case cluster || len(eps) == 0:
		members := 1
		if cluster {
			members = 3
		}
		c, err := etcdembed.Start(members)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		r.cluster, eps = c, c.Endpoints()
		r.extra.Endpoints = fmt.Sprintf("embedded, %d member(s) on %s", members, strings.Join(eps, ","))
	default:
		r.extra.Endpoints = strings.Join(eps, ",")
	}
	cli, err := newEtcdClient(eps)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	r.cli, r.wcli = cli, cli
	if ec.chaos {
		closeLink, err := r.slowLink(eps)
		if err != nil {
			return nil, err
		}
		defer closeLink()
	}
	r.keys = etcdKeys{fmt.Sprintf("%s%d-%08x", EtcdDataRoot, os.Getpid(), rand.Uint32())}
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	_, err = cli.Get(ctx, r.keys.start()) // fail early, clearly, if etcd is unreachable
	cancel()
	if err != nil {
		return nil, fmt.Errorf("etcd at %s: %w", strings.Join(eps, ","), err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		defer cancel()
		cli.Delete(ctx, r.keys.data+"/", clientv3.WithPrefix()) // a real cluster keeps nothing of ours
	}()

	workers := cfg.workers
	iters := cfg.iters
	if !ec.itersSet {
		iters = etcdDefaultIters
	}
	if cfg.kill || ec.pause || cfg.timed() {
		iters = 0 // until the stop key
	}
	r.spec = etcdWorkerSpec{Endpoints: eps, Data: r.keys.data, Iters: iters, Value: cfg.value, Work: cfg.work,
		Fenced: fenced, TTL: ec.ttl, Chaos: ec.chaos, BreakRepair: os.Getenv(breakRepairEnv) != ""}
	if cfg.kill {
		r.spec.Jitter = etcdKillWindow
	}
	if ec.pause {
		r.spec.Window = etcdPauseWindow
	}
	r.extra.TTLSeconds = ec.ttl.Seconds()

	if cfg.procs > 0 {
		if r.exe, err = workerExe(); err != nil {
			return nil, err
		}
	}
	defer r.killAll()
	if err := r.startWorkers(workers); err != nil {
		return nil, err
	}
	if err := r.release(workers); err != nil {
		return nil, err
	}
	released := time.Now()

	prog := startProgress(cfg.progress, runProgress(cfg, name, released, int64(workers)*iters, r.committed.Load, ""))
	var kr *killReport
	switch {
	case cfg.kill:
		kr = r.killLoop(released)
	case ec.pause:
		r.pauseLoop()
	case stopLeader && !ec.chaos:
		r.stopLeader(int64(workers) * iters / 3)
	}
	stopChaos := func() {}
	if ec.chaos {
		stopChaos = r.startMemberStops()
	}
	if cfg.kill || ec.pause || cfg.timed() {
		for cfg.timed() && time.Since(released) < cfg.duration && !cfg.interrupt.Interrupted() {
			time.Sleep(10 * time.Millisecond)
		}
		r.put(r.keys.stop(), "1")
	}
	r.waitWorkers()
	elapsed := time.Since(released)
	stopChaos()
	if ec.chaos {
		r.countPhantoms()
	}
	prog.stop()
	return r.report(workers, elapsed, kr)
}

// slowLink starts the -chaos slow link to the first member and the
// workers' client, which reaches it as well as every member.
func (r *etcdRun) slowLink(eps []string) (closeLink func(), err error) {
	link, err := etcdembed.NewProxy(eps[0])
	if err != nil {
		return nil, err
	}
	link.SetDelay(etcdChaosDelay)
	if r.wcli, err = newEtcdClient(append(slices.Clone(eps), link.Addr())); err != nil {
		link.Close()
		return nil, err
	}
	r.extra.Chaos = true
	r.extra.SlowEndpoint = fmt.Sprintf("%s (+%v, to %s)", link.Addr(), etcdChaosDelay, eps[0])
	return func() { r.wcli.Close(); link.Close() }, nil
}

// put writes key = val for the supervisor, retrying briefly.
func (r *etcdRun) put(key, val string) error {
	var err error
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		_, err = r.cli.Put(ctx, key, val)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// startWorkers starts the workers: goroutines, or cfg.procs processes.
func (r *etcdRun) startWorkers(workers int) error {
	if r.cfg.procs == 0 {
		for id := 1; id <= workers; id++ {
			r.local.wg.Go(func() {
				s := r.spec
				s.IDs = []int{id}
				st, err := runEtcdWorkers(r.wcli, &s)
				r.mu.Lock()
				defer r.mu.Unlock()
				r.local.stats.add(st)
				if err != nil {
					r.local.errs = append(r.local.errs, err.Error())
				}
			})
		}
		return nil
	}
	r.procs = make([]*workerProc, r.cfg.procs)
	for p, ids := range spreadIDs(workers, r.cfg.procs) {
		w, err := r.spawn(ids)
		if err != nil {
			return err
		}
		r.procs[p] = w
	}
	return nil
}

// spawn starts a worker process running ids.
func (r *etcdRun) spawn(ids []int) (*workerProc, error) {
	s := r.spec
	s.IDs = ids
	return spawnEtcdWorker(r.exe, etcdWorkerEnv, s, ids)
}

// spawnEtcdWorker starts exe as a worker process running ids, its spec
// passed as JSON in the environment variable env.
func spawnEtcdWorker(exe, env string, spec any, ids []int) (*workerProc, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env+"="+string(js))
	return startWorker(cmd, ids, nil, false)
}

// release waits until every worker has its Mutex, then lets them go.
func (r *etcdRun) release(workers int) error {
	ready := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		g, err := r.cli.Get(ctx, r.keys.list("ready"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		return err == nil && g.Count == int64(workers)
	}
	if err := awaitAttach(r.procs, ready, 5*time.Millisecond, nil,
		"worker process", "the workers", "the etcd workers did not start within a minute"); err != nil {
		return err
	}
	return r.put(r.keys.start(), "1")
}

// poll reads Σ committed into r.committed.
func (r *etcdRun) poll() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	g, err := r.cli.Get(ctx, r.keys.list("committed"), clientv3.WithPrefix())
	if err != nil {
		return r.committed.Load(), err
	}
	var n int64
	for _, kv := range g.Kvs {
		c, _ := strconv.ParseInt(string(kv.Value), 10, 64)
		n += c
	}
	r.committed.Store(n)
	return n, nil
}

// waitWorkers waits for every worker to finish, polling progress; no
// progress for etcdHangBound (and the TTL) is a hang, and the workers are killed.
func (r *etcdRun) waitWorkers() {
	done := make(chan struct{})
	go func() {
		if r.cfg.procs == 0 {
			r.local.wg.Wait()
		} else {
			for _, w := range r.procs {
				<-w.done
			}
		}
		close(done)
	}()
	last, lastAt := int64(-1), time.Now()
	for {
		select {
		case <-done:
			r.poll()
			r.collect()
			return
		case <-time.After(50 * time.Millisecond):
		}
		if n, err := r.poll(); err == nil && n != last {
			last, lastAt = n, time.Now()
		}
		if r.cfg.interrupt.Interrupted() {
			r.put(r.keys.stop(), "1")
		}
		if bound := etcdHangBound() + r.spec.TTL; time.Since(lastAt) > bound {
			r.extra.Hangs++
			r.extra.Errors = append(r.extra.Errors, fmt.Sprintf("no progress for %v", bound.Round(time.Second)))
			if r.cfg.procs == 0 {
				// Goroutines cannot be killed: their requests time out
				// within etcdHangBound.
				r.put(r.keys.stop(), "1")
				<-done
			} else {
				r.killAll()
				<-done
			}
			r.poll()
			r.collect()
			return
		}
	}
}

// collect gathers the worker processes' exit reports.
func (r *etcdRun) collect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.extra.Errors = append(r.extra.Errors, r.local.errs...)
	st := r.local.stats
	for _, w := range r.procs {
		if w.err != nil {
			r.extra.Errors = append(r.extra.Errors, fmt.Sprintf("PID %d: %v: %s", w.cmd.Process.Pid, w.err, strings.TrimSpace(w.out.String())))
			continue
		}
		var s etcdWorkerStats
		if json.Unmarshal(bytes.TrimSpace(w.out.Bytes()), &s) == nil {
			st.add(s)
		}
	}
	r.extra.Acquisitions = st.Acquisitions
	r.extra.LeasesLost = st.LeasesLost
	r.extra.Cancelled = st.Cancelled
	r.local.stats = st
}

// killAll kills every worker process still running.
func (r *etcdRun) killAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	killWorkers(r.procs)
}

// etcdHangBound is how long an etcd run may go without progress (and a
// worker's request keep failing) before it counts as a hang: hangTimeout
// on a host with a core free for each runnable thread, scaled up by the
// host's load per core (the 1-minute load average over the CPU count, at
// most etcdHangScaleMax times). The assumption it states: on a host with
// load L on C cores every thread, the server's included, runs about C/L
// of the time, so a wait that takes 10 s on an idle host takes about L/C
// times that; a hang (a lost wake-up, a stranded key) never ends, and is
// still reported, later. Off Linux (no /proc/loadavg) it is hangTimeout.
func etcdHangBound() time.Duration {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return hangTimeout
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return hangTimeout
	}
	load, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return hangTimeout
	}
	return etcdHangFor(load, runtime.NumCPU())
}

// etcdHangFor is etcdHangBound at a load average of load on cpus CPUs.
func etcdHangFor(load float64, cpus int) time.Duration {
	scale := min(max(load/float64(cpus), 1), etcdHangScaleMax)
	return time.Duration(float64(hangTimeout) * scale)
}

// etcdHangScaleMax caps etcdHangBound's scaling: 6 × hangTimeout, a
// minute, at load 12 per core and above.
const etcdHangScaleMax = 6
