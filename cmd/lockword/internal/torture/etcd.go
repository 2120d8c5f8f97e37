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
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/etcdlock"
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

// etcdExtra is what an etcd kind's report adds to the standard one.
type etcdExtra struct {
	Endpoints   string  `json:"endpoints"`
	TTLSeconds  float64 `json:"ttl_s"`
	Pauses      int     `json:"pauses,omitempty"`
	LateRejects int     `json:"late_writes_rejected"`
	LeasesLost  int     `json:"leases_lost"`
	LeaderStop  string  `json:"leader_stop,omitempty"`
	Hangs       int     `json:"hangs"`
	Recoveries  int     `json:"recoveries"`
	// LiveExpiries counts -kill recoveries from live workers whose lease
	// had expired (recorded by them): not kills, not robberies.
	LiveExpiries int      `json:"live_lease_expiries"`
	Errors       []string `json:"errors,omitempty"`
	Violations   []string `json:"violations,omitempty"`
	Acquisitions uint64   `json:"acquisitions"`
}

func tortureEtcd(cfg *config, name string, fenced, cluster bool) (report, error) {
	ec := cfg.etcd
	r := &etcdRun{cfg: cfg, name: name}
	eps := ec.endpoints
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
	r.cli = cli
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
		Fenced: fenced, TTL: ec.ttl, BreakRepair: os.Getenv(breakRepairEnv) != ""}
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
	case cluster:
		r.stopLeader(int64(workers) * iters / 3)
	}
	if cfg.kill || ec.pause || cfg.timed() {
		for cfg.timed() && time.Since(released) < cfg.duration && !cfg.interrupt.Interrupted() {
			time.Sleep(10 * time.Millisecond)
		}
		r.put(r.keys.stop(), "1")
	}
	r.waitWorkers()
	elapsed := time.Since(released)
	prog.stop()
	return r.report(workers, elapsed, kr)
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
				st, err := runEtcdWorkers(r.cli, &s)
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
	js, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.exe)
	cmd.Env = append(os.Environ(), etcdWorkerEnv+"="+string(js))
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
		"worker process", "the etcd workers did not start within a minute"); err != nil {
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
// progress for hangTimeout is a hang, and the workers are killed.
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
		if time.Since(lastAt) > hangTimeout+r.spec.TTL {
			r.extra.Hangs++
			r.extra.Errors = append(r.extra.Errors, fmt.Sprintf("no progress for %v", hangTimeout+r.spec.TTL))
			if r.cfg.procs == 0 {
				// Goroutines cannot be killed: their requests time out
				// within hangTimeout.
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
	r.local.stats = st
}

// killAll kills every worker process still running.
func (r *etcdRun) killAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	killWorkers(r.procs)
}

// holderSlot returns the index of the process whose PID holds the lock
// now (per the hold record), or -1.
func (r *etcdRun) holderSlot(states ...string) (int, int) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	info, err := etcdlock.Peek(ctx, r.cli, r.keys.lock())
	if err != nil || info.Holder == nil {
		return -1, 0
	}
	ok := false
	for _, s := range states {
		ok = ok || info.State == s
	}
	if !ok {
		return -1, 0
	}
	for i, w := range r.procs {
		if w.cmd.Process.Pid == info.Holder.PID {
			return i, info.Holder.PID
		}
	}
	return -1, info.Holder.PID
}

