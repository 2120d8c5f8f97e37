package torture

// etcd-rw across processes (-procs N): the workers of etcd_rw.go run in
// worker processes (etcd_kitprocs.go), and the supervisor kills or pauses
// them for real. -kill SIGKILLs one at random moments (-kills), half the
// time the writer or a reader inside; the victim is stopped first and the
// lock inspected, so that what it held at its death is known: a dead
// writer must be reported to the next writer (ErrOwnerDead, recorded under
// its hold), a dead reader to nobody (its key goes with its lease, and the
// writers go on). -pause SIGSTOPs the writer inside past its lease, until
// another writer has the lock, then SIGCONTs it: its guarded write must be
// refused; it alternates with a reader holding, whose write of what it
// read is still to come, stopped until its read keys have expired: that
// write must be refused too (etcd-rw-unfenced: it lands, FAIL). The owner
// slot (in etcd), the readers' double reads and the exact counter are the
// checks in every process.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdRWProcWorkers runs spec's workers in this worker process until
// stop (or their iterations); it returns their errors.
func etcdRWProcWorkers(cli *clientv3.Client, spec *etcdKitSpec, stop *atomic.Bool) []string {
	cfg := &config{value: spec.Value, etcd: etcdConfig{ttl: spec.TTL}}
	w := &etcdRWRun{cfg: cfg, cli: cli, keys: etcdKeys{spec.Data}, iters: spec.Iters, broken: spec.Broken,
		unfenced: spec.Unfenced, window: etcdRWWindow, stop: stop}
	if spec.Iters == 0 {
		w.window = etcdPauseWindow // a pause lands mid-update
	}
	var (
		mu   sync.Mutex
		errs []string
		wg   sync.WaitGroup
	)
	for _, id := range spec.IDs {
		wg.Go(func() {
			if err := w.worker(id); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("worker %d: %v", id, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	cli.Put(ctx, fmt.Sprintf("%s%d", w.keys.list("reads"), os.Getpid()), strconv.FormatInt(w.reads.Load(), 10))
	return errs
}

// etcdRWProcs is the supervisor's state of an etcd-rw run across
// processes.
type etcdRWProcs struct {
	*etcdRWRun
	k                                *etcdKitProcs
	kills, pauses                    int
	writerDeaths, readerDeaths, reps int // reps: dead writers that were repairing (their own report may be lost)
	hangs                            int
	readerPauses, pendingReads       int          // pendingReads: paused readers' writes still to come
	paused                           map[int]bool // PIDs stopped by a pause
	// liveExpiries counts leases that ended in processes never paused
	// (keep-alives starved on a loaded host): a writer holding one then
	// is dead to the lock as if killed, and its successor is told.
	liveExpiries int
}

// runProcs runs the workers in cfg.procs processes with the kills or
// pauses asked for, then fills in w's counts from etcd.
func (w *etcdRWRun) runProcs(env *etcdEnv) (*etcdRWProcs, error) {
	cfg := w.cfg
	iters := w.iters
	if cfg.kill || cfg.etcd.pause {
		iters = 0 // until the stop key
	}
	spec := etcdKitSpec{Kind: "rw", Endpoints: env.eps, Data: w.keys.data, TTL: cfg.etcd.ttl, Iters: iters, Value: cfg.value, Broken: w.broken, Unfenced: w.unfenced}
	k, err := startKitProcs(cfg, w.cli, w.keys, spec)
	if err != nil {
		return nil, err
	}
	defer k.killAll()
	p := &etcdRWProcs{etcdRWRun: w, k: k, paused: map[int]bool{}}
	kills := 0
	if cfg.kill {
		kills = etcdDefaultKills
		if cfg.etcd.killsSet {
			kills = cfg.kills
		}
	}
	for last := int64(-1); p.kills < kills && !cfg.interrupt.Interrupted(); {
		// Each kill lands in a run that works: after an addition made
		// since the last one, not on a queue of the dead.
		if !p.progressSince(&last) {
			p.hangs++
			break
		}
		time.Sleep(rand.N(etcdKillMaxGap))
		if err := p.killOne(); err != nil {
			return nil, err
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); cfg.etcd.pause && p.pauses < cfg.etcd.pauses && time.Now().Before(deadline); {
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		if p.pauses%2 == 0 {
			p.pauseReader()
		} else {
			p.pauseWriter()
		}
	}
	if kills > 0 || cfg.etcd.pause {
		if k.stop() {
			p.hangs++
		}
	} else {
		for _, wp := range k.procs {
			<-wp.done // they end after their iterations
		}
	}
	if err := p.lastWriter(); err != nil {
		return nil, err
	}
	return p, p.tally()
}

// lastWriter takes the write lock once after the workers have stopped,
// so that a writer killed after the last acquisition is reported too: to
// it, recorded as the workers record theirs.
func (p *etcdRWProcs) lastWriter() error {
	rw, err := p.newRW()
	if err != nil {
		return err
	}
	defer rw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdHangBound()+2*p.cfg.etcd.ttl)
	defer cancel()
	switch err := rw.LockContext(ctx); {
	case errors.Is(err, lockword.ErrOwnerDead):
		if err := rw.Put(ctx, fmt.Sprintf("%s%d", p.keys.list("ownerdead"), rw.Token()), "1"); err != nil {
			return err
		}
		if err := rw.MarkConsistent(); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("the last writer: %w", err)
	}
	return rw.UnlockContext(ctx)
}

// progressSince waits until the committed additions exceed *last, and
// records them there; false after etcdHangBound and a TTL without.
func (p *etcdRWProcs) progressSince(last *int64) bool {
	for start := time.Now(); time.Since(start) < etcdHangBound()+p.cfg.etcd.ttl; time.Sleep(10 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		g, err := p.cli.Get(ctx, p.keys.list("committed"), clientv3.WithPrefix())
		cancel()
		if err != nil {
			continue
		}
		var n int64
		for _, kv := range g.Kvs {
			c, _ := strconv.ParseInt(string(kv.Value), 10, 64)
			n += c
		}
		if n > *last {
			*last = n
			return true
		}
	}
	return false
}

// inside returns the lock's writer, if any, and its readers: their PIDs.
func (p *etcdRWProcs) inside() (writer int, readers []int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	info, err := etcdlock.Inspect(ctx, p.cli, p.keys.lock())
	if err != nil {
		return 0, nil, err
	}
	if (info.State == etcdlock.StateHeld || info.State == etcdlock.StateRepairing) && info.Holder != nil {
		writer = info.Holder.PID
		if info.State == etcdlock.StateRepairing {
			writer = -writer
		}
	}
	g, err := p.cli.Get(ctx, p.keys.lock()+"/readers/", clientv3.WithPrefix())
	if err != nil {
		return 0, nil, err
	}
	for _, kv := range g.Kvs {
		var h etcdlock.Holder
		if json.Unmarshal(kv.Value, &h) == nil {
			readers = append(readers, h.PID)
		}
	}
	return writer, readers, nil
}

// killOne kills a worker process, half the time one inside the lock,
// counting whether it died writing or reading.
func (p *etcdRWProcs) killOne() error {
	writer, readers, err := p.inside()
	if err != nil {
		return err
	}
	victim := -1
	if rand.IntN(2) == 0 {
		if pids := append(readers, max(writer, -writer)); len(pids) > 0 && pids[len(pids)-1] != 0 {
			victim = p.k.slotOf(pids[rand.IntN(len(pids))])
		}
	}
	if victim < 0 {
		victim = rand.IntN(len(p.k.procs))
	}
	p.k.mu.Lock()
	pid := p.k.procs[victim].cmd.Process.Pid
	p.k.mu.Unlock()
	// Stopped, it holds what it holds: the lock is read as it stands at
	// its death (assumption: the read ends within its lease).
	if err := pauseProcess(pid); err != nil {
		return err
	}
	writer, readers, err = p.inside()
	if err != nil {
		resumeProcess(pid)
		return err
	}
	if err := p.k.kill(victim); err != nil {
		return err
	}
	p.kills++
	p.stoppedWriter(pid, writer)
	for _, r := range readers {
		if r == pid {
			p.readerDeaths++
			break
		}
	}
	return nil
}

// stoppedWriter counts the writer death of worker process pid, stopped
// for good (killed, or paused past its lease), if it held the write lock
// (writer, read while it was stopped, is pid; -pid: repairing). A claim
// in flight at the stop may still commit: it looks once more, a round
// trip later (well within its lease: the record it names stays until its
// lease has expired and another writer claims).
func (p *etcdRWProcs) stoppedWriter(pid, writer int) {
	time.Sleep(100 * time.Millisecond)
	if w, _, err := p.inside(); err == nil && max(w, -w) == pid && max(writer, -writer) != pid {
		writer = w
	}
	switch {
	case writer == pid:
		p.writerDeaths++
	case writer == -pid:
		p.writerDeaths++
		p.reps++
	}
}

// pauseReader stops a worker process with a reader inside, if one holds
// with its write of what it read still to come (marked reading, not yet
// written), until its read keys have expired, then resumes it: each such
// write must be refused. A stop that catches no such reader is undone
// and not counted.
func (p *etcdRWProcs) pauseReader() {
	_, readers, err := p.inside()
	if err != nil || len(readers) == 0 {
		return
	}
	pid := readers[rand.IntN(len(readers))]
	if p.k.slotOf(pid) < 0 || pauseProcess(pid) != nil {
		return
	}
	p.paused[pid] = true
	defer resumeProcess(pid)
	// Stopped, a round trip later (what it sent has landed): its holds.
	time.Sleep(100 * time.Millisecond)
	writer, _, err := p.inside()
	if err != nil {
		return
	}
	tokens, err := p.readTokens(pid)
	if err != nil || len(p.pending(tokens)) == 0 {
		return
	}
	stopped := time.Now()
	for left, err := tokens, error(nil); err != nil || len(left) > 0; left, err = p.readTokens(pid) {
		if time.Since(stopped) > etcdHangBound()+2*p.cfg.etcd.ttl {
			return // its lease outlived the bound: not a pause past it
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.stoppedWriter(pid, writer) // its own writer, if it held, died with the lease
	p.pauses++
	p.readerPauses++
	p.pendingReads += len(p.pending(tokens))
}

// readTokens returns the tokens (create revisions) of worker process
// pid's read keys.
func (p *etcdRWProcs) readTokens(pid int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	g, err := p.cli.Get(ctx, p.keys.lock()+"/readers/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var tokens []int64
	for _, kv := range g.Kvs {
		var h etcdlock.Holder
		if json.Unmarshal(kv.Value, &h) == nil && h.PID == pid {
			tokens = append(tokens, kv.CreateRevision)
		}
	}
	return tokens, nil
}

// pending returns the read holds among tokens that have read (marked
// reading) and not yet written what they read.
func (p *etcdRWProcs) pending(tokens []int64) []int64 {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	var out []int64
	for _, t := range tokens {
		tok := strconv.FormatInt(t, 10)
		r, err := p.cli.Txn(ctx).Then(clientv3.OpGet(p.keys.list("reading")+tok, clientv3.WithCountOnly()),
			clientv3.OpGet(p.keys.list("lastread")+tok, clientv3.WithCountOnly())).Commit()
		if err == nil && r.Responses[0].GetResponseRange().Count == 1 && r.Responses[1].GetResponseRange().Count == 0 {
			out = append(out, t)
		}
	}
	return out
}

// pauseWriter stops the writer inside, if any, until its lease has
// expired and the lock has moved on, then resumes it.
func (p *etcdRWProcs) pauseWriter() {
	writer, _, err := p.inside()
	if err != nil || writer <= 0 || p.k.slotOf(writer) < 0 || pauseProcess(writer) != nil {
		return
	}
	p.paused[writer] = true
	// It may have unlocked before the signal landed: look again, stopped.
	if now, _, err := p.inside(); err != nil || now != writer {
		resumeProcess(writer)
		return
	}
	stopped := time.Now()
	for time.Since(stopped) < etcdHangBound()+2*p.cfg.etcd.ttl {
		time.Sleep(50 * time.Millisecond)
		if now, _, err := p.inside(); err == nil && now != writer && now != 0 && time.Since(stopped) > p.cfg.etcd.ttl {
			break // another writer holds: the paused one's lease is gone
		}
	}
	resumeProcess(writer)
	p.pauses++
	p.writerDeaths++ // to the lock, a writer whose lease expired holding is dead
}

// tally reads the counts the worker processes wrote to etcd.
func (p *etcdRWProcs) tally() error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	count := func(what string) (int64, error) {
		g, err := p.cli.Get(ctx, p.keys.list(what), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return g.Count, nil
	}
	for what, c := range map[string]*atomic.Int64{"readviolation": &p.readViolations, "writeviolation": &p.writerViolations,
		"ownerdead": &p.deaths, "rejected": &p.rejected, "lostread": &p.lostReads,
		"readrejected": &p.readRejected, "latereadwrite": &p.lateReadWrites, "readgaveup": &p.readsGaveUp} {
		n, err := count(what)
		if err != nil {
			return err
		}
		c.Store(n)
	}
	lost, err := p.cli.Get(ctx, p.keys.list("leaselost"), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	for _, kv := range lost.Kvs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), p.keys.list("leaselost")), "-")
		if n, err := strconv.Atoi(pid); err == nil && !p.paused[n] {
			p.liveExpiries++
		}
	}
	g, err := p.cli.Get(ctx, p.keys.list("reads"), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	for _, kv := range g.Kvs {
		n, _ := strconv.ParseInt(string(kv.Value), 10, 64)
		p.reads.Add(n)
	}
	return nil
}

// report adds the run's processes, deaths and pauses to rep, and its
// checks. A run until the stop key expects value × the committed
// additions; reads are those of the processes that were not killed.
func (p *etcdRWProcs) report(rep *etcdReport) {
	if p.cfg.kill || p.cfg.etcd.pause {
		rep.base.expected = p.cfg.value * rep.base.total()
	}
	rep.extra.Pauses = p.pauses
	if p.cfg.etcd.pause {
		rep.lines = append(rep.lines, fmt.Sprintf("Reads whose hold ended under them (paused past the lease): %d", p.lostReads.Load()),
			fmt.Sprintf("Readers paused holding: %d, with %d writes to come; readers' late writes refused: %d, landed: %d",
				p.readerPauses, p.pendingReads, p.readRejected.Load(), p.lateReadWrites.Load()))
	}
	if p.cfg.kill || p.cfg.etcd.pause {
		rep.lines = append(rep.lines, fmt.Sprintf("Reads given up after 3 TTLs waiting for a writer's repair: %d", p.readsGaveUp.Load()))
	}
	if p.liveExpiries > 0 {
		rep.lines = append(rep.lines, fmt.Sprintf("Leases that expired in live processes never paused (keep-alives starved): %d", p.liveExpiries))
	}
	rep.extra.LateRejects = int(p.rejected.Load())
	rep.extra.Hangs += p.hangs
	if p.cfg.kill {
		rep.lines = append(rep.lines, fmt.Sprintf("Processes: %d; SIGKILLed: %d, of them %d writing (%d repairing) and %d reading",
			p.cfg.procs, p.kills, p.writerDeaths, p.reps, p.readerDeaths))
	}
	rep.checks = p.failures
}

// failures are the checks only a run across processes makes: every dead
// writer reported to one next writer (a writer that died repairing may
// take the report it got along), no dead reader reported, the pauses
// made, no hang.
func (p *etcdRWProcs) failures() []string {
	var why []string
	if d := int(p.deaths.Load()); d > p.writerDeaths+p.liveExpiries || d < p.writerDeaths-p.reps {
		why = append(why, fmt.Sprintf("%d owner deaths reported to writers, want %d (the writers killed or paused inside; %d of them repairing; and up to %d more: leases that expired in live processes)",
			d, p.writerDeaths, p.reps, p.liveExpiries))
	}
	if p.cfg.etcd.pause && p.pauses < p.cfg.etcd.pauses {
		why = append(why, fmt.Sprintf("%d of %d pauses made", p.pauses, p.cfg.etcd.pauses))
	}
	if n := p.lateReadWrites.Load(); n > 0 {
		why = append(why, fmt.Sprintf("%d readers' writes landed after their read hold had ended", n))
	}
	if n := int(p.readRejected.Load()); !p.unfenced && n < p.pendingReads {
		why = append(why, fmt.Sprintf("%d paused readers' late writes refused, want %d", n, p.pendingReads))
	}
	if p.hangs > 0 {
		why = append(why, fmt.Sprintf("%d hangs", p.hangs))
	}
	return append(why, p.k.errors()...)
}
