package torture

// etcd-semaphore across processes (-procs N, -kill): the workers of
// kinds_etcdsem.go run in worker processes (etcd_kitprocs.go), and
// holders die for real: the supervisor SIGKILLs a worker process, half
// the time one that holds permits. What a victim held is read from its
// hold records (P/holds/, which outlive its lease) while it is stopped,
// just before the kill, so that it cannot change; the recoverers write
// each ErrOwnerDead report to etcd as it comes. The permits reported back
// must equal the permits the victims held, and the dead holders reported
// the victims' holds, exactly once; the owner slots must show no
// over-grant.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// overGrant counts an over-grant; in a worker process it also goes to
// etcd at once, since a killed process reports nothing at its end.
func (run *etcdSemRun) overGrant() {
	run.bad.Add(1)
	if run.stop != nil {
		run.event("violation", "1")
	}
}

// event records what a worker process saw under P/<what>/.
func (run *etcdSemRun) event(what, val string) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	key := fmt.Sprintf("%s/%s/%d-%08x", run.data, what, time.Now().UnixNano(), rand.Uint32())
	if _, err := run.cli.Put(ctx, key, val); err != nil {
		run.fail(fmt.Errorf("recording a %s: %w", what, err))
	}
}

// etcdSemProcWorkers runs spec's workers in this worker process until
// stop; it returns their errors.
func etcdSemProcWorkers(cli *clientv3.Client, spec *etcdKitSpec, stop *atomic.Bool) []string {
	r := &etcdSemReport{}
	run := newEtcdSemRun(cli, spec.Data, spec.Permits, spec.TTL, r)
	run.stop = stop
	var wg sync.WaitGroup
	for _, id := range spec.IDs {
		wg.Go(func() { run.worker(id, 0) })
	}
	wg.Wait()
	if r.errorsSeen > 0 {
		return []string{fmt.Sprintf("%d errors, the first: %s", r.errorsSeen, r.firstError)}
	}
	return nil
}

// tortureEtcdSemProcs is an etcd semaphore run across processes.
func tortureEtcdSemProcs(cfg *config, name string, permits int) (report, error) {
	env, err := startEtcdEnv(cfg)
	if err != nil {
		return nil, err
	}
	defer env.close()
	r := &etcdSemReport{semReport: semReport{lock: name, workers: cfg.workers}, endpoints: env.endpoints, procs: cfg.procs}
	run := newEtcdSemRun(env.cli, env.keys.data, permits, cfg.etcd.ttl, r)
	spec := etcdKitSpec{Kind: "semaphore", Endpoints: env.eps, Data: env.keys.data, TTL: cfg.etcd.ttl, Permits: permits}
	start := time.Now()
	k, err := startKitProcs(cfg, env.cli, env.keys, spec)
	if err != nil {
		return nil, err
	}
	defer k.killAll()
	kills := 0
	if cfg.kill {
		kills = etcdDefaultKills
		if cfg.etcd.killsSet {
			kills = cfg.kills
		}
	}
	for r.kills < kills && !cfg.interrupt.Interrupted() {
		time.Sleep(rand.N(etcdKillMaxGap))
		if err := run.killOne(k); err != nil {
			return nil, err
		}
	}
	if kills == 0 {
		time.Sleep(2 * time.Second) // a run without deaths: the workers work a while
	}
	if k.stop() {
		r.hangs++
	}
	for _, e := range k.errors() {
		run.fail(fmt.Errorf("%s", e))
	}
	if err := run.collect(); err != nil { // the reports no worker got
		run.fail(err)
	}
	if err := run.readEvents(); err != nil {
		run.fail(err)
	}
	r.elapsed = time.Since(start)
	r.violations = run.bad.Load()
	return r, nil
}

// killOne kills a worker process, half the time one that holds permits,
// counting what its hold records show it held.
func (run *etcdSemRun) killOne(k *etcdKitProcs) error {
	holds, err := run.holds()
	if err != nil {
		return err
	}
	victim := -1
	if rand.IntN(2) == 0 && len(holds) > 0 {
		victim = k.slotOf(holds[rand.IntN(len(holds))].PID)
	}
	if victim < 0 {
		victim = rand.IntN(len(k.procs))
	}
	k.mu.Lock()
	pid := k.procs[victim].cmd.Process.Pid
	k.mu.Unlock()
	// Stopped, it can neither take nor release permits: its hold records
	// are read as they stand at its death. The assumption: the read ends
	// before its lease expires (at least two thirds of a TTL after its
	// last keep-alive), after which a successor could take a record first.
	if err := pauseProcess(pid); err != nil {
		return err
	}
	holds, err = run.holds()
	if err != nil {
		resumeProcess(pid)
		return err
	}
	if err := k.kill(victim); err != nil {
		return err
	}
	run.r.kills++
	for _, h := range holds {
		if h.PID == pid {
			run.r.deaths++
			run.r.lostPermits += int64(h.N)
		}
	}
	return nil
}

// semHold is the part of a hold record the checks read.
type semHold struct {
	PID int `json:"pid"`
	N   int `json:"n"`
}

// holds returns the semaphore's hold records.
func (run *etcdSemRun) holds() ([]semHold, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	g, err := run.cli.Get(ctx, run.lock+"/holds/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []semHold
	for _, kv := range g.Kvs {
		var h semHold
		if json.Unmarshal(kv.Value, &h) == nil {
			out = append(out, h)
		}
	}
	return out, nil
}

// readEvents adds the worker processes' reports to the run's counts.
func (run *etcdSemRun) readEvents() error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	g, err := run.cli.Txn(ctx).Then(
		clientv3.OpGet(run.data+"/recovered/", clientv3.WithPrefix()),
		clientv3.OpGet(run.data+"/violation/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return err
	}
	for _, kv := range g.Responses[0].GetResponseRange().Kvs {
		dead, permits, _ := strings.Cut(string(kv.Value), ":")
		d, _ := strconv.Atoi(dead)
		n, _ := strconv.Atoi(permits)
		run.r.reports += int64(d)
		run.r.recovered += int64(n)
	}
	run.bad.Add(g.Responses[1].GetResponseRange().Count)
	return nil
}

// procsFailures are the checks of a run across processes.
func (r *etcdSemReport) procsFailures() []string {
	var why []string
	if r.recovered != r.lostPermits || r.reports != r.deaths {
		why = append(why, fmt.Sprintf("%d permits of %d dead holders reported recovered by ErrOwnerDead, want %d of %d", r.recovered, r.reports, r.lostPermits, r.deaths))
	}
	if r.hangs > 0 {
		why = append(why, fmt.Sprintf("%d hangs", r.hangs))
	}
	if r.errorsSeen > 0 {
		why = append(why, fmt.Sprintf("%d worker errors, the first: %s", r.errorsSeen, r.firstError))
	}
	return why
}
