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

	"go.etcd.io/etcd/api/v3/mvccpb"
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

// record writes an ErrOwnerDead report (dead holders, permits) under
// P/recovered/<token of the acquisition that got it>.
func (run *etcdSemRun) record(token int64, dead, permits int) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	if _, err := run.cli.Put(ctx, fmt.Sprintf("%s/recovered/%d", run.data, token), fmt.Sprintf("%d:%d", dead, permits)); err != nil {
		run.fail(fmt.Errorf("recording an owner-death report: %w", err))
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

// etcdHistory returns every event under prefix/ after startRev, in commit
// order, up to an end marker it writes.
func etcdHistory(cli *clientv3.Client, prefix string, startRev int64) ([]*clientv3.Event, error) {
	end := prefix + "/end"
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	if _, err := cli.Put(ctx, end, "1"); err != nil {
		return nil, err
	}
	var events []*clientv3.Event
	for wr := range cli.Watch(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(startRev+1)) {
		if err := wr.Err(); err != nil {
			return nil, err
		}
		for _, ev := range wr.Events {
			if string(ev.Kv.Key) == end {
				return events, nil
			}
			events = append(events, ev)
		}
	}
	return nil, fmt.Errorf("the watch ended before the end marker: %v", ctx.Err())
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
	run.stop, run.killedPIDs = new(atomic.Bool), map[int]bool{} // the last acquirer records as the workers do
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
	if err := run.readEvents(env.startRev); err != nil {
		run.fail(err)
	}
	r.elapsed = time.Since(start)
	r.violations = run.bad.Load()
	return r, nil
}

// killOne kills a worker process, half the time one that holds permits,
// (what it held is read from etcd's history at the end: readEvents).
func (run *etcdSemRun) killOne(k *etcdKitProcs) error {
	victim := -1
	// A holder: holds are brief and most workers wait, so look for one
	// for up to half a TTL.
	holder := rand.IntN(2) == 0
	for look := time.Now(); holder && victim < 0 && time.Since(look) < run.ttl/2; time.Sleep(5 * time.Millisecond) {
		holds, err := run.holds()
		if err != nil {
			return err
		}
		if len(holds) > 0 {
			victim = k.slotOf(holds[rand.IntN(len(holds))].PID)
		}
	}
	if victim < 0 {
		victim = rand.IntN(len(k.procs))
	}
	k.mu.Lock()
	pid := k.procs[victim].cmd.Process.Pid
	k.mu.Unlock()
	// What it held is read from the history at the end (readEvents): a
	// request in flight at its death may still commit.
	if err := k.kill(victim); err != nil {
		return err
	}
	run.killedPIDs[pid] = true
	run.r.kills++
	return nil
}

// semHold is the part of a hold record the checks read.
type semHold struct {
	PID   int   `json:"pid"`
	N     int   `json:"n"`
	Token int64 `json:"token"`
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

// readEvents checks the reports against the history of the hold
// records since startRev. A claim (one transaction) writes the claimer's
// hold record and deletes the records of the dead holders it is told
// of; a Release deletes its record with its queue key, writing none. So
// a hold record deleted in a revision that writes another is a death
// reported: it must be a killed process's, and reported once; the
// acquisition that wrote the other must have recorded that report, with
// the same dead holders and permits, unless it was killed itself before
// it could. Every record of a killed process must be reported by the end
// (a last acquirer of every permit ran). It also counts the over-grants
// the workers recorded.
func (run *etcdSemRun) readEvents(startRev int64) error {
	events, err := etcdHistory(run.cli, run.data, startRev)
	if err != nil {
		return err
	}
	holds := run.lock + "/holds/"
	puts := map[int64][]semHold{} // hold records written, by revision
	for _, ev := range events {
		var h semHold
		if ev.Type == mvccpb.PUT && strings.HasPrefix(string(ev.Kv.Key), holds) && json.Unmarshal(ev.Kv.Value, &h) == nil {
			puts[ev.Kv.ModRevision] = append(puts[ev.Kv.ModRevision], h)
		}
	}
	type told struct{ dead, permits int }
	want := map[int64]told{} // by the token of the acquisition told
	consumer := map[int64]int{}
	last := map[string]semHold{} // each hold record as last written
	run.r.deaths, run.r.lostPermits = 0, 0
	for _, ev := range events {
		key := string(ev.Kv.Key)
		if !strings.HasPrefix(key, holds) {
			continue
		}
		if ev.Type == mvccpb.PUT {
			var h semHold
			json.Unmarshal(ev.Kv.Value, &h)
			last[key] = h
			continue
		}
		claim := puts[ev.Kv.ModRevision]
		dead := last[key]
		delete(last, key)
		if len(claim) != 1 {
			continue // a Release (or a failed attempt's clean-up)
		}
		if !run.killedPIDs[dead.PID] {
			run.fail(fmt.Errorf("the hold record %s of PID %d, never killed, was reported dead (token %d)", key, dead.PID, claim[0].Token))
			continue
		}
		run.r.deaths++
		run.r.lostPermits += int64(dead.N)
		t := want[claim[0].Token]
		want[claim[0].Token] = told{t.dead + 1, t.permits + dead.N}
		consumer[claim[0].Token] = claim[0].PID
	}
	for key, h := range last {
		if run.killedPIDs[h.PID] {
			run.fail(fmt.Errorf("the hold record %s of killed PID %d was never reported", key, h.PID))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	g, err := run.cli.Txn(ctx).Then(
		clientv3.OpGet(run.data+"/recovered/", clientv3.WithPrefix()),
		clientv3.OpGet(run.data+"/violation/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return err
	}
	got := map[int64]told{}
	for _, kv := range g.Responses[0].GetResponseRange().Kvs {
		tok, _ := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), run.data+"/recovered/"), 10, 64)
		dead, permits, _ := strings.Cut(string(kv.Value), ":")
		d, _ := strconv.Atoi(dead)
		n, _ := strconv.Atoi(permits)
		got[tok] = told{d, n}
		run.r.reports += int64(d)
		run.r.recovered += int64(n)
	}
	for tok, w := range want {
		switch g, ok := got[tok]; {
		case !ok && run.killedPIDs[consumer[tok]]:
			run.r.lostWithRecoverer += int64(w.dead) // told, then killed before it could record
			run.r.lostPermitsWithRecoverer += int64(w.permits)
		case g != w:
			run.fail(fmt.Errorf("the acquisition with token %d was told of %d dead holders and %d permits, want %d and %d", tok, g.dead, g.permits, w.dead, w.permits))
		}
	}
	for tok := range got {
		if _, ok := want[tok]; !ok {
			run.fail(fmt.Errorf("the acquisition with token %d reported owner deaths of no killed holder", tok))
		}
	}
	run.bad.Add(g.Responses[1].GetResponseRange().Count)
	return nil
}

// procsFailures are the checks of a run across processes.
func (r *etcdSemReport) procsFailures() []string {
	var why []string
	if r.recovered+r.lostPermitsWithRecoverer != r.lostPermits || r.reports+r.lostWithRecoverer != r.deaths {
		why = append(why, fmt.Sprintf("%d permits of %d dead holders reported recovered by ErrOwnerDead (and %d of %d told to recoverers killed before they recorded it), want %d of %d",
			r.recovered, r.reports, r.lostPermitsWithRecoverer, r.lostWithRecoverer, r.lostPermits, r.deaths))
	}
	if r.hangs > 0 {
		why = append(why, fmt.Sprintf("%d hangs", r.hangs))
	}
	if r.errorsSeen > 0 {
		why = append(why, fmt.Sprintf("%d worker errors, the first: %s", r.errorsSeen, r.firstError))
	}
	return why
}
