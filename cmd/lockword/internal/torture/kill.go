package torture

// torture -procs -kill: the supervisor's kill loop, which SIGKILLs worker
// processes at random, every other kill aimed at the lock's holder, and
// what it saw (killReport; its latencies: kill_latency.go).

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/lockword/lockword/shm"
)

// killReport is what a -kill run's supervisor saw. Its JSON form is part
// of torture's -json output (field kill).
type killReport struct {
	Kills int `json:"kills"`
	// HolderKills counts kills of the lock's holder; each must be
	// recovered exactly once: Recoveries == HolderKills (a recovery
	// without a dead holder would be a live holder robbed).
	HolderKills int `json:"holder_kills"`
	// ReaderKills counts kills of a process with a worker inside a read
	// (kinds with readers only, else omitted): no recovery follows one;
	// MaxReaderKillToWriteMs is the longest time from such a kill to the
	// next completed write, which must come within hangTimeout.
	ReaderKills            *int     `json:"reader_kills,omitempty"`
	MaxReaderKillToWriteMs *float64 `json:"max_reader_kill_to_write_ms,omitempty"`
	Recoveries             int64    `json:"recoveries"`
	RolledBack             int64    `json:"rolled_back"`
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
	// missed records, for each kill judged to be of no holder, what the
	// supervisor saw then; recoveredPIDs lists the dead PID of every
	// recovery (from the run's recovery log). When the counts disagree,
	// failures names the recoveries that no judged holder kill accounts
	// for, and what their kill looked like.
	missed        map[int]string
	recoveredPIDs []int
	// detections and repairs are each timed recovery's latencies.
	detections, repairs []time.Duration
	// awaiting: the run was interrupted while a killed holder's recovery
	// was still to come; awaitingFrom is the recovery count then (the
	// kill is counted in HolderKills already).
	awaiting     bool
	awaitingFrom uint64
}

func (k *killReport) writeText(w io.Writer) {
	if k.ReaderKills != nil {
		fmt.Fprintf(w, "Kills: %d (%d of the lock's holder, %d of a reader)\n", k.Kills, k.HolderKills, *k.ReaderKills)
		fmt.Fprintf(w, "Reader kill to next write: max %.1f ms\n", *k.MaxReaderKillToWriteMs)
	} else {
		fmt.Fprintf(w, "Kills: %d (%d of the lock's holder)\n", k.Kills, k.HolderKills)
	}
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
		why = append(why, fmt.Sprintf("%d recoveries for %d kills of a holder%s", k.Recoveries, k.HolderKills, k.unaccounted()))
	}
	for _, e := range k.WorkerErrors {
		why = append(why, e)
	}
	return why
}

// unaccounted describes the recoveries that the judged holder kills do not
// account for: a dead PID recovered twice (one death reported to two
// acquirers), or one whose kill was judged to be of no holder (with what
// the lock showed then). "" if none stands out.
func (k *killReport) unaccounted() string {
	var out []string
	times := map[int]int{}
	for _, pid := range k.recoveredPIDs {
		times[pid]++
	}
	for _, pid := range k.recoveredPIDs {
		switch n := times[pid]; {
		case n > 1:
			out = append(out, fmt.Sprintf("PID %d recovered %d times", pid, n))
		case k.missed[pid] != "":
			out = append(out, fmt.Sprintf("PID %d recovered, but its kill was judged no holder's (%s)", pid, k.missed[pid]))
		default:
			continue
		}
		times[pid] = 0 // once each
	}
	if len(out) == 0 {
		return ""
	}
	return ": " + strings.Join(out, "; ")
}

