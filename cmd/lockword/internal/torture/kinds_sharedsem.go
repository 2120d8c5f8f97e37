package torture

// torture -lock shared-semaphore (-procs N, -kill): lockword's
// shm.Semaphore of semTorturePermits permits, taken by -workers workers
// spread over -procs processes. Each acquires k permits (1 to
// semTortureMaxWeight, varied) and, holding them, claims k of the permits'
// owner slots (CAS free → its PID; a slot that a killed process left is
// freed when a claim falls short, then the claim is tried again) and,
// without -kill, adds k to a separate in-use counter that must never pass
// the permits; it checks both on entry and exit. Without -kill the totals
// are exact. With -kill the supervisor SIGSTOPs a worker process at
// random, reads what its semaphore entry holds (InspectRegion), then
// SIGKILLs it and starts a replacement: at the end, the permits the
// semaphore took back from dead processes must equal, exactly, what the
// killed ones held (recovered once, never twice), the recoveries that
// acquirers were told of (ErrOwnerDead) must not exceed it, and every
// permit must be free. shared-semaphore-broken makes its semaphore with
// one permit too many: the checks must FAIL.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lockword/lockword/shm"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lockword/lockword/internal/cbuild"
)

const (
	shSemWorkerEnv  = "LOCKWORD_TORTURE_SEM_WORKER"
	shSemName       = "torture-sem"
	shSemStateName  = "torture-sem-state"
	shSemMaxWorkers = 256
	shSemKilledCap  = 4096
)

// shSemState is the run's shared state (a Bytes object, so that the C
// workers of shared-semaphore-c find it too; they get its field offsets on
// their command line): flags, the checks' words, and per worker id its
// committed totals.
type shSemState struct {
	Go, Stop   atomic.Uint32
	InUse      atomic.Int64 // the separate counter (runs without -kill)
	Violations atomic.Int64
	// Owners hold, per permit, the tag of the process holding it (0:
	// free): its PID and a random number, so that a PID reused by a
	// later worker is not taken for a killed one.
	Owners  [semTorturePermits]atomic.Uint64
	Workers [shSemMaxWorkers + 1]struct {
		Acquisitions, Permits, Recovered atomic.Int64
		Tag                              atomic.Uint64 // of the process running the id, set before its first claim
	}
	KilledN atomic.Uint64
	Killed  [shSemKilledCap]atomic.Uint64 // tags of the processes killed, in order (a ring)
}

// openShSemState returns the run's state in r.
func openShSemState(r *shm.Region) (*shSemState, error) {
	b, err := r.Bytes(shSemStateName, int(unsafe.Sizeof(shSemState{})))
	if err != nil {
		return nil, err
	}
	// Legal: the object is 64-aligned in a mapping that outlives the
	// run, and shSemState holds atomics only, no pointers.
	return (*shSemState)(unsafe.Pointer(&b[0])), nil
}

// shSemSpec is a worker process's orders.
type shSemSpec struct {
	Region  string `json:"region"`
	IDs     []int  `json:"ids"`
	Iters   int64  `json:"iters"` // 0: until Stop
	Kill    bool   `json:"kill"`
	Permits int64  `json:"permits"`
}

func init() {
	register(
		kind{name: "shared-semaphore", procs: true, usage: shSemUsage,
			desc: fmt.Sprintf("shm.Semaphore of %d permits across -procs processes, weights 1-%d (robust: see -kill)", semTorturePermits, semTortureMaxWeight),
			run:  func(cfg *config) (report, error) { return tortureShSem(cfg, "shared-semaphore", false) }},
		kind{name: "shared-semaphore-c", procs: true, usage: shSemUsage, prepare: prepareC,
			desc: "shared-semaphore with every other worker process written in C (c/test/cworker_sem.c)",
			run:  func(cfg *config) (report, error) { return tortureShSem(cfg, "shared-semaphore-c", false) }},
		kind{name: "shared-semaphore-broken", procs: true, usage: shSemUsage,
			desc: fmt.Sprintf("shared-semaphore made with %d permits for %d: must FAIL", semTorturePermits+1, semTorturePermits),
			run:  func(cfg *config) (report, error) { return tortureShSem(cfg, "shared-semaphore-broken", true) }},
	)
	kindHelp = append(kindHelp, fmt.Sprintf(`Shared semaphore (-lock shared-semaphore; needs -procs N):
  -workers workers over -procs processes share an shm.Semaphore of %d
  permits; each acquires 1 to %d and, holding them, claims that many
  per-permit owner slots and (without -kill) adds them to an in-use
  counter, checking that neither ever passes %d. With -kill the supervisor
  stops a worker process, reads what it holds, kills it and starts another:
  the permits recovered from dead processes must equal what they held.
    lockword torture -lock shared-semaphore -procs 4
    lockword torture -lock shared-semaphore -procs 4 -kill -kills 1000
  shared-semaphore-c runs every other worker process in C (the C library's
  lw_sem_*, c/test/cworker_sem.c), built as for shared-c.
`, semTorturePermits, semTortureMaxWeight, semTorturePermits))
}

