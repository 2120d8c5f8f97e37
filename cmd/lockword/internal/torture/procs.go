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
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockword/lockword"
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
			desc: "lockword.SharedMutex in a region shared by -procs processes (robust: see -kill)",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared", false) }},
		kind{name: "shared-ticket", procs: true,
			desc: "lockword.SharedTicketMutex in a region shared by -procs processes (robust, FIFO: see -kill)",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-ticket", false) }},
		kind{name: "shared-rw", procs: true,
			desc: "lockword.SharedRWMutex's write side in a region shared by -procs processes (robust: see -kill)",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-rw", false) }},
		kind{name: "shared-none", procs: true,
			desc: "no lock, across -procs processes sharing the region: must FAIL",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-none", true) }},
	)
}

// The shared state, a Bytes object in the region: plain uint64 words,
// read and written only under the lock (the flags excepted), in the
// region's (native) byte order.
const (
	stCounter         = 0   // sum of committed additions
	stOwner           = 8   // worker id inside the critical section, 0: none
	stIntentActive    = 16  // 1 while an update is half done
	stIntentWorker    = 24  // whose update
	stIntentCounter   = 32  // counter before it
	stIntentCommitted = 40  // that worker's committed total before it
	stViolations      = 48  // owner-slot violations
	stRecoveries      = 56  // ErrOwnerDead acquisitions that repaired
	stRolledBack      = 64  // half-done updates undone
	stLastRecovery    = 72  // Unix ns of the last recovery
	stGo              = 80  // supervisor: 1 releases the workers
	stStop            = 88  // supervisor: 1 stops them
	stRecovering      = 96  // PID of the dead holder being recovered from (latest)
	stDetected        = 104 // Unix ns when that recovery's LockContext returned
	stReady           = 128
	// then ready[procs] (set by each first-generation process), then
	// committed[1..workers], then recoveredPID[recoveryLog] (the dead
	// holder of each recovery, a ring), each a uint64.
	recoveryLog = 4096
)

func stateSize(procs, workers int) int { return stReady + 8*procs + 8*(workers+1) + 8*recoveryLog }

func recoveredOff(procs, workers int, i uint64) int {
	return stReady + 8*procs + 8*(workers+1) + 8*int(i%recoveryLog)
}

func committedOff(procs, id int) int { return stReady + 8*procs + 8*id }

var ne = binary.NativeEndian

func get(b []byte, off int) uint64    { return ne.Uint64(b[off:]) }
func put(b []byte, off int, v uint64) { ne.PutUint64(b[off:], v) }

// A procLock is the robust shared lock a -procs run tortures.
type procLock interface {
	LockContext(ctx context.Context) error
	Unlock()
	MarkConsistent() error
	SetStuckThreshold(time.Duration)
	EnableStats()
	Stats() lockword.Stats
}

// openProcLock returns the torture lock of the -procs kind named kind.
func openProcLock(r *lockword.Region, kind string) (procLock, error) {
	switch kind {
	case "shared-ticket":
		return r.TicketMutex(lockName)
	case "shared-rw":
		return r.RWMutex(lockName)
	}
	return r.Mutex(lockName)
}

// workerSpec tells a worker process what to do; it travels as JSON in
// workerEnv.
type workerSpec struct {
	Region      string `json:"region"`
	Kind        string `json:"kind"` // the torture kind: which lock (openProcLock)
	Proc        int    `json:"proc"` // ready slot, or -1 for a replacement
	Procs       int    `json:"procs"`
	Workers     int    `json:"workers"`
	IDs         []int  `json:"ids"`
	Iters       int64  `json:"iters"` // 0: until stop
	Value       int64  `json:"value"`
	Work        int    `json:"work"`
	Unprotected bool   `json:"unprotected"`
	Kill        bool   `json:"kill"`
	BreakRepair bool   `json:"break_repair"`
}

// workerMain is a worker process: it attaches to the region and runs its
// workers until they finish or the supervisor says stop.
func workerMain(specJSON string) int {
	// The supervisor stops us through the region, between updates, when
	// it gets SIGINT, SIGTERM or SIGHUP (we run in a process group of our
	// own, see workerAttr); the same signal sent to all of lockword's
	// processes must not kill a holder mid-update.
	signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	var spec workerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "lockword torture worker:", err)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "lockword torture worker %d: %s\n", os.Getpid(), errText(err))
		return exitFail
	}
	r, err := openTortureRegion(spec.Region)
	if err != nil {
		return fail(err)
	}
	m, err := openProcLock(r, spec.Kind)
	if err != nil {
		return fail(err)
	}
	st, err := r.Bytes(stateName, stateSize(spec.Procs, spec.Workers))
	if err != nil {
		return fail(err)
	}
	if spec.Proc >= 0 {
		put(st, stReady+8*spec.Proc, 1)
	}
	for get(st, stGo) == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(spec.IDs))
	for _, id := range spec.IDs {
		wg.Go(func() {
			if err := procWorker(&spec, m, st, id); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return fail(err)
	}
	if err := r.Close(); err != nil {
		return fail(err)
	}
	return exitOK
}

func procWorker(spec *workerSpec, m procLock, st []byte, id int) error {
	rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(id)))
	var sink uint64
	for n := int64(0); spec.Iters == 0 || n < spec.Iters; n++ {
		steps := 0
		if spec.Work > 0 {
			steps = rng.IntN(spec.Work + 1)
		}
		if !spec.Unprotected {
			if err := m.LockContext(context.Background()); err != nil {
				if !errors.Is(err, lockword.ErrOwnerDead) {
					return err
				}
				var od *lockword.OwnerDeadError
				errors.As(err, &od)
				if err := recoverState(st, spec, m, od.PID); err != nil {
					return err
				}
			}
		}
		stop := procSection(st, spec, id, steps, &sink)
		if !spec.Unprotected {
			m.Unlock()
		}
		if stop {
			return nil
		}
	}
	return nil
}

