package torture

// The etcd kinds' disturbances (etcd.go): the kill loop (-kill), the pause
// loop (-pause: SIGSTOP of the holder past its lease TTL) and the leader
// stop of etcd-cluster.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lockword/lockword/etcdlock"
)

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
			if time.Since(lastAt) > etcdHangBound() {
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
	bound := etcdHangBound()
	go r.cluster.Stop(lead) // its listeners take a while to close; the others elect meanwhile
	for time.Since(t0) < bound {
		if l := r.cluster.Leader(); l >= 0 && l != lead {
			r.extra.LeaderStop = fmt.Sprintf("member m%d stopped after %d additions; m%d elected in %v", lead, n, l, time.Since(t0).Round(time.Millisecond))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.extra.LeaderStop = fmt.Sprintf("member m%d stopped after %d additions; no new leader within %v", lead, n, bound.Round(time.Second))
	r.extra.Hangs++
}

// -chaos: the slow link's delay, and the member stops: every
// etcdChaosStopGap a random member stops for etcdChaosStopFor, then
// restarts (one at a time: the cluster keeps its quorum, but the stopped
// member's clients lose their connections mid-request).
const (
	etcdChaosDelay   = 200 * time.Millisecond
	etcdChaosStopGap = 1500 * time.Millisecond
	etcdChaosStopFor = time.Second
)

// startMemberStops starts stopping and restarting members; the function
// it returns ends that and waits until every member runs again.
func (r *etcdRun) startMemberStops() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	var errs []string
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(etcdChaosStopGap):
			}
			i := rand.IntN(3)
			if r.cluster.Stop(i) != nil {
				continue
			}
			r.extra.MemberStops++
			select {
			case <-quit:
			case <-time.After(etcdChaosStopFor):
			}
			if err := r.cluster.Restart(i); err != nil {
				errs = append(errs, err.Error())
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		r.extra.Errors = append(r.extra.Errors, errs...)
	}
}

// countPhantoms looks at the lock once every worker's Mutex is closed
// (Close waits for its clean-up) and the slow link has delivered what it
// carried: a hold record or a queue key left is a phantom holder, a
// call's write that outlived it.
func (r *etcdRun) countPhantoms() {
	time.Sleep(2 * etcdChaosDelay)
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	info, err := etcdlock.Peek(ctx, r.cli, r.keys.lock())
	if err != nil {
		r.extra.Errors = append(r.extra.Errors, fmt.Sprintf("reading the lock after the run: %v", err))
		return
	}
	if info.State != etcdlock.StateFree {
		r.extra.PhantomHolders++
	}
	r.extra.PhantomHolders += len(info.Waiters)
}
