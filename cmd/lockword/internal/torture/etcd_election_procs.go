package torture

// etcd-election across processes (-procs N): the campaigners run in
// worker processes (etcd_kitprocs.go), and the supervisor deposes every
// electionDeposeEvery'th term's leader for real: -kill SIGKILLs the
// leader's process (a replacement takes its ids), -pause SIGSTOPs it
// until its lease has expired and its successor leads, then SIGCONTs it,
// so that it resumes believing it leads and goes on writing. With -kill
// alone every other deposition revokes the leader's lease instead (what a
// partition does): a killed leader writes nothing late, and the unfenced
// twin must still show a deposed leader's write landing. The checks are
// the in-process run's, read back from etcd, with the observers in the
// supervisor.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// electionDefaultKills is the leader kills of an etcd-election -kill run
// without -kills: each costs about a TTL of failover.
const electionDefaultKills = 6

// electionProcWorkers runs spec's campaigners in this worker process
// until stop; it returns their errors.
func electionProcWorkers(cli *clientv3.Client, spec *etcdKitSpec, stop *atomic.Bool) []string {
	cfg := &config{etcd: etcdConfig{ttl: spec.TTL}}
	r := &electionRun{cfg: cfg, cli: cli, data: spec.Data, fenced: spec.Fenced, target: math.MaxInt64, window: etcdPauseWindow}
	go func() {
		for !stop.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		r.stop.Store(true)
	}()
	var wg sync.WaitGroup
	for _, id := range spec.IDs {
		wg.Go(func() { r.worker(id) })
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs
}

// runProcs runs the campaigners in cfg.procs processes and deposes
// leaders until the kills and pauses asked for are done.
func (r *electionRun) runProcs(env *etcdEnv) error {
	cfg := r.cfg
	spec := etcdKitSpec{Kind: "election", Endpoints: env.eps, Data: r.data, TTL: cfg.etcd.ttl, Fenced: r.fenced}
	k, err := startKitProcs(cfg, r.cli, env.keys, spec)
	if err != nil {
		return err
	}
	defer k.killAll()
	r.x.Processes = cfg.procs
	kills, pauses := 0, 0
	if cfg.kill {
		kills = electionDefaultKills
		if cfg.etcd.killsSet {
			kills = cfg.kills
		}
	}
	if cfg.etcd.pause {
		pauses = cfg.etcd.pauses
	}
	var ways []string // the deposition methods, in turn
	if kills > 0 {
		ways = append(ways, "kill")
	}
	if pauses > 0 {
		ways = append(ways, "pause")
	}
	if pauses == 0 {
		ways = append(ways, "revoke")
	}
	var seen, seenTerms int64
	lastAt := time.Now()
	for n := 0; r.x.Kills < kills || r.x.Pauses < pauses || (kills == 0 && pauses == 0 && seenTerms < r.target); {
		if time.Since(lastAt) > etcdHangBound()+cfg.etcd.ttl {
			r.x.Hangs++
			break
		}
		if cfg.interrupt.Interrupted() {
			break
		}
		time.Sleep(5 * time.Millisecond)
		t, err := r.leader()
		if err != nil || t.Token <= seen {
			continue
		}
		seen, lastAt = t.Token, time.Now()
		if seenTerms++; seenTerms%electionDeposeEvery != 1 {
			continue
		}
		way := ways[n%len(ways)]
		if (way == "kill" && r.x.Kills >= kills) || (way == "pause" && r.x.Pauses >= pauses) {
			n++
			continue
		}
		// Mid-term: a leader writes electionWrites records, one per
		// window.
		time.Sleep(rand.N(electionWrites * r.window / 2))
		if now, err := r.leader(); err != nil || now.Token != t.Token {
			continue // resigned meanwhile: the next term
		}
		if err := r.depose(k, way, t); err != nil {
			return err
		}
		n++
		lastAt = time.Now()
	}
	if k.stop() {
		r.x.Hangs++
	}
	r.mu.Lock()
	r.errs = append(r.errs, k.errors()...)
	r.mu.Unlock()
	return nil
}

func (r *electionRun) leader() (etcdlock.Term, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	return etcdlock.Leader(ctx, r.cli, r.election())
}

// depose ends term t's leader's term by way: "kill", "pause" or
// "revoke".
func (r *electionRun) depose(k *etcdKitProcs, way string, t etcdlock.Term) error {
	if way == "revoke" {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		defer cancel()
		if _, err := r.cli.Revoke(ctx, clientv3.LeaseID(t.Leader.Lease)); err == nil {
			r.x.Depositions++
		}
		return nil
	}
	i := k.slotOf(t.Leader.PID)
	if i < 0 || t.Leader.PID == os.Getpid() {
		return nil // not one of ours (or gone): the next term
	}
	if way == "kill" {
		if err := k.kill(i); err != nil {
			return err
		}
		r.x.Kills++
		r.x.Depositions++
		return nil
	}
	if err := pauseProcess(t.Leader.PID); err != nil {
		return fmt.Errorf("pausing the leader: %w", err)
	}
	// It may have resigned before the signal landed: look again, stopped.
	if now, err := r.leader(); err != nil || now.Token != t.Token {
		resumeProcess(t.Leader.PID)
		return nil
	}
	// Stopped until its lease has expired and a successor leads: when
	// it resumes, it still believes it leads, mid-term.
	err := r.awaitSuccessor(t)
	resumeProcess(t.Leader.PID)
	r.x.Pauses++
	r.x.Depositions++
	return err
}

// awaitSuccessor waits until term t's lease has expired and a later term
// has begun, for up to etcdHangBound and two TTLs.
func (r *electionRun) awaitSuccessor(t etcdlock.Term) error {
	bound := etcdHangBound() + 2*r.cfg.etcd.ttl
	for start := time.Now(); time.Since(start) < bound; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		ttl, err := r.cli.TimeToLive(ctx, clientv3.LeaseID(t.Leader.Lease))
		cancel()
		if err != nil || ttl.TTL > 0 {
			continue
		}
		if now, err := r.leader(); err == nil && now.Token > t.Token {
			return nil
		} else if err != nil && !errors.Is(err, etcdlock.ErrNoLeader) {
			continue
		}
	}
	r.x.Hangs++
	return nil
}