// procSection is the critical section: the classic counter and owner slot,
// with the update bracketed by an intent record. It reports whether the
// supervisor asked the workers to stop (it then changes nothing).
func procSection(st []byte, spec *workerSpec, id int, steps int, sink *uint64) (stop bool) {
	if get(st, stOwner) != 0 {
		put(st, stViolations, get(st, stViolations)+1)
	}
	put(st, stOwner, uint64(id))
	if get(st, stStop) != 0 {
		put(st, stOwner, 0)
		return true
	}
	cOff := committedOff(spec.Procs, id)
	counter, committed := get(st, stCounter), get(st, cOff)
	// Intent first, then the change: a holder killed anywhere below
	// leaves enough to undo it.
	put(st, stIntentWorker, uint64(id))
	put(st, stIntentCounter, counter)
	put(st, stIntentCommitted, committed)
	put(st, stIntentActive, 1)
	if spec.Unprotected {
		runtime.Gosched() // widen the window, as the in-process none kind does
	}
	*sink = busyWork(*sink, steps)
	put(st, stCounter, counter+uint64(spec.Value))
	if spec.Kill {
		*sink = busyWork(*sink, killWindowSteps)
	}
	put(st, cOff, committed+uint64(spec.Value))
	put(st, stIntentActive, 0)
	if get(st, stOwner) != uint64(id) {
		put(st, stViolations, get(st, stViolations)+1)
	}
	put(st, stOwner, 0)
	return false
}

// recoverState is what an acquirer told ErrOwnerDead does, holding the lock:
// say whom it recovers from, undo a half-done update, clear the dead
// holder's owner mark, mark the lock consistent, and only then count the
// recovery, so that the supervisor, which reads the lock's state before the
// count, cannot miss a recovery in progress.
func recoverState(st []byte, spec *workerSpec, m procLock, deadPID int) error {
	put(st, stDetected, uint64(time.Now().UnixNano()))
	put(st, stRecovering, uint64(deadPID))
	repairState(st, spec, spec.BreakRepair)
	if err := m.MarkConsistent(); err != nil {
		return err
	}
	noteLanguage("recovered", deadPID) // kinds_mixed.go
	n := get(st, stRecoveries)
	put(st, recoveredOff(spec.Procs, spec.Workers, n), uint64(deadPID))
	put(st, stLastRecovery, uint64(time.Now().UnixNano()))
	put(st, stRecoveries, n+1)
	return nil
}

// repairState undoes a half-done update and clears the dead holder's owner
// mark. broken skips the undo (tests show that the accounting then fails).
func repairState(st []byte, spec *workerSpec, broken bool) {
	if !broken && get(st, stIntentActive) == 1 {
		if w := int(get(st, stIntentWorker)); w >= 1 && w <= spec.Workers {
			put(st, committedOff(spec.Procs, w), get(st, stIntentCommitted))
		}
		put(st, stCounter, get(st, stIntentCounter))
		put(st, stIntentActive, 0)
		put(st, stRolledBack, get(st, stRolledBack)+1)
	}
	put(st, stOwner, 0)
}

