package main

// The inspect subcommand: show every object of a shared region and the
// live state of its locks, for an operator at 3 a.m. who wants to know who
// holds what, whether that process is still alive, and for how long.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockword/lockword"
)

const inspectSummary = "show the objects and lock states of a shared region file"

func inspectHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: lockword inspect [-json] PATH

Inspect opens the region file at PATH (a name without a slash is looked up
under /dev/shm) as an observer: it attaches no process and takes no lock.
For each object it prints its name, kind and offset and, for locks:

  STATE    free, held, contended (held, a process may be asleep waiting),
           owner-dead (the holder died; the next acquirer recovers it, or
           a recoverer holds it and has not marked it consistent), or
           not-recoverable; for a ticket mutex (and an rwmutex's writers)
           ", N queued" counts the processes waiting their turn, and for
           an rwmutex "read-held" and ", N readers" count read holds;
           "handoff": granted to the next ticket, not yet taken by it;
           a cond is "idle", or "waiting, N queued" (goroutines in Wait);
           "corrupt (REASON)": its words hold a state that no valid
           history produces (written by something other than lockword);
           its lock calls return ErrCorrupt: recreate the region
  HOLDER   the holding process's PID, and whether it is alive (a stopped
           process, kill -STOP, is alive: it is never robbed); "unknown"
           when the holder died and its process-table slot has since been
           taken by another process
  HELD FOR at least how long the current hold has lasted ("≥"), from a
           stamp that follows the hold's start: the acquirer's, written
           microseconds after it took the lock, for holds that began on
           the slow path or with statistics on; otherwise the stamp that
           inspect wrote when it first saw the hold (shown as ≥0s then),
           so that running inspect again shows it growing. "unknown" for
           such a hold when inspect cannot write the file (see below)
  STATS    acquisitions, slow-path share and longest wait, when statistics
           are enabled (SharedMutex.EnableStats)

It then lists the attached processes.

Inspect needs only read access to the file. When it may write, it stamps
each hold that began on the fast path: it stores the time in the lock's
held-since field and sets the lock word's timed bit (bit 31) by
compare-and-swap, changing no ownership or waiter bit; the holder's next
Unlock takes its slow path once, which clears the bit. Nothing else is
written. Without write access (a monitoring user, a read-only mount) it
opens the file read-only, writes nothing at all, and prints "Read-only:"
(-json: "read_only": true); HELD FOR is then unknown for fast-path holds
that no earlier inspection stamped.

Flags:
  -json   print the region as one JSON object (lockword.RegionInfo); an
          object that is not a lock (kind bytes) has only name, kind,
          offset and size_bytes, a lock also state (one of the STATE
          values above), word, holder_pid, holder_alive, held_for_ns,
          held_for_known, waiters, inconsistent, stats and,
          for state corrupt, reason

Exit status:
  0  the region was read
  2  usage error, or the file could not be opened as a region (missing,
     not a regular file, not a lockword region, corrupt), or it was
     truncated while inspect read it ("region file truncated": inspect
     survives that, as it does a file shrunk before it looked): the error
     says which check failed

Examples:
  lockword inspect orders                 # /dev/shm/orders
  watch -n1 lockword inspect /dev/shm/orders
  lockword inspect -json orders | jq '.objects[] | select(has("state") and .state != "free")'
`)
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockword inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			inspectHelp(stdout)
			return exitOK
		}
		fmt.Fprintln(stderr, "Run 'lockword inspect -help' for usage.")
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "lockword inspect: expected exactly one region PATH")
		fmt.Fprintln(stderr, "Run 'lockword inspect -help' for usage.")
		return exitUsage
	}
	info, err := lockword.InspectRegion(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "lockword inspect: %s\n", errText(err))
		return exitUsage
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(info); err != nil {
			fmt.Fprintf(stderr, "lockword inspect: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	writeInspectText(stdout, info)
	return exitOK
}

func writeInspectText(w io.Writer, info *lockword.RegionInfo) {
	fmt.Fprintf(w, "Region: %s (%d bytes, ABI version %d, created %s)\n",
		info.Path, info.Size, info.Version, info.Created.Format(time.RFC3339))
	if info.ReadOnly {
		fmt.Fprintln(w, "Read-only: no write access to the file, so nothing was stamped: HELD FOR is unknown for holds that began on the fast path")
	}
	fmt.Fprintf(w, "Objects: %d\n", len(info.Objects))
	if len(info.Objects) > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tKIND\tOFFSET\tSTATE\tHOLDER\tALIVE\tHELD FOR\tWAITERS\tSTATS")
		for _, o := range info.Objects {
			if o.State == "" { // not a lock
				fmt.Fprintf(tw, "  %s\t%s\t%d\t-\t-\t-\t-\t-\t%d bytes\n", shownName(o.Name), o.Kind, o.Offset, o.Size)
				continue
			}
			holder, alive, held := "-", "-", "-"
			switch o.State {
			case "free", "not-recoverable", "read-held", "handoff", "idle", "waiting", "corrupt":
				// Nobody holds it (readers are counted, not owned).
			default:
				holder = "unknown" // died, and its slot was taken since
				if o.HolderPID != 0 {
					holder = fmt.Sprint(o.HolderPID)
				}
				alive = yesNo(o.HolderAlive)
				held = "unknown"
				if o.HeldForKnown {
					held = "≥" + o.HeldFor.Round(time.Millisecond).String()
				}
			}
			state := o.State
			if o.Reason != "" {
				state += " (" + o.Reason + ")"
			}
			if o.Inconsistent && o.HolderAlive {
				state += " (recovering)"
			}
			if o.Queued > 0 {
				state += fmt.Sprintf(", %d queued", o.Queued)
			}
			if o.Readers > 0 {
				state += fmt.Sprintf(", %d readers", o.Readers)
			}
			stats := "off"
			if s := o.Stats; s != nil {
				stats = fmt.Sprintf("%d acq, %.1f%% slow, max wait %v", s.Acquisitions, 100*s.SlowPathFraction(), s.WaitMax.Round(time.Microsecond))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", shownName(o.Name), o.Kind, o.Offset, state, holder, alive, held, yesNo(o.Waiters), stats)
		}
		tw.Flush()
	}
	alive := 0
	for _, p := range info.Processes {
		if p.Alive {
			alive++
		}
	}
	fmt.Fprintf(w, "Processes attached: %d (%d alive)\n", len(info.Processes), alive)
	if len(info.Processes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  SLOT\tPID\tALIVE")
		for _, p := range info.Processes {
			fmt.Fprintf(tw, "  %d\t%d\t%s\n", p.Slot, p.PID, yesNo(p.Alive))
		}
		tw.Flush()
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// shownName is an object name as the table prints it: quoted (Go syntax)
// if it is not plain printable UTF-8 or holds a tab or space, which
// lockword never creates but a foreign or damaged file may hold, so that
// a name can neither forge a row nor send escape sequences to the
// terminal.
func shownName(name string) string {
	for _, c := range name {
		if c == utf8.RuneError || c == ' ' || !unicode.IsPrint(c) {
			return strconv.Quote(name)
		}
	}
	return name
}