func shSemUsage(cfg *config) error {
	if cfg.workers > shSemMaxWorkers {
		return fmt.Errorf("shared-semaphore runs at most %d workers, got -workers %d", shSemMaxWorkers, cfg.workers)
	}
	return nil
}

// shSemReport is the outcome of one shared-semaphore run.
type shSemReport struct {
	lock                    string
	procs, workers          int
	kill                    bool
	want, acquisitions      int64 // want: 0 with -kill (killed workers' last acquisitions are not committed)
	permits                 int64
	violations              int64
	kills                   int
	heldByKilled, recovered int64 // what killed processes held; what the semaphore took back
	told                    int64 // recoveries reported to acquirers (ErrOwnerDead)
	inUseAfter              int64
	errs                    []string
	elapsed                 time.Duration
}

// tortureShSem is the supervisor of one shared-semaphore run.
func tortureShSem(cfg *config, name string, broken bool) (report, error) {
	exe, err := workerExe()
	if err != nil {
		return nil, err
	}
	r, cleanup, err := tortureRegion("lockword-torture-sem", 1<<21)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	permits := int64(semTorturePermits + btoi(broken))
	sem, err := r.Semaphore(shSemName, permits)
	if err != nil {
		return nil, err
	}
	st, err := openShSemState(r)
	if err != nil {
		return nil, err
	}
	iters := cfg.iters
	if cfg.kill || cfg.timed() {
		iters = 0
	}
	rep := &shSemReport{lock: name, procs: cfg.procs, workers: cfg.workers, kill: cfg.kill}
	ids := spreadIDs(cfg.workers, cfg.procs)
	spawn := func(pids []int) (*workerProc, error) {
		spec := shSemSpec{Region: r.Path(), IDs: pids, Iters: iters, Kill: cfg.kill, Permits: permits}
		cmd, err := shSemCommand(exe, spec, name == "shared-semaphore-c" && len(pids) > 0 && slices.IndexFunc(ids, func(p []int) bool {
			return slices.Contains(p, pids[0])
		})%2 == 1)
		if err != nil {
			return nil, err
		}
		return startWorker(cmd, pids, workerFiles(r), false)
	}
	procs := make([]*workerProc, len(ids))
	defer func() { killWorkers(procs) }()
	for p := range procs {
		if procs[p], err = spawn(ids[p]); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	st.Go.Store(1)
	if cfg.kill {
		shSemKills(cfg, r, st, procs, spawn, rep)
		st.Stop.Store(1)
	} else if cfg.timed() {
		time.Sleep(cfg.duration)
		st.Stop.Store(1)
	}
	for _, w := range procs {
		select {
		case <-w.done:
		case <-time.After(hangTimeout + time.Duration(iters)*time.Millisecond): // 1 ms an acquisition: hung, not slow
			rep.errs = append(rep.errs, fmt.Sprintf("worker process %d did not finish: hung?", w.cmd.Process.Pid))
			continue
		}
		if w.err != nil {
			rep.errs = append(rep.errs, fmt.Sprintf("worker process %d: %v: %s", w.cmd.Process.Pid, w.err, w.output()))
		}
	}
	rep.elapsed = time.Since(start)
	// Take every permit: this recovers what the last killed processes
	// held, if no worker found them short since.
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	var de *shm.SemaphoreOwnerDeadError
	switch err := sem.Acquire(ctx, permits); {
	case errors.As(err, &de):
		rep.told += de.Permits
		sem.Release(permits)
	case err != nil:
		rep.errs = append(rep.errs, "final Acquire of every permit: "+errText(err))
	default:
		sem.Release(permits)
	}
	if info, err := r.Inspect(); err == nil {
		for _, o := range info.Objects {
			if o.Name == shSemName && o.Semaphore != nil {
				rep.recovered, rep.inUseAfter = int64(o.Semaphore.Recovered), o.Semaphore.InUse
			}
		}
	}
	for id := 1; id <= cfg.workers; id++ {
		w := &st.Workers[id]
		rep.acquisitions += w.Acquisitions.Load()
		rep.permits += w.Permits.Load()
		rep.told += w.Recovered.Load()
	}
	if iters > 0 {
		rep.want = iters * int64(cfg.workers)
	}
	rep.violations = st.Violations.Load()
	return rep, nil
}

// shSemKills is the -kill loop: stop a random worker process, note what
// its semaphore entry holds and its PID, kill it, start its replacement.
func shSemKills(cfg *config, r *shm.Region, st *shSemState, procs []*workerProc, spawn func([]int) (*workerProc, error), rep *shSemReport) {
	deadline := time.Now().Add(cfg.duration)
	for rep.kills < cfg.kills && (!cfg.timed() || time.Now().Before(deadline)) {
		if cfg.interrupt.Interrupted() {
			return
		}
		time.Sleep(time.Duration(rand.Int64N(int64(killMaxGap))))
		p := rand.IntN(len(procs))
		w := procs[p]
		pid := w.cmd.Process.Pid
		if len(w.ids) == 0 || st.Workers[w.ids[0]].Tag.Load()>>32 != uint64(pid) {
			// Still opening the region: stopped there, it would hold
			// the region's file lock, which inspection takes. It holds
			// no permits yet either.
			continue
		}
		if !stopProcess(w.cmd.Process, hangTimeout) || !shSemAllStopped(pid, hangTimeout) {
			rep.errs = append(rep.errs, fmt.Sprintf("worker process %d did not stop (or ended): %s", pid, w.output()))
			return
		}
		// Stopped, it cannot change its entry; alive, nobody takes it
		// back. Noted as killed before it dies, so that a claim that
		// falls short may free its owner slots once it is.
		held, err := shSemHeldBy(r, pid)
		if err != nil {
			rep.errs = append(rep.errs, "inspect: "+errText(err))
			return
		}
		if len(w.ids) > 0 {
			st.Killed[st.KilledN.Load()%shSemKilledCap].Store(st.Workers[w.ids[0]].Tag.Load())
		}
		st.KilledN.Add(1)
		w.cmd.Process.Kill()
		<-w.done
		rep.kills++
		rep.heldByKilled += held
		if procs[p], err = spawn(w.ids); err != nil {
			rep.errs = append(rep.errs, "replacement: "+err.Error())
			return
		}
	}
}

// shSemAllStopped waits, up to wait, until every thread of process pid
// is stopped: stopProcess looks at the main thread only, and another
// thread may still release or take permits until it takes the signal.
func shSemAllStopped(pid int, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(20 * time.Microsecond) {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return false
		}
		stopped := true
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
			i := bytes.LastIndexByte(b, ')')
			if err == nil && (i < 0 || i+2 >= len(b) || b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return true
		}
	}
	return false
}