// killReport is what a -kill run's supervisor saw. Its JSON form is part
// of torture's -json output (field kill).
type killReport struct {
	Kills int `json:"kills"`
	// HolderKills counts kills of the lock's holder; each must be
	// recovered exactly once: Recoveries == HolderKills (a recovery
	// without a dead holder would be a live holder robbed).
	HolderKills int   `json:"holder_kills"`
	Recoveries  int64 `json:"recoveries"`
	RolledBack  int64 `json:"rolled_back"`
	// MaxDetectionMs is the longest time from a kill of the holder to a
	// waiter getting the lock with ErrOwnerDead; MaxRecoveryMs to the
	// repaired lock being marked consistent.
	MaxDetectionMs float64 `json:"max_detection_latency_ms"`
	MaxRecoveryMs  float64 `json:"max_recovery_latency_ms"`
	Hangs          int     `json:"hangs"`
	// WorkerErrors lists worker processes that failed by themselves, or
	// did not stop when told to.
	WorkerErrors []string `json:"worker_errors,omitempty"`
	// Robbed lists recoveries from a PID the supervisor never killed: a
	// live holder declared dead. Must be empty.
	Robbed []int `json:"robbed,omitempty"`

	// Detection and Recovery are the distributions of the two latencies
	// (kill_latency.go), filled in by MarshalJSON.
	Detection *latencyDist `json:"detection_latency_ms,omitempty"`
	Recovery  *latencyDist `json:"recovery_latency_ms,omitempty"`

	killed map[int]bool // PIDs the supervisor killed
	// detections and repairs are each timed recovery's latencies.
	detections, repairs []time.Duration
	// awaiting: the run was interrupted while a killed holder's recovery
	// was still to come; awaitingFrom is the recovery count then (the
	// kill is counted in HolderKills already).
	awaiting     bool
	awaitingFrom uint64
}

