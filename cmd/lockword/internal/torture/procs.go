package torture

// torture -procs N: the classic experiment with the workers spread over N
// processes (this binary, re-executed) that share one region file, with the
// counter, the owner slot and the accounting in the region. With -kill a
// supervisor SIGKILLs workers at random, often the lock's holder, and
// starts replacements; every update is guarded by an intent record, so the
// recovering acquirer (told by ErrOwnerDead) rolls a half-done update back,
// and at the end the counter must equal the sum of every worker's committed
// additions, exactly.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/shm"
)

const (
	defaultKills = 200
	// hangTimeout: a run that makes no progress this long, or a recovery
	// that does not happen within it, counts as a hang.
	hangTimeout = 10 * time.Second
	// killMaxGap is the most the supervisor waits between kills.
	killMaxGap = 8 * time.Millisecond
	// holderWait bounds how long the supervisor waits for a worker to
	// enter the critical section when it aims a kill at the holder:
	// longer than a dead waiter's turn takes to be skipped (the
	// ownerCheckInterval of 10 ms, and a wake-up on a loaded host).
	holderWait = 250 * time.Millisecond
	// killWindowSteps of busy work sit between the counter's update and
	// the worker's committed total in -kill runs: a kill of the holder
	// then usually lands mid-update, the case the intent record is for.
	killWindowSteps = 2000

	workerEnv      = "LOCKWORD_TORTURE_WORKER"
	breakRepairEnv = "LOCKWORD_TORTURE_BREAK_REPAIR" // tests only: skip the rollback
	lockName       = "torture"
	stateName      = "torture-state"
)