// killLoop SIGKILLs a worker process at random moments, half the time the
// holder, and starts a replacement with the same worker ids. A victim
// that the hold record names just after its death died holding: its
// death must be recovered exactly once.
func (r *etcdRun) killLoop(start time.Time) *killReport {
	kr := &killReport{killed: map[int]bool{}}
	killedAt := map[int]time.Time{}
	heldAtDeath := map[int]bool{}
	kills := etcdDefaultKills
	if r.cfg.etcd.killsSet {
		kills = r.cfg.kills
	}
	last, lastAt := int64(-1), time.Now()
	for kr.Kills < kills && (!r.cfg.timed() || time.Since(start) < r.cfg.duration) && !r.cfg.interrupt.Interrupted() {
		// Wait for progress since the last kill, then a random moment:
		// every kill then lands in a run that works, not on a queue of
		// the dead still waiting for their leases to expire.
		for {
			n, err := r.poll()
			if err == nil && n != last {
				last, lastAt = n, time.Now()
				break
			}
			if time.Since(lastAt) > hangTimeout {
				kr.Hangs++
				return kr
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(rand.N(etcdKillMaxGap))
		victim := rand.IntN(len(r.procs))
		if rand.IntN(2) == 0 {
			// The holder: a hold lasts a few round trips, and a killed
			// waiter's key blocks the queue until its lease expires, so
			// look for one for up to two TTLs.
			for look := time.Now(); time.Since(look) < 2*r.spec.TTL; {
				if i, _ := r.holderSlot(etcdlock.StateHeld, etcdlock.StateRepairing); i >= 0 {
					victim = i
					break
				}
			}
		}
		w := r.procs[victim]
		pid := w.cmd.Process.Pid
		if exited(w) {
			kr.WorkerErrors = append(kr.WorkerErrors, fmt.Sprintf("PID %d exited by itself: %v: %s", pid, w.err, strings.TrimSpace(w.out.String())))
			return kr
		}
		w.cmd.Process.Kill()
		<-w.done
		kr.Kills++
		kr.killed[pid] = true
		killedAt[pid] = time.Now()
		if _, hp := r.holderSlot(etcdlock.StateHeld, etcdlock.StateRepairing, etcdlock.StateOwnerDead); hp == pid {
			heldAtDeath[pid] = true
		}
		nw, err := r.spawn(w.ids)
		if err != nil {
			kr.WorkerErrors = append(kr.WorkerErrors, err.Error())
			return kr
		}
		r.mu.Lock()
		r.procs[victim] = nw
		r.mu.Unlock()
		// The next kill waits for an addition made after this one, so it
		// cannot hit the recovery of this death before it is recorded.
		if n, err := r.poll(); err == nil {
			last, lastAt = n, time.Now()
		}
	}
	// The recoveries are read at the end (report), when the last
	// victim's has happened.
	r.killedAt, r.heldAtDeath = killedAt, heldAtDeath
	return kr
}

// pauseLoop stops the holder for longer than its lease (until another
// worker has committed an addition, so the lock really moved on), then
// lets it go on.
func (r *etcdRun) pauseLoop() {
	pauses := r.cfg.etcd.pauses
	for deadline := time.Now().Add(2 * time.Minute); r.extra.Pauses < pauses && !r.cfg.interrupt.Interrupted(); {
		if time.Now().After(deadline) {
			r.extra.Errors = append(r.extra.Errors, fmt.Sprintf("only %d of %d pauses found a holder to stop within 2 minutes", r.extra.Pauses, pauses))
			return
		}
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		i, pid := r.holderSlot(etcdlock.StateHeld, etcdlock.StateRepairing)
		if i < 0 {
			continue
		}
		if err := pauseProcess(pid); err != nil {
			continue
		}
		before, _ := r.poll()
		stopped := time.Now()
		for time.Since(stopped) < hangTimeout {
			time.Sleep(50 * time.Millisecond)
			n, _ := r.poll()
			if time.Since(stopped) > r.spec.TTL+time.Second && n > before {
				break
			}
		}
		resumeProcess(pid)
		r.extra.Pauses++
	}
}

// stopLeader stops the cluster's leader once at committed additions have
// been made, and times the election of the next.
func (r *etcdRun) stopLeader(at int64) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n, _ := r.poll(); n >= at {
			break
		}
	}
	lead := r.cluster.Leader()
	if lead < 0 {
		r.extra.LeaderStop = "no leader known: nothing stopped"
		return
	}
	n := r.committed.Load()
	t0 := time.Now()
	go r.cluster.Stop(lead) // its listeners take a while to close; the others elect meanwhile
	for time.Since(t0) < hangTimeout {
		if l := r.cluster.Leader(); l >= 0 && l != lead {
			r.extra.LeaderStop = fmt.Sprintf("member m%d stopped after %d additions; m%d elected in %v", lead, n, l, time.Since(t0).Round(time.Millisecond))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.extra.LeaderStop = fmt.Sprintf("member m%d stopped after %d additions; no new leader within %v", lead, n, hangTimeout)
	r.extra.Hangs++
}

// report reads the outcome from etcd and builds the report.
func (r *etcdRun) report(workers int, elapsed time.Duration, kr *killReport) (report, error) {
	k := r.keys
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(k.counter()),
		clientv3.OpGet(k.list("committed"), clientv3.WithPrefix()),
		clientv3.OpGet(k.list(evRecovery), clientv3.WithPrefix()),
		clientv3.OpGet(k.list(evViolation), clientv3.WithPrefix()),
		clientv3.OpGet(k.list(evRejected), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(k.list(evLeaseLost), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("reading the outcome from etcd: %w", err)
	}
	cfg := r.cfg
	per := make([]int64, workers)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		id, _ := strconv.Atoi(strings.TrimPrefix(string(kv.Key), k.list("committed")))
		if id >= 1 && id <= workers {
			per[id-1], _ = strconv.ParseInt(string(kv.Value), 10, 64)
		}
	}
	base := newReport(cfg, r.name, hammerRun{perWorker: per, elapsed: elapsed})
	if cfg.kill || cfg.etcd.pause || cfg.timed() {
		base.iters, base.duration = 0, max(elapsed.Round(time.Millisecond), time.Millisecond)
	} else {
		base.iters = r.spec.Iters
	}
	base.procs = cfg.procs
	base.actual = kvInt(resp.Responses[0])
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		r.extra.Violations = append(r.extra.Violations, string(kv.Value))
	}
	base.ownerViolations = int64(len(r.extra.Violations))
	r.extra.LateRejects = int(resp.Responses[4].GetResponseRange().Count)
	if st := r.local.stats; st.Acquisitions > 0 {
		f := float64(st.SlowPath) / float64(st.Acquisitions)
		base.slowPath = &f
	} else {
		base.noStats = "no worker lived to report its Mutex statistics"
	}

	var recs []etcdRecovery
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		var ev etcdRecovery
		if json.Unmarshal(kv.Value, &ev) == nil {
			recs = append(recs, ev)
		}
	}
	r.extra.Recoveries = len(recs)
	if kr != nil {
		kr.Recoveries = int64(len(recs))
		seen := map[int]bool{}
		held := r.heldAtDeath
		expired := map[int]bool{}
		for _, kv := range resp.Responses[5].GetResponseRange().Kvs {
			pid, _ := strconv.Atoi(string(kv.Value))
			expired[pid] = true
		}
		for _, ev := range recs {
			switch {
			case !kr.killed[ev.DeadPID] && expired[ev.DeadPID]:
				// A live worker whose lease expired (keep-alives starved):
				// its successor was right to take over, and told.
				r.extra.LiveExpiries++
				kr.Recoveries--
			case !kr.killed[ev.DeadPID]:
				kr.Robbed = append(kr.Robbed, ev.DeadPID)
			case seen[ev.DeadPID]:
				r.extra.Errors = append(r.extra.Errors, fmt.Sprintf("the death of PID %d was recovered twice", ev.DeadPID))
			default:
				held[ev.DeadPID] = true
				at := r.killedAt[ev.DeadPID]
				det := time.Unix(0, ev.DetectedNs).Sub(at)
				kr.detections = append(kr.detections, det)
				kr.MaxDetectionMs = max(kr.MaxDetectionMs, float64(det)/1e6)
				if ev.RepairedNs != 0 {
					rep := time.Unix(0, ev.RepairedNs).Sub(at)
					kr.repairs = append(kr.repairs, rep)
					kr.MaxRecoveryMs = max(kr.MaxRecoveryMs, float64(rep)/1e6)
				}
			}
			seen[ev.DeadPID] = true
		}
		kr.HolderKills = len(held)
		sort.Ints(kr.Robbed)
		base.killed = kr
	}
	return &etcdReport{base: base, extra: r.extra, cfg: cfg}, nil
}