// shSemCommand returns the command of one worker process: this binary
// re-executed, or (inC) the C worker, given the state's layout.
func shSemCommand(exe string, spec shSemSpec, inC bool) (*exec.Cmd, error) {
	if !inC {
		js, _ := json.Marshal(spec)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), shSemWorkerEnv+"="+string(js))
		return cmd, nil
	}
	b, err := cbuild.Cached()
	if err != nil {
		return nil, err
	}
	var st shSemState
	ids := make([]string, len(spec.IDs))
	for i, id := range spec.IDs {
		ids[i] = strconv.Itoa(id)
	}
	args := []string{"sem-torture", spec.Region, strconv.FormatInt(spec.Permits, 10), strconv.Itoa(btoi(spec.Kill)),
		strconv.FormatInt(spec.Iters, 10), strings.Join(ids, ",")}
	for _, off := range []uintptr{unsafe.Offsetof(st.Go), unsafe.Offsetof(st.Stop), unsafe.Offsetof(st.InUse),
		unsafe.Offsetof(st.Violations), unsafe.Offsetof(st.Owners), unsafe.Offsetof(st.Workers),
		unsafe.Sizeof(st.Workers[0]), unsafe.Offsetof(st.KilledN), unsafe.Offsetof(st.Killed), shSemKilledCap, unsafe.Sizeof(st)} {
		args = append(args, strconv.FormatUint(uint64(off), 10))
	}
	return exec.Command(b.Worker, args...), nil
}

