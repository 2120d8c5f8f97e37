package torture

// A worker process of torture -procs (procs.go): the shared state in the
// region, the lock it opens, and the critical section with its intent
// record, which a recovering acquirer rolls back after an owner death.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/shm"
)

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

func get(b []byte, off int) uint64 { return ne.Uint64(b[off:]) }

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
func openProcLock(r *shm.Region, kind string) (procLock, error) {
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
	// BreakReaders: readers take no read lock (tests only: kinds_sharedrw.go).
	BreakReaders bool `json:"break_readers,omitempty"`
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
	rd, err := openReaders(r, spec.Kind, spec.Workers)
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
			if err := procWorker(&spec, m, st, rd, id); err != nil {
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

// procWorker runs worker id: spec.Iters writes (0: until stop), each, for
// a kind with readers (rd not nil), after a read about half the time.
func procWorker(spec *workerSpec, m procLock, st, rd []byte, id int) error {
	rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(id)))
	var sink uint64
	rl, _ := m.(procRLock)
	for n := int64(0); spec.Iters == 0 || n < spec.Iters; n++ {
		steps := 0
		if spec.Work > 0 {
			steps = rng.IntN(spec.Work + 1)
		}
		if rd != nil && rl != nil && readsThisTime(rng) {
			if err := procRead(spec, rl, st, rd, id, steps, &sink); err != nil {
				return err
			}
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
