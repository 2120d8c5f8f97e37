package main

import (
	"fmt"
	"io"

	"github.com/lockword/lockword/shm"
)

// What lockword inspect shows of a shared MPSC queue: a row in the objects
// table and a "MPSC queues:" table.

// mpscObjectRow is an MPSC queue's row in the objects table.
func mpscObjectRow(w io.Writer, o shm.ObjectInfo) {
	mi := o.MPSC
	state := "open"
	switch {
	case mi.Corrupt:
		state = "corrupt"
	case mi.Closed:
		state = "closed"
	}
	fill := mpscFill(mi)
	if !mi.Corrupt {
		fill += " full"
	}
	fmt.Fprintf(w, "  %s\t%s\t%d\t%s\t-\t-\t-\t-\t%s, see MPSC queues\n", shownName(o.Name), o.Kind, o.Offset, state, fill)
}

// mpscFill is how full an MPSC queue is: bytes claimed and not yet
// received, and the share of capacity.
func mpscFill(mi *shm.MPSCInfo) string {
	if mi.Corrupt {
		return "corrupt: " + mi.CorruptReason
	}
	return fmt.Sprintf("%d B (%.0f%%)", mi.Used, 100*float64(mi.Used)/float64(mi.Capacity))
}

// writeMPSCQueues prints the MPSC queues table.
func writeMPSCQueues(w io.Writer, queues []shm.ObjectInfo) {
	var rows []string
	for _, o := range queues {
		mi := o.MPSC
		rows = append(rows, fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%d\t%s\t%d/%d\t%d\t%d", shownName(o.Name), mi.Capacity, mpscFill(mi), yesNo(mi.Closed),
			mpscRoleText(mi.Consumer), mi.Producers, mpscRoleText(mi.Claiming), mi.MessagesSent, mi.MessagesReceived, mi.Lost, mi.ClaimsRecovered))
	}
	writeSection(w, "MPSC queues", "NAME\tCAPACITY\tFILL\tCLOSED\tCONSUMER\tPRODUCERS\tCLAIMING\tMESSAGES SENT/RECEIVED\tLOST\tCLAIMS RECOVERED", rows)
}

// mpscRoleText is a queue role's holder: roleText's, with a live holder's
// state from /proc when it is one to notice: a stopped claimer holds the
// claim word, and every producer waits on it, until it is continued (it
// is alive, so never taken back).
func mpscRoleText(p *shm.ProcessInfo) string {
	if p != nil && p.PID != 0 && p.Alive {
		if st := procState(p.PID); st != "" {
			return fmt.Sprintf("%d (%s)", p.PID, st)
		}
	}
	return roleText(p)
}