// etcdReport is the standard report of the counter experiment with the
// etcd kinds' lines added, and throughput in acquisitions per second.
type etcdReport struct {
	base  *counterReport
	extra etcdExtra
	cfg   *config
}

func (e *etcdReport) failures() []string {
	why := e.base.failures()
	if e.extra.Hangs > 0 {
		why = append(why, fmt.Sprintf("%d hangs", e.extra.Hangs))
	}
	for _, s := range e.extra.Errors {
		why = append(why, "worker failed: "+s)
	}
	if e.cfg.etcd.pause && e.extra.Pauses < e.cfg.etcd.pauses {
		why = append(why, fmt.Sprintf("%d of %d pauses made", e.extra.Pauses, e.cfg.etcd.pauses))
	}
	return why
}

func (e *etcdReport) passed() bool { return len(e.failures()) == 0 }

func (e *etcdReport) writeText(w io.Writer) {
	var buf bytes.Buffer
	e.base.writeText(&buf)
	for line := range strings.SplitAfterSeq(buf.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "Throughput: "):
			fmt.Fprintf(w, "Throughput: %.0f acquisitions/s\n", float64(e.base.total())/e.base.elapsed.Seconds())
			continue
		case strings.HasPrefix(line, "Recoveries: "):
			fmt.Fprintf(w, "Recoveries: %d (each found counter = value × committed: an update is one transaction, nothing to roll back)\n", e.base.killed.Recoveries)
			continue
		case strings.HasPrefix(line, "Result: "):
			e.writeExtra(w)
			if why := e.failures(); len(why) > 0 {
				fmt.Fprintf(w, "Result: FAIL (%s)\n", strings.Join(why, "; "))
				continue
			}
		}
		io.WriteString(w, line)
	}
}