// killLoop is the -kill supervisor: kill a worker process (half the time
// the lock's holder; for a kind with readers, whose reader area rd is not
// nil, a quarter of the time a read holder), start a replacement with the
// same worker ids, and, when the victim held the lock, wait for its
// recovery and time it; when it held a read lock, wait for the next
// completed write and time that.
func killLoop(cfg *config, r *shm.Region, st, rd []byte, procs []*workerProc, spawn func(int, []int) (*workerProc, error)) *killReport {
	kr := &killReport{killed: map[int]bool{}, missed: map[int]string{}}
	var readerKills int
	var maxReaderToWrite time.Duration
	if rd != nil {
		defer func() {
			ms := float64(maxReaderToWrite) / float64(time.Millisecond)
			kr.ReaderKills, kr.MaxReaderKillToWriteMs = &readerKills, &ms
		}()
	}
	start := time.Now()
	lastTotal, lastProgress := get(st, stCounter), time.Now()
	for kr.Kills < cfg.kills && (!cfg.timed() || time.Since(start) < cfg.duration) && !cfg.interrupt.Interrupted() {
		time.Sleep(rand.N(killMaxGap))
		victim := rand.IntN(len(procs))
		switch aim := rand.IntN(4); {
		case aim < 2:
			if i, ok := catchHolder(st, procs, holderWait); ok {
				victim = i // stopped inside the critical section
			}
		case aim == 2 && rd != nil:
			if i, ok := catchReader(rd, cfg.workers, procs, holderWait); ok {
				victim = i // stopped inside a read
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
		// A process the lock was handed to (shm.Mutex's hand-off) that
		// had not yet returned it to its worker held nothing: the next
		// waiter takes the lock back without ErrOwnerDead, and no recovery
		// follows. (One killed between the two CASes of handing it over
		// still held it: its death is recovered as any holder's.)
		pid, inconsistent, handedOff, err := holder(r)
		if err != nil {
			// Judging the kill without the lock's state could take a
			// holder for no holder: stop, and say why.
			kr.WorkerErrors = append(kr.WorkerErrors, fmt.Sprintf("kill %d, of PID %d: reading the lock's state: %v", kr.Kills, w.cmd.Process.Pid, err))
			return kr
		}
		recovering, recoveries := get(st, stRecovering), get(st, stRecoveries)
		held := (pid == w.cmd.Process.Pid && !handedOff) || inconsistent || int(recovering) == w.cmd.Process.Pid ||
			recoveries != recoveredBefore
		if !held {
			kr.missed[w.cmd.Process.Pid] = fmt.Sprintf("kill %d: holder PID %d, inconsistent %v, handed off %v, recovering from PID %d, %d recoveries",
				kr.Kills, pid, inconsistent, handedOff, recovering, recoveries)
		}
		var reading bool
		var writesAtKill uint64
		if rd != nil {
			// A reader marks itself only holding a read lock: a dead
			// mark is a dead read holder (one that died just after
			// RLock or just before RUnlock is missed, and counted as
			// a kill of no holder).
			reading = !held && readingAmong(rd, cfg.workers, w.ids)
			clearReading(rd, cfg.workers, w.ids)
			writesAtKill = get(st, stCounter)
		}
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
		if reading {
			// No recovery: readers write nothing the lock guards. But
			// the next writer must drop the dead reader's holds and get
			// in: wait for a write to complete (the counter moves only
			// by completed writes, or by a rollback, which needs a
			// holder kill, each awaited above).
			readerKills++
			for get(st, stCounter) == writesAtKill {
				if cfg.interrupt.Interrupted() {
					return kr
				}
				if time.Since(killedAt) > hangTimeout {
					kr.Hangs++
					kr.WorkerErrors = append(kr.WorkerErrors, fmt.Sprintf("no write completed within %v of kill %d, of PID %d, a reader", hangTimeout, kr.Kills, w.cmd.Process.Pid))
					return kr
				}
				time.Sleep(100 * time.Microsecond)
			}
			maxReaderToWrite = max(maxReaderToWrite, time.Since(killedAt))
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

// catchReader is catchHolder for read holders: it stops a process with a
// worker marked inside a read (rd, kinds_sharedrw.go) and checks the mark
// again once it is stopped; it gives up after wait.
func catchReader(rd []byte, workers int, procs []*workerProc, wait time.Duration) (int, bool) {
	deadline := time.Now().Add(wait)
	for {
		i, ok := -1, false
		for ; !ok && !time.Now().After(deadline); runtime.Gosched() {
			for j, w := range procs {
				if readingAmong(rd, workers, w.ids) {
					i, ok = j, true
					break
				}
			}
		}
		if !ok {
			return 0, false
		}
		w := procs[i]
		if stopProcess(w.cmd.Process, time.Until(deadline)) && readingAmong(rd, workers, w.ids) {
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

// holder returns the PID of the torture lock's holder (0 if none), whether
// the lock is inconsistent (taken from a dead owner by an acquirer that has
// not yet marked it consistent) and whether it was handed off (see
// ObjectInfo.HandedOff), or the error that kept Inspect from telling.
func holder(r *shm.Region) (pid int, inconsistent, handedOff bool, err error) {
	info, err := r.Inspect()
	if err != nil {
		return 0, false, false, err
	}
	for _, o := range info.Objects {
		if o.Name == lockName {
			if o.State == "corrupt" {
				return 0, false, false, fmt.Errorf("lock %q is corrupt: %s", lockName, o.Reason)
			}
			return o.HolderPID, o.Inconsistent, o.HandedOff, nil
		}
	}
	return 0, false, false, fmt.Errorf("no object %q in the region", lockName)
}