// shSemHeldBy returns the permits that process pid holds in the run's
// semaphore, as r's inspection reads them.
func shSemHeldBy(r *shm.Region, pid int) (int64, error) {
	info, err := r.Inspect()
	if err != nil {
		return 0, err
	}
	for _, o := range info.Objects {
		if o.Name == shSemName && o.Semaphore != nil {
			for _, p := range o.Semaphore.Processes {
				if p.PID == pid {
					return p.Held, nil
				}
			}
		}
	}
	return 0, nil
}

// shSemWorkerMain is a worker process of a shared-semaphore run.
func shSemWorkerMain(specJSON string) int {
	signal := func(err error) int {
		fmt.Fprintf(os.Stderr, "lockword torture worker %d: %s\n", os.Getpid(), errText(err))
		return exitFail
	}
	var spec shSemSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return signal(err)
	}
	r, err := openTortureRegion(spec.Region)
	if err != nil {
		return signal(err)
	}
	sem, err := r.Semaphore(shSemName, spec.Permits)
	if err != nil {
		return signal(err)
	}
	st, err := openShSemState(r)
	if err != nil {
		return signal(err)
	}
	tag := uint64(os.Getpid())<<32 | uint64(rand.Uint32()|1)
	if len(spec.IDs) > 0 {
		st.Workers[spec.IDs[0]].Tag.Store(tag)
	}
	for st.Go.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(spec.IDs))
	for _, id := range spec.IDs {
		wg.Go(func() { errs <- shSemWorker(sem, st, &spec, id, tag) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return signal(err)
		}
	}
	return exitOK
}

// shSemWorker is worker id's loop.
func shSemWorker(sem *shm.Semaphore, st *shSemState, spec *shSemSpec, id int, me uint64) error {
	w := &st.Workers[id]
	rnd := uint32(id)*2654435761 ^ uint32(me>>32)
	for i := int64(0); (spec.Iters == 0 || i < spec.Iters) && st.Stop.Load() == 0; i++ {
		k := int64(1 + (i+int64(id))%semTortureMaxWeight)
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		err := sem.Acquire(ctx, k)
		cancel()
		var de *shm.SemaphoreOwnerDeadError
		if errors.As(err, &de) {
			w.Recovered.Add(de.Permits)
		} else if err != nil {
			return fmt.Errorf("worker %d: Acquire(%d): %w", id, k, err)
		}
		var bad int64
		if !spec.Kill && st.InUse.Add(k) > semTorturePermits {
			bad++
		}
		mine, short := shSemClaim(st, me, k)
		bad += short
		rnd ^= rnd << 13
		rnd ^= rnd >> 17
		rnd ^= rnd << 5
		busyWork(uint64(rnd), int(rnd>>8)%64)
		for _, s := range mine {
			if !st.Owners[s].CompareAndSwap(me, 0) {
				bad++ // someone took our permit's slot while we held it
			}
		}
		if !spec.Kill {
			st.InUse.Add(-k)
		}
		sem.Release(k)
		st.Violations.Add(bad)
		w.Acquisitions.Add(1)
		w.Permits.Add(k)
	}
	return nil
}