func init() {
	register(
		kind{name: "shared", procs: true, inAll: true,
			desc: "shm.Mutex in a region shared by -procs processes (robust: see -kill)",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared", false) }},
		kind{name: "shared-ticket", procs: true,
			desc: "shm.TicketMutex in a region shared by -procs processes (robust, FIFO: see -kill)",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-ticket", false) }},
		kind{name: "shared-rw", procs: true,
			desc: "shm.RWMutex, readers and writers, in a region shared by -procs processes (robust: see -kill)",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-rw", false) }},
		kind{name: "shared-none", procs: true,
			desc: "no lock, across -procs processes sharing the region: must FAIL",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-none", true) }},
	)
}

// tortureRegion creates the region of a -procs run: in an anonymous memory
// file (shm.CreateMemfd), which the worker processes inherit as fd 3
// (workerFiles) and which vanishes with the last of them, so that nothing
// is left behind, even when the supervisor is killed with SIGKILL (its
// workers then die too: workerAttr). Where memfds are not available it
// falls back to a file under regionDir, removed by cleanup. name labels
// it (in /proc/PID/fd, or as the file name).
func tortureRegion(name string, size int64) (r *shm.Region, cleanup func(), err error) {
	label := fmt.Sprintf("%s-%d-%08x", name, os.Getpid(), rand.Uint32())
	if r, err = shm.CreateMemfd(label, size, nil); err == nil {
		return r, func() { r.Close() }, nil
	}
	path := filepath.Join(regionDir(), label)
	if r, err = shm.Create(path, size, nil); err != nil {
		return nil, nil, err
	}
	return r, func() { r.Close(); os.Remove(path) }, nil
}

// workerFiles are the files a worker process of r's run inherits: the
// region's, as fd 3, when it has no path (a memfd).
func workerFiles(r *shm.Region) []*os.File {
	if strings.HasPrefix(r.Path(), memfdPrefix) {
		return []*os.File{r.File()}
	}
	return nil
}

// memfdPrefix starts the Path of a region in a memfd.
const memfdPrefix = "memfd:"

// openTortureRegion is a worker's open of its run's region: the inherited
// fd 3 for a memfd region (path "memfd:..."), else the file at path.
func openTortureRegion(path string) (*shm.Region, error) {
	if strings.HasPrefix(path, memfdPrefix) {
		return shm.OpenFile(os.NewFile(3, path), nil)
	}
	return shm.Open(path, nil)
}

// regionDir is where torture puts its region: /dev/shm when it exists.
func regionDir() string {
	if st, err := os.Stat(shm.DefaultRegionDir); err == nil && st.IsDir() {
		return shm.DefaultRegionDir
	}
	return os.TempDir()
}

// tortureProcs runs one multi-process torture: the supervisor.
func tortureProcs(cfg *config, name string, unprotected bool) (report, error) {
	exe, err := workerExe()
	if err != nil {
		return nil, err
	}
	size := int64(1<<20 + stateSize(cfg.procs, cfg.workers))
	r, cleanup, err := tortureRegion("lockword-torture", size)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	path := r.Path()
	m, err := openProcLock(r, name)
	if err != nil {
		return nil, err
	}
	m.SetStuckThreshold(hangTimeout / 2)
	if !unprotected && !fastReads(cfg, name) {
		m.EnableStats()
	}
	st, err := r.Bytes(stateName, stateSize(cfg.procs, cfg.workers))
	if err != nil {
		return nil, err
	}

	rd, err := openReaders(r, name, cfg.workers)
	if err != nil {
		return nil, err
	}

	spec := workerSpec{Region: path, Kind: name, Procs: cfg.procs, Workers: cfg.workers, Value: cfg.value,
		Work: cfg.work, Unprotected: unprotected, Kill: cfg.kill, BreakRepair: os.Getenv(breakRepairEnv) != "",
		BreakReaders: rd != nil && os.Getenv(breakReadersEnv) != ""}
	if !cfg.kill && !cfg.timed() {
		spec.Iters = cfg.iters
	}
	spawn := func(proc int, ids []int) (*workerProc, error) {
		s := spec
		s.Proc, s.IDs = proc, ids
		cmd, err := procWorkerCommand(exe, s) // this binary, or a C or Python worker (kinds_mixed.go)
		if err != nil {
			return nil, err
		}
		return startWorker(cmd, ids, workerFiles(r), false)
	}
	procs := make([]*workerProc, cfg.procs)
	defer func() { killWorkers(procs) }()
	for p, ids := range spreadIDs(cfg.workers, cfg.procs) {
		if procs[p], err = spawn(p, ids); err != nil {
			return nil, err
		}
	}
	// Release the workers together, once every process has attached.
	attached := func() bool {
		ready := 0
		for p := range procs {
			ready += int(get(st, stReady+8*p))
		}
		return ready == len(procs)
	}
	if err := awaitAttach(procs, attached, time.Millisecond, cfg.interrupt,
		"worker process", "the workers", "worker processes did not attach within a minute"); err != nil {
		return nil, err
	}
	start := time.Now()
	put(st, stGo, 1)
	var kills atomic.Int64 // replacements started, one per kill: the bar's count
	prog := startProgress(cfg.progress, procsProgress(cfg, name, start, kills.Load,
		func() int64 { return int64(get(st, stCounter)) / cfg.value }))

	var kr *killReport
	if cfg.kill {
		respawn := func(proc int, ids []int) (*workerProc, error) { kills.Add(1); return spawn(proc, ids) }
		kr = killLoop(cfg, r, st, rd, procs, respawn)
	} else if cfg.timed() {
		select {
		case <-time.After(cfg.duration):
		case <-cfg.interrupt.Done():
		}
	}
	failed, hung, killedAtEnd := stopWorkers(cfg, st, procs)
	elapsed := time.Since(start)
	prog.stop()
	interrupted := cfg.interrupt.Interrupted()
	if kr != nil {
		for _, pid := range killedAtEnd {
			kr.Kills++
			kr.killed[pid] = true
		}
	}
	if (kr != nil || len(killedAtEnd) > 0) && !unprotected {
		// A holder killed after the workers stopped waiting would leave
		// the state half done: recover it as a worker would.
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		err := m.LockContext(ctx)
		cancel()
		var od *lockword.OwnerDeadError
		if errors.As(err, &od) {
			// The recovery that an interrupted killLoop was waiting
			// for, if none came since: that kill is counted already.
			awaited := kr != nil && kr.awaiting && get(st, stRecoveries) == kr.awaitingFrom
			if err := recoverState(st, &spec, m, od.PID); err != nil {
				return nil, err
			}
			if kr != nil && !awaited {
				kr.HolderKills++ // it died holding; its recovery is this one
			}
		} else if err != nil {
			return nil, err
		}
		defer m.Unlock()
	}

	return procsReport(cfg, st, m, &spec, procsOutcome{kr: kr, failed: failed, hung: hung,
		elapsed: elapsed, interrupted: interrupted, readers: rd}), nil
}

// procsOutcome is how a -procs run ended, as its supervisor saw it.
type procsOutcome struct {
	kr          *killReport // the kill loop's report; nil without -kill
	failed      []string    // worker processes that failed by themselves
	hung        bool        // some worker did not stop within hangTimeout
	elapsed     time.Duration
	interrupted bool   // a signal stopped the run
	readers     []byte // the reader area of a kind with readers, else nil
}

// procsReport reads the shared state st of a finished -procs run (every
// worker stopped, a half-done update recovered) into its report.
func procsReport(cfg *config, st []byte, m procLock, spec *workerSpec, o procsOutcome) *counterReport {
	kr, failed, hung, elapsed, interrupted := o.kr, o.failed, o.hung, o.elapsed, o.interrupted
	run := hammerRun{perWorker: make([]int64, cfg.workers), elapsed: elapsed}
	for i := range run.perWorker {
		run.perWorker[i] = int64(get(st, committedOff(cfg.procs, i+1))) / cfg.value
		if spec.Iters > 0 && !interrupted && len(failed) == 0 {
			// Counted: every worker made exactly its additions (it
			// exits only then); Expected is the full count.
			run.perWorker[i] = spec.Iters
		}
	}
	rep := newReport(cfg, spec.Kind, run)
	rep.procs = cfg.procs
	if interrupted {
		rep.interrupted = cfg.interrupt.Name()
	}
	rep.actual = int64(get(st, stCounter))
	rep.ownerViolations = int64(get(st, stViolations))
	if o.readers != nil {
		reads, viol := readTotals(o.readers, cfg.workers)
		rep.reads, rep.readViolations = &reads, viol
	}
	if kr != nil {
		// A count of kills, not of additions: report the time it took.
		rep.iters, rep.duration = 0, max(elapsed.Round(time.Millisecond), time.Millisecond)
		kr.Recoveries = int64(get(st, stRecoveries))
		kr.RolledBack = int64(get(st, stRolledBack))
		for i := max(kr.Recoveries-recoveryLog, 0); i < kr.Recoveries; i++ {
			pid := int(get(st, recoveredOff(cfg.procs, cfg.workers, uint64(i))))
			kr.recoveredPIDs = append(kr.recoveredPIDs, pid)
			if !kr.killed[pid] {
				kr.Robbed = append(kr.Robbed, pid)
			}
		}
		if hung {
			kr.Hangs++
		}
		kr.WorkerErrors = append(kr.WorkerErrors, failed...)
		rep.killed = kr
	} else {
		// A worker that failed (killed from outside, say) fails the
		// run, with the report of what the others did: Expected is
		// then the committed additions, as in a -kill run.
		rep.workerErrors = failed
	}
	if spec.Unprotected {
		rep.noStats = "no lock, nothing to measure"
	} else if fastReads(cfg, spec.Kind) {
		rep.noStats = "off with -kill, so that reads take RLock's fast path"
	} else {
		s := m.Stats()
		frac := s.SlowPathFraction()
		rep.slowPath = &frac
		if kr == nil && !interrupted && len(failed) == 0 {
			// Every acquisition was a worker's: the counts must agree,
			// less, in a timed run, the one acquisition in which each
			// worker found the stop flag and added nothing. (Not after
			// an interruption: a worker that had finished its count by
			// then never saw the flag.)
			n := s.Acquisitions
			if cfg.timed() {
				n -= uint64(cfg.workers)
			}
			if rep.reads != nil {
				n -= uint64(*rep.reads) // read locks count as acquisitions too
			}
			rep.statsAcquisitions = &n
		}
	}
	return rep
}

// stopWorkers ends the run's worker processes and reaps them. A counted run
// ends when its workers finish; a timed or -kill run, or one interrupted
// by a signal (at any moment, this wait included: see interrupts), is stopped
// through the region's stop flag, which a worker reads only holding the
// lock, between updates. A worker that has not stopped hangTimeout after
// the flag is hung (failed, hung): it is killed. So is every worker still
// running on a second signal, which asks not to wait (killed, not failed).
// killed lists the PIDs that this killed.
func stopWorkers(cfg *config, st []byte, procs []*workerProc) (failed []string, hung bool, killed []int) {
	var deadline <-chan time.Time // nil until the stop flag is set
	stop := func() {
		put(st, stStop, 1)
		deadline = time.After(hangTimeout)
	}
	intr, hurry := cfg.interrupt.Done(), cfg.interrupt.Hurry()
	if cfg.kill || cfg.timed() || cfg.interrupt.Interrupted() {
		stop()
		intr = nil
	}
	for _, w := range procs {
		kill := false
	wait:
		for {
			select {
			case <-w.done:
				break wait
			case <-intr:
				stop()
				intr = nil
			case <-deadline:
				deadline = closedTimer // the others had as long
				if !exited(w) {
					hung, kill = true, true
					failed = append(failed, fmt.Sprintf("PID %d did not stop within %v", w.cmd.Process.Pid, hangTimeout))
				}
				break wait
			case <-hurry:
				kill = !exited(w)
				break wait
			}
		}
		if kill {
			w.cmd.Process.Kill()
			<-w.done
			killed = append(killed, w.cmd.Process.Pid)
		} else if w.err != nil {
			failed = append(failed, workerFailure(w))
		}
	}
	return failed, hung, killed
}

// closedTimer is a ready timer channel: a deadline that has passed.
var closedTimer = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// workerFailure says how a worker process that ended by itself failed: its
// exit status or the signal that killed it (not sent by this run), and
// what it printed.
func workerFailure(w *workerProc) string {
	how := fmt.Sprint(w.err)
	var ee *exec.ExitError
	if errors.As(w.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how = fmt.Sprintf("died of signal %d (%v), which this run did not send", int(ws.Signal()), ws.Signal())
		}
	}
	msg := fmt.Sprintf("worker process PID %d %s", w.cmd.Process.Pid, how)
	if out := strings.TrimSpace(w.out.String()); out != "" {
		msg += ": " + out
	}
	return msg
}