func (k *killReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Kills: %d (%d of the lock's holder)\n", k.Kills, k.HolderKills)
	fmt.Fprintf(w, "Recoveries: %d (%d half-done updates rolled back)\n", k.Recoveries, k.RolledBack)
	k.writeLatencies(w)
	fmt.Fprintf(w, "Hangs: %d\n", k.Hangs)
}

func (k *killReport) failures() []string {
	var why []string
	if k.Hangs > 0 {
		why = append(why, fmt.Sprintf("%d hangs", k.Hangs))
	}
	if len(k.Robbed) > 0 {
		why = append(why, fmt.Sprintf("recovered from PIDs %v, which were never killed: live holders robbed", k.Robbed))
	}
	if k.Recoveries != int64(k.HolderKills) {
		why = append(why, fmt.Sprintf("%d recoveries for %d kills of a holder", k.Recoveries, k.HolderKills))
	}
	for _, e := range k.WorkerErrors {
		why = append(why, e)
	}
	return why
}

// tortureRegion creates the region of a -procs run: in an anonymous memory
// file (CreateMemfdRegion), which the worker processes inherit as fd 3
// (workerFiles) and which vanishes with the last of them, so that nothing
// is left behind, even when the supervisor is killed with SIGKILL (its
// workers then die too: workerAttr). Where memfds are not available it
// falls back to a file under regionDir, removed by cleanup. name labels
// it (in /proc/PID/fd, or as the file name).
func tortureRegion(name string, size int64) (r *lockword.Region, cleanup func(), err error) {
	label := fmt.Sprintf("%s-%d-%08x", name, os.Getpid(), rand.Uint32())
	if r, err = lockword.CreateMemfdRegion(label, size, nil); err == nil {
		return r, func() { r.Close() }, nil
	}
	path := filepath.Join(regionDir(), label)
	if r, err = lockword.CreateRegion(path, size, nil); err != nil {
		return nil, nil, err
	}
	return r, func() { r.Close(); os.Remove(path) }, nil
}

// workerFiles are the files a worker process of r's run inherits: the
// region's, as fd 3, when it has no path (a memfd).
func workerFiles(r *lockword.Region) []*os.File {
	if strings.HasPrefix(r.Path(), memfdPrefix) {
		return []*os.File{r.File()}
	}
	return nil
}

// memfdPrefix starts the Path of a region in a memfd.
const memfdPrefix = "memfd:"

// openTortureRegion is a worker's open of its run's region: the inherited
// fd 3 for a memfd region (path "memfd:..."), else the file at path.
func openTortureRegion(path string) (*lockword.Region, error) {
	if strings.HasPrefix(path, memfdPrefix) {
		return lockword.OpenRegionFile(os.NewFile(3, path), nil)
	}
	return lockword.OpenRegion(path, nil)
}

// regionDir is where torture puts its region: /dev/shm when it exists.
func regionDir() string {
	if st, err := os.Stat(lockword.DefaultRegionDir); err == nil && st.IsDir() {
		return lockword.DefaultRegionDir
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
	if !unprotected {
		m.EnableStats()
	}
	st, err := r.Bytes(stateName, stateSize(cfg.procs, cfg.workers))
	if err != nil {
		return nil, err
	}

	spec := workerSpec{Region: path, Kind: name, Procs: cfg.procs, Workers: cfg.workers, Value: cfg.value,
		Work: cfg.work, Unprotected: unprotected, Kill: cfg.kill, BreakRepair: os.Getenv(breakRepairEnv) != ""}
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
		"worker process", "worker processes did not attach within a minute"); err != nil {
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
		kr = killLoop(cfg, r, st, procs, respawn)
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

	run := hammerRun{perWorker: make([]int64, cfg.workers), elapsed: elapsed}
	for i := range run.perWorker {
		run.perWorker[i] = int64(get(st, committedOff(cfg.procs, i+1))) / cfg.value
		if spec.Iters > 0 && !interrupted && len(failed) == 0 {
			// Counted: every worker made exactly its additions (it
			// exits only then); Expected is the full count.
			run.perWorker[i] = spec.Iters
		}
	}
	rep := newReport(cfg, name, run)
	rep.procs = cfg.procs
	if interrupted {
		rep.interrupted = cfg.interrupt.Name()
	}
	rep.actual = int64(get(st, stCounter))
	rep.ownerViolations = int64(get(st, stViolations))
	if kr != nil {
		// A count of kills, not of additions: report the time it took.
		rep.iters, rep.duration = 0, max(elapsed.Round(time.Millisecond), time.Millisecond)
		kr.Recoveries = int64(get(st, stRecoveries))
		kr.RolledBack = int64(get(st, stRolledBack))
		for i := max(kr.Recoveries-recoveryLog, 0); i < kr.Recoveries; i++ {
			if pid := int(get(st, recoveredOff(cfg.procs, cfg.workers, uint64(i)))); !kr.killed[pid] {
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
	if unprotected {
		rep.noStats = "no lock, nothing to measure"
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
			rep.statsAcquisitions = &n
		}
	}
	return rep, nil
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

// killLoop is the -kill supervisor: kill a worker process (half the time
// the lock's holder), start a replacement with the same worker ids, and,
// when the victim held the lock, wait for its recovery and time it.
func killLoop(cfg *config, r *lockword.Region, st []byte, procs []*workerProc, spawn func(int, []int) (*workerProc, error)) *killReport {
	kr := &killReport{killed: map[int]bool{}}
	start := time.Now()
	lastTotal, lastProgress := get(st, stCounter), time.Now()
	for kr.Kills < cfg.kills && (!cfg.timed() || time.Since(start) < cfg.duration) && !cfg.interrupt.Interrupted() {
		time.Sleep(rand.N(killMaxGap))
		victim := rand.IntN(len(procs))
		if rand.IntN(2) == 0 {
			if i, ok := catchHolder(st, procs, holderWait); ok {
				victim = i // stopped inside the critical section
			}
		}
		w := procs[victim]
		// A worker that exited by itself has failed.
		select {
		case <-w.done:
			kr.WorkerErrors = append(kr.WorkerErrors, workerFailure(w))
			return kr
		default:
		}
		recoveredBefore := get(st, stRecoveries)
		killedAt := time.Now()
		w.cmd.Process.Kill()
		<-w.done
		kr.Kills++
		kr.killed[w.cmd.Process.Pid] = true
		// Did it die holding the lock? Then the lock still names it, or
		// a recovery has taken it over (inconsistent until marked; and
		// the recoverer names the dead PID before it marks), or ended.
		// Recoveries are counted after the mark, so the inconsistent bit
		// is never left over from the previous kill's recovery.
		pid, inconsistent := holder(r)
		held := pid == w.cmd.Process.Pid || inconsistent || int(get(st, stRecovering)) == w.cmd.Process.Pid ||
			get(st, stRecoveries) != recoveredBefore
		next, err := spawn(-1, w.ids)
		if err != nil {
			kr.WorkerErrors = append(kr.WorkerErrors, err.Error())
			return kr
		}
		procs[victim] = next
		if held {
			kr.HolderKills++
			for get(st, stRecoveries) == recoveredBefore {
				if cfg.interrupt.Interrupted() {
					kr.awaiting, kr.awaitingFrom = true, recoveredBefore
					return kr
				}
				if time.Since(killedAt) > hangTimeout {
					kr.Hangs++
					return kr
				}
				time.Sleep(100 * time.Microsecond)
			}
			if got := int(get(st, recoveredOff(cfg.procs, cfg.workers, recoveredBefore))); got != w.cmd.Process.Pid {
				kr.WorkerErrors = append(kr.WorkerErrors, fmt.Sprintf("kill %d of PID %d, a holder, was followed by a recovery from PID %d", kr.Kills, w.cmd.Process.Pid, got))
			}
			kr.recovered(time.Duration(int64(get(st, stDetected))-killedAt.UnixNano()),
				time.Duration(int64(get(st, stLastRecovery))-killedAt.UnixNano()))
		}
		if total := get(st, stCounter); total != lastTotal {
			lastTotal, lastProgress = total, time.Now()
		} else if time.Since(lastProgress) > hangTimeout {
			kr.Hangs++
			return kr
		}
	}
	return kr
}

// catchHolder finds the process whose worker is inside the critical
// section and stops it there: it SIGSTOPs the process awaitHolder names
// and, once the kernel shows it stopped, checks that the owner slot still
// names one of its workers (else it lets it go on and looks again). The
// caller's SIGKILL then lands on a holder, at whatever point of its update
// it was stopped, on any machine state: on a loaded host the few
// microseconds between reading the slot and a plain kill were often enough
// for the holder to leave (a third of the aimed kills missed). A stopped
// waiter that turned out not to hold is a live, stopped process, which the
// lock must not rob either. It gives up after wait.
func catchHolder(st []byte, procs []*workerProc, wait time.Duration) (int, bool) {
	deadline := time.Now().Add(wait)
	for {
		i, ok := awaitHolder(st, procs, time.Until(deadline))
		if !ok {
			return 0, false
		}
		w := procs[i]
		if stopProcess(w.cmd.Process, time.Until(deadline)) && slices.Contains(w.ids, int(get(st, stOwner))) {
			return i, true
		}
		continueProcess(w.cmd.Process)
	}
}

// awaitHolder returns the index of the process whose worker is inside the
// critical section, waiting up to wait for one to enter it. It reads the
// owner slot the workers themselves set, not the lock's state: a lock that
// hands over through a kernel wake-up (the fair kinds) is held for a few
// microseconds between handovers of tens, and a FIFO lock stands still for
// ownerCheckInterval after every kill of a waiter, until that waiter's turn
// is skipped; a single look at the lock then finds no holder almost every
// time (0-19 of 200 kills hit one), whatever the machine. Spinning on the
// slot, yielding the CPU each round, catches the next holder as it enters.
func awaitHolder(st []byte, procs []*workerProc, wait time.Duration) (int, bool) {
	deadline := time.Now().Add(wait)
	for {
		if id := int(get(st, stOwner)); id != 0 {
			for i, w := range procs {
				if slices.Contains(w.ids, id) {
					return i, true
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		runtime.Gosched()
	}
}

// holder returns the PID of the torture lock's holder (0 if none) and
// whether the lock is inconsistent: taken from a dead owner by an acquirer
// that has not yet marked it consistent.
func holder(r *lockword.Region) (pid int, inconsistent bool) {
	info, err := r.Inspect()
	if err != nil {
		return 0, false
	}
	for _, o := range info.Objects {
		if o.Name == lockName {
			return o.HolderPID, o.Inconsistent
		}
	}
	return 0, false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// procKindNames lists the kinds that run across processes.
func procKindNames() string {
	var names []string
	for _, k := range kinds {
		if k.procs {
			names = append(names, k.name)
		}
	}
	return strings.Join(names, ", ")
}

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