// shSemClaim claims k free owner slots for the process tagged me; when too few are free, it
// frees the slots of killed processes (their permits may have come back
// already) and tries again. It returns the slots claimed and how many it
// could not claim.
func shSemClaim(st *shSemState, me uint64, k int64) (mine []int, short int64) {
	for try := 0; try < 2; try++ {
		for s := range st.Owners {
			if int64(len(mine)) < k && st.Owners[s].CompareAndSwap(0, me) {
				mine = append(mine, s)
			}
		}
		if int64(len(mine)) == k {
			return mine, 0
		}
		shSemFreeKilled(st)
	}
	return mine, k - int64(len(mine))
}

// shSemFreeKilled frees the owner slots of processes the supervisor
// killed.
func shSemFreeKilled(st *shSemState) {
	n := st.KilledN.Load()
	for s := range st.Owners {
		o := st.Owners[s].Load()
		for i := uint64(0); o != 0 && i < min(n, shSemKilledCap); i++ {
			if st.Killed[i].Load() == o {
				st.Owners[s].CompareAndSwap(o, 0)
				break
			}
		}
	}
}

func (r *shSemReport) failures() []string {
	why := append([]string(nil), r.errs...)
	if r.violations > 0 {
		why = append(why, fmt.Sprintf("%d over-grants (more than %d permits in use, or an owner slot taken twice)", r.violations, semTorturePermits))
	}
	if r.want > 0 && r.acquisitions != r.want {
		why = append(why, fmt.Sprintf("%d acquisitions, want %d", r.acquisitions, r.want))
	}
	if r.recovered != r.heldByKilled {
		why = append(why, fmt.Sprintf("%d permits recovered from dead processes, but the killed ones held %d", r.recovered, r.heldByKilled))
	}
	if r.told > r.recovered {
		why = append(why, fmt.Sprintf("acquirers were told of %d recovered permits, more than the %d recovered (a recovery reported twice)", r.told, r.recovered))
	}
	if r.inUseAfter != 0 {
		why = append(why, fmt.Sprintf("%d permits in use at the end", r.inUseAfter))
	}
	return why
}

func (r *shSemReport) passed() bool { return len(r.failures()) == 0 }

func (r *shSemReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: %s\n", r.lock)
	fmt.Fprintf(w, "Processes: %d, workers: %d\n", r.procs, r.workers)
	fmt.Fprintf(w, "Permits: %d (weights 1-%d)\n", semTorturePermits, semTortureMaxWeight)
	want := "not counted: killed workers' last ones are lost"
	if r.want > 0 {
		want = "want " + strconv.FormatInt(r.want, 10)
	}
	fmt.Fprintf(w, "Acquisitions: %d (%s), permits %d\n", r.acquisitions, want, r.permits)
	fmt.Fprintf(w, "Over-grants: %d\n", r.violations)
	if r.kill {
		fmt.Fprintf(w, "Kills: %d; permits held by the killed: %d; recovered: %d; reported to acquirers: %d\n",
			r.kills, r.heldByKilled, r.recovered, r.told)
	}
	fmt.Fprintf(w, "In use at the end: %d\n", r.inUseAfter)
	fmt.Fprintf(w, "Duration: %v\n", r.elapsed.Round(time.Millisecond))
	writeResult(w, r.failures())
}

// shSemJSON is the -json line of a shared-semaphore run (its tests read
// it back).
type shSemJSON struct {
	Lock         string `json:"lock"`
	Procs        int    `json:"procs"`
	Workers      int    `json:"workers"`
	Acquisitions int64  `json:"acquisitions"`
	Want         int64  `json:"want,omitempty"`
	OverGrants   int64  `json:"over_grants"`
	Kills        int    `json:"kills"`
	HeldByKilled int64  `json:"held_by_killed"`
	Recovered    int64  `json:"recovered"`
	Told         int64  `json:"reported_recovered"`
	InUseAfter   int64  `json:"in_use_after"`
	semJSONTail
}

func (r *shSemReport) writeJSON(w io.Writer) error {
	return writeJSONLine(w, shSemJSON{r.lock, r.procs, r.workers, r.acquisitions, r.want, r.violations, r.kills, r.heldByKilled,
		r.recovered, r.told, r.inUseAfter, semTail(r.elapsed, r.failures())})
}
