package main

// lockword inspect's Semaphores table: per shared semaphore, its permits
// in use, and per process what it holds or awaits.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/lockword/lockword/shm"
)

// writeSemaphores prints one row per shm.Semaphore: its permits in use
// of its capacity, then each process holding or waiting ("PID 123: 2
// held", "PID 456 (dead): 1 held", "PID 789: waits for 3, ticket 7"), and
// the permits taken back from dead processes so far.
func writeSemaphores(w io.Writer, sems []shm.ObjectInfo) {
	var rows []string
	for _, o := range sems {
		si := o.Semaphore
		var procs []string
		for _, p := range si.Processes {
			who := "PID " + fmt.Sprint(p.PID)
			if p.PID == 0 {
				who = "PID unknown"
			}
			if st := semProcState(p); st != "" {
				who += " (" + st + ")"
			}
			part := fmt.Sprintf("%s: %d held", who, p.Held)
			if p.Waiting > 0 {
				part += fmt.Sprintf(", waits for %d (ticket %d)", p.Waiting, p.Ticket)
			}
			procs = append(procs, part)
		}
		if len(procs) == 0 {
			procs = []string{"-"}
		}
		rows = append(rows, fmt.Sprintf("%s\t%d/%d\t%d\t%s\t%d", shownName(o.Name), si.InUse, si.Capacity, o.Queued,
			strings.Join(procs, "; "), si.Recovered))
	}
	writeSection(w, "Semaphores", "NAME\tIN USE\tWAITING\tPROCESSES\tRECOVERED", rows)
}

// semProcState is what the Semaphores table says of a process beside its
// PID: "dead", or, for a live one, its state from /proc when an operator
// must notice it ("stopped": it holds its permits until continued, never
// taken back), as the objects table's ALIVE column does for a lock's
// holder; "" for a running one.
func semProcState(p shm.SemaphoreProcess) string {
	if !p.Alive {
		return "dead"
	}
	return procState(p.PID)
}

// semAlive is a semaphore's ALIVE column: "-" while every process holding
// permits runs (the Semaphores table says more), else the first holder
// that is dead or in a state to notice, as aliveText gives it for a
// lock's holder ("yes (stopped)"), led by its PID if several hold.
func semAlive(si *shm.SemaphoreInfo) string {
	holders := 0
	for _, p := range si.Processes {
		if p.Held != 0 {
			holders++
		}
	}
	for _, p := range si.Processes {
		if p.Held == 0 || semProcState(p) == "" {
			continue
		}
		if holders > 1 {
			return fmt.Sprintf("%d: %s", p.PID, aliveText(p.PID, p.Alive))
		}
		return aliveText(p.PID, p.Alive)
	}
	return "-"
}

// semHolders is a semaphore's HOLDER column: the PIDs of the processes
// holding permits ("unknown" for a dead one whose slot was taken), or
// their number past three; "-" when none holds. A semaphore has no one
// holder, so HELD FOR stays "-", and ALIVE is semAlive's: its Semaphores
// row says more.
func semHolders(si *shm.SemaphoreInfo) string {
	var pids []string
	for _, p := range si.Processes {
		if p.Held == 0 {
			continue
		}
		pid := fmt.Sprint(p.PID)
		if p.PID == 0 {
			pid = "unknown"
		}
		pids = append(pids, pid)
	}
	switch {
	case len(pids) == 0:
		return "-"
	case len(pids) > 3:
		return fmt.Sprintf("%d processes", len(pids))
	}
	return strings.Join(pids, ",")
}

// semDropHolder removes from a semaphore's JSON object the one-holder
// fields (holder_alive, held_for_ns, held_for_known), which would say
// falsely that no live process holds it; semaphore.processes lists them.
func semDropHolder(b []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "holder_alive")
	delete(m, "held_for_ns")
	delete(m, "held_for_known")
	return json.Marshal(m)
}