func (e *etcdReport) writeExtra(w io.Writer) {
	x := e.extra
	fmt.Fprintf(w, "etcd: %s; lease TTL %v\n", x.Endpoints, time.Duration(x.TTLSeconds*float64(time.Second)))
	if e.base.killed == nil {
		fmt.Fprintf(w, "Owner deaths recovered: %d\n", x.Recoveries)
	}
	if e.cfg.etcd.pause {
		fmt.Fprintf(w, "Pauses: %d (SIGSTOP of the holder past its TTL)\n", x.Pauses)
	}
	fmt.Fprintf(w, "Late writes rejected by the fence: %d; leases lost: %d\n", x.LateRejects, x.LeasesLost)
	if x.LiveExpiries > 0 {
		fmt.Fprintf(w, "Recoveries from live workers whose lease expired (not counted above): %d\n", x.LiveExpiries)
	}
	if x.LeaderStop != "" {
		fmt.Fprintf(w, "Leader stop: %s\n", x.LeaderStop)
	}
	if e.base.killed == nil {
		fmt.Fprintf(w, "Hangs: %d\n", x.Hangs)
	}
	for i, v := range x.Violations {
		if i == 5 {
			fmt.Fprintf(w, "  ... %d more\n", len(x.Violations)-i)
			break
		}
		fmt.Fprintf(w, "  violation: %s\n", v)
	}
}

func (e *etcdReport) writeJSON(w io.Writer) error {
	var buf bytes.Buffer
	if err := e.base.writeJSON(&buf); err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		return err
	}
	m["etcd"] = e.extra
	m["result"] = "PASS"
	if f := e.failures(); len(f) > 0 {
		m["result"], m["failures"] = "FAIL", f
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
