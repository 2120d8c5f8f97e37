package main

// The inspect subcommand: show every object of a shared region and the
// live state of its locks, for an operator at 3 a.m. who wants to know who
// holds what, whether that process is still alive, and for how long.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockword/lockword/shm"
)

const inspectSummary = "show the objects and lock states of a shared region file"

func inspectHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: lockword inspect [-json] [-all] PATH

Flags may come before or after PATH (lockword inspect orders -json).

Inspect opens the region file at PATH (a name without a slash is looked up
under /dev/shm) as an observer: it attaches no process and takes no lock.
For each object it prints its name, kind and offset and, for locks:

  STATE    free, held, contended (held, a process may be asleep waiting),
           owner-dead (the holder died; the next acquirer recovers it, or
           a recoverer holds it and has not marked it consistent), or
           not-recoverable; for a ticket mutex (and an rwmutex's writers)
           ", N queued" counts the processes waiting their turn, and for
           an rwmutex "read-held" and ", N readers" count read holds of
           live processes, ", N dead readers" those of dead processes
           (the next writer drops them; -json: dead_readers);
           "handoff": granted to the next ticket, not yet taken by it;
           a mutex whose waiter has waited 1 ms adds ", hand-off
           requested by PID N" (the next Unlock hands it the lock), and
           one just handed over ", handed to PID N" (that process has not
           yet returned it to its caller; -json: handoff, and handed_off
           true when the grant names the holder itself: if it dies now
           the next waiter takes the lock back without owner-dead);
           a cond is "idle", or "waiting, N queued" (goroutines in Wait);
           "corrupt (REASON)": its words hold a state that no valid
           history produces (written by something other than lockword);
           its lock calls return ErrCorrupt: recreate the region
  HOLDER   the holding process's PID, and whether it is alive (a stopped
           process, kill -STOP, is alive: it is never robbed); "unknown"
           when the holder died and its process-table slot has since been
           taken by another process
  ALIVE    yes or no, and the process's state from /proc/PID/stat when it
           matters: "yes (stopped)" (kill -STOP or a job-control stop: it
           holds the lock until continued), "yes (tracing stop)" (held by a
           debugger), "no (zombie)" (exited holding, not yet reaped)
  HELD FOR how long the current hold has lasted, and from which stamp:
           "1.5s (acquired)" with statistics on (every acquisition then
           stamps the hold as it takes the lock); otherwise
           "≥1.5s (first seen)", at least that long: from the first stamp
           of the hold, the acquirer's if it began on the slow path, else
           the one inspect wrote when it first saw the hold (≥0s then;
           running inspect again shows it growing). Turn statistics on
           (shm.Mutex.EnableStats) to see a hold's whole length on the
           first look. "unknown" for a fast-path hold that no inspect has
           stamped when inspect cannot write the file (see below)
  STATS    acquisitions, slow-path share and longest wait, when statistics
           are enabled (shm.Mutex.EnableStats)

A shared semaphore (kind semaphore) is "free", "held", "contended, N
queued" (processes waiting their turn) or "owner-dead" (a dead process
still holds permits: the next acquirer that finds it short takes them
back); its HOLDER is the PIDs holding permits, and ALIVE is "-" unless
one of them is dead or stopped (then as for a lock's holder). A
"Semaphores:" table follows: permits in use of its capacity, each
process's permits held and what it waits for (dead and stopped ones
marked), and the permits taken back from dead processes so far.

A ring (kind ring: RingProducer/RingConsumer) shows open or closed and
its fill level in the table, and a "Rings:" table after it: capacity, fill
(record bytes published and not yet received), closed, the producer's and
the consumer's PID and whether each lives ("-" for a role nobody holds),
and the messages and record bytes sent and received since it was created.
An MPSC queue (kind mpsc queue: MPSCProducer/MPSCConsumer) shows open
or closed and its fill in the table, and an "MPSC queues:" table: capacity,
fill (record bytes claimed and not yet received), closed, the consumer's
PID and whether it lives, the producer handles attached (those of dead
processes stay counted: each Close subtracts its own), the process
holding the claim word if one does, messages sent and received, records
lost (their producer died between claim and publish) and claims taken
back from dead producers.
A seqlock (shm.NewSeqLock) shows its writers' lock in the table, and a
"Seqlocks:" table: the sequence, the Stores completed, and the writer:
idle, storing (PID, alive), or died mid-Store (the value is torn until the
next Store).

It then lists the attached processes that are alive; dead process slots
(left by processes that exited without closing the region, or were
killed) are counted and hidden, unless -all is given.

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
  -all    list dead process slots too
  -json   print the region as one JSON object (shm.RegionInfo) on
          one line, as every lockword -json output is (JSON Lines: run
          inspect in a loop and each line is a snapshot; pipe to jq . to
          read it indented). An object that is not a lock (kind bytes,
          ring) has only name, kind, offset and size_bytes (a ring adds
          ring: capacity_bytes, producer and consumer ({slot, pid, alive},
          absent for a role nobody holds), used_bytes, closed, bytes_sent, bytes_received,
          messages_sent, messages_received), a lock also state (one of
          the STATE values above), word, holder_pid, holder_alive,
          holder_state (the holder's process state, as ALIVE shows it:
          running, stopped, tracing stop, zombie or dead; absent where
          unknown), held_for_ns (always present: 0 with held_for_known true is a
          hold stamped just now), held_for_known, waiters, inconsistent
          and stats (a seqlock adds seqlock: sequence, stores, writing,
          torn; a semaphore has no holder_alive, held_for_ns nor
          held_for_known, its holders being semaphore.processes), and for
          state corrupt, reason. processes lists every
          slot, dead ones included, with alive and state (as
          holder_state): -all changes only the text

With -etcd host:port,... the argument is instead the key prefix of an
etcdlock.Mutex on that etcd cluster (see "lockword inspect -etcd" below).

Deadlocks: each process's sleeping waiter records which shared lock it
waits for; inspect follows waiter -> lock -> holder process -> the lock
that process waits for ..., and reports every cycle under "Deadlocks:"
("PID 41 holds a, waits for b; PID 42 holds b, waits for a"; -json:
"deadlocks", a list of {"members": [{pid, slot, holds, waits_for}]},
[] when there is none). A cycle counts only if it reads the same twice,
50 ms apart. Covered: shm.Mutex (Go and C), TicketMutex, and RWMutex
waits for a writer (queued writers, readers behind a writer). A process records one wait
at a time (its first sleeping waiter), so a cycle through its other
waiters is missed; and inspect sees processes, not threads: a cycle
whose holding thread is not itself blocked resolves when it unlocks.

Exit status:
  0  the region was read
  1  the region was read, and some object is corrupt (a lock's STATE
     corrupt, a ring's impossible indices, an MPSC queue's impossible
     indices, producer count or owner words), or processes are
     deadlocked (see Deadlocks above): the report is printed as usual, and standard
     error names the corrupt objects and the deadlocks
  2  usage error, or the file could not be opened as a region (missing,
     not a regular file, not a lockword region, corrupt), or it was
     truncated while inspect read it ("region file truncated": inspect
     survives that, as it does a file shrunk before it looked): the error
     says which check failed

etcd locks (lockword inspect -etcd host:port,... PREFIX):
  reads the lock's hold record and queue under PREFIX without changing
  them, and prints its state (free, held, held and inconsistent, owner
  dead, not recoverable), the holder's host, PID and lease, its fencing
  token, how long it has held (the holder's clock), the time its lease has
  left, and the waiters in their order. For an etcdlock.Election on
  PREFIX it adds the leader, its value, its term's fencing token and its
  lease's time left (the waiters are the campaigners), and the observers:
  each Election.Observe in progress registers a key of its own,
  PREFIX/observers/<lease>-<nonce>, on its lease, naming its host, PID,
  the Election's SetName name and since when it observes (gone when
  Observe ends or its lease expires; the package-level etcdlock.Observe
  registers nothing). For an etcdlock.RWMutex it adds its readers in
  order of arrival (the holder and waiters are its writers). -json prints
  etcdlock.Info's fields, with [] for an empty list and a missing holder
  or time left out, "election" when there is a leader, "readers" and
  "observers".
  It exits 1, with standard error naming the records, when it reports
  records no valid history writes (state corrupt, an election's leader
  record, a semaphore's stored count or keys): their calls fail with
  ErrCorrupt. An unreachable etcd is an error after 5 s (exit status 2).

Examples:
  lockword inspect orders                 # /dev/shm/orders
  lockword inspect -etcd 127.0.0.1:2379 /locks/orders
  watch -n1 lockword inspect /dev/shm/orders
  lockword inspect orders -all           # dead process slots too
  lockword inspect -json orders | jq '.objects[] | select(has("state") and .state != "free")'
`)
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lockword inspect")
	asJSON := fs.Bool("json", false, "print JSON")
	all := fs.Bool("all", false, "list dead process slots too")
	etcdEndpoints := fs.String("etcd", "", "inspect an etcd lock PREFIX at these endpoints")
	if st := parseFlags(fs, args, stdout, stderr, inspectHelp); st >= 0 {
		return st
	}
	paths := fs.Args()
	if len(paths) != 1 {
		what := "region PATH"
		if *etcdEndpoints != "" {
			what = "etcd key PREFIX (with -etcd)"
		}
		if len(paths) == 0 {
			fmt.Fprintf(stderr, "lockword inspect: expected exactly one %s, got none\n", what)
		} else {
			fmt.Fprintf(stderr, "lockword inspect: expected exactly one %s, got %d: %q\n", what, len(paths), paths)
		}
		fmt.Fprintln(stderr, "Run 'lockword inspect -help' for usage.")
		return exitUsage
	}
	if *etcdEndpoints != "" {
		return inspectEtcd(*etcdEndpoints, paths[0], *asJSON, stdout, stderr)
	}
	if paths[0] == "" {
		// Else the open's "invalid argument", which names no path.
		fmt.Fprintln(stderr, "lockword inspect: the region PATH is empty")
		fmt.Fprintln(stderr, "Run 'lockword inspect -help' for usage.")
		return exitUsage
	}
	info, err := shm.Inspect(paths[0])
	if err != nil {
		fmt.Fprintf(stderr, "lockword inspect: %s\n", errText(err))
		return exitUsage
	}
	if *asJSON {
		// One line, as torture -json: see the help.
		if err := json.NewEncoder(stdout).Encode(newInspectJSON(info)); err != nil {
			fmt.Fprintf(stderr, "lockword inspect: %v\n", err)
			return exitFail
		}
	} else {
		writeInspectText(stdout, info, *all)
	}
	status := corruptStatus(info, stderr)
	if len(info.Deadlocks) > 0 {
		for _, d := range info.Deadlocks {
			fmt.Fprintf(stderr, "lockword inspect: deadlock: %s\n", d)
		}
		status = exitFail
	}
	return status
}

// inspectJSON is inspect -json's object: the shm.RegionInfo, with
// the state of each attached process ("state") and of each lock's holder
// ("holder_state") that the text view shows in its ALIVE columns:
// processState's "running", "stopped", "tracing stop", "zombie" or
// "dead", left out where unknown.
type inspectJSON struct {
	*shm.RegionInfo
	Objects   []objectJSON   `json:"objects"`
	Processes []processJSON  `json:"processes"`
	Deadlocks []shm.Deadlock `json:"deadlocks"`
}

type processJSON struct {
	shm.ProcessInfo
	State string `json:"state,omitempty"`
}

type objectJSON struct {
	shm.ObjectInfo
	HolderState string
}

// MarshalJSON is ObjectInfo's JSON object with holder_state added: the
// embedded type's own MarshalJSON (which leaves out a non-lock's lock
// fields) would otherwise be promoted and drop the field.
func (o objectJSON) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(o.ObjectInfo)
	if err == nil && o.Semaphore != nil {
		b, err = semDropHolder(b)
	}
	if err != nil || o.HolderState == "" || len(b) < 2 || b[len(b)-1] != '}' {
		return b, err
	}
	st, _ := json.Marshal(o.HolderState)
	b = append(b[:len(b)-1], `,"holder_state":`...)
	return append(append(b, st...), '}'), nil
}

func newInspectJSON(info *shm.RegionInfo) inspectJSON {
	// Every list is [] when empty, never null (inspect's help promises it).
	j := inspectJSON{RegionInfo: info, Objects: []objectJSON{}, Processes: []processJSON{}, Deadlocks: info.Deadlocks}
	if j.Deadlocks == nil {
		j.Deadlocks = []shm.Deadlock{}
	}
	for _, o := range info.Objects {
		oj := objectJSON{ObjectInfo: o}
		if o.HolderPID != 0 {
			oj.HolderState = processState(o.HolderPID, o.HolderAlive)
		}
		j.Objects = append(j.Objects, oj)
	}
	for _, p := range info.Processes {
		j.Processes = append(j.Processes, processJSON{ProcessInfo: p, State: processState(p.PID, p.Alive)})
	}
	return j
}

// corruptStatus is inspect's exit status for a region it read: exitFail,
// with the corrupt objects named on stderr, if any object's words hold a
// state that no valid history produces (a script that runs inspect as a
// check must not read that as healthy), else exitOK.
func corruptStatus(info *shm.RegionInfo, stderr io.Writer) int {
	var bad []string
	for _, o := range info.Objects {
		switch {
		case o.State == "corrupt":
			bad = append(bad, fmt.Sprintf("%s (%s)", shownName(o.Name), o.Reason))
		case o.Ring != nil && o.Ring.Corrupt:
			bad = append(bad, fmt.Sprintf("%s (ring indices impossible: ErrRingCorrupt)", shownName(o.Name)))
		case o.MPSC != nil && o.MPSC.Corrupt:
			bad = append(bad, fmt.Sprintf("%s (MPSC queue %s)", shownName(o.Name), o.MPSC.CorruptReason))
		}
	}
	if len(bad) == 0 {
		return exitOK
	}
	objects := "objects"
	if len(bad) == 1 {
		objects = "object"
	}
	fmt.Fprintf(stderr, "lockword inspect: %d corrupt %s: %s; their calls fail with ErrCorrupt (ErrRingCorrupt for a ring): recreate the region\n",
		len(bad), objects, strings.Join(bad, "; "))
	return exitFail
}

// parseInterspersed parses fs's flags wherever they stand among args, as
// users type them ("inspect orders -json"), and returns the other
// arguments in order. Everything after "--" is an argument, so a path
// that starts with "-" can still be given.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if n := len(args) - len(left); n > 0 && args[n-1] == "--" {
			return append(rest, left...), nil // Parse stopped at "--"
		}
		rest, args = append(rest, left[0]), left[1:]
	}
}

func writeInspectText(w io.Writer, info *shm.RegionInfo, all bool) {
	fmt.Fprintf(w, "Region: %s (%d bytes, ABI version %d, created %s)\n",
		info.Path, info.Size, info.Version, info.Created.Format(time.RFC3339))
	if info.ReadOnly {
		fmt.Fprintln(w, "Read-only: no write access to the file, so nothing was stamped: HELD FOR is unknown for holds that began on the fast path")
	}
	fmt.Fprintf(w, "Objects: %d\n", len(info.Objects))
	var rings, seqlocks, sems, queues []shm.ObjectInfo
	if len(info.Objects) > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tKIND\tOFFSET\tSTATE\tHOLDER\tALIVE\tHELD FOR\tWAITERS\tSTATS")
		for _, o := range info.Objects {
			if o.SeqLock != nil {
				seqlocks = append(seqlocks, o)
			}
			if o.Semaphore != nil {
				sems = append(sems, o)
			}
			if o.MPSC != nil {
				queues = append(queues, o)
				mpscObjectRow(tw, o)
				continue
			}
			if ri := o.Ring; ri != nil {
				rings = append(rings, o)
				fill := ringFill(ri) + " full"
				if ri.Corrupt {
					fill = ringFill(ri)
				}
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t-\t-\t-\t-\t%s, see Rings\n", shownName(o.Name), o.Kind, o.Offset, ringState(ri), fill)
				continue
			}
			if o.State == "" { // not a lock
				fmt.Fprintf(tw, "  %s\t%s\t%d\t-\t-\t-\t-\t-\t%d bytes\n", shownName(o.Name), o.Kind, o.Offset, o.Size)
				continue
			}
			holder, alive, held := "-", "-", "-"
			switch o.State {
			case "free", "not-recoverable", "read-held", "handoff", "idle", "waiting", "corrupt":
				// No one process holds it: read holds are counted per
				// process slot (the STATE column's "N readers", and
				// "N dead readers" that the next writer drops).
			default:
				if o.Semaphore != nil { // held by processes, not by one
					holder, alive = semHolders(o.Semaphore), semAlive(o.Semaphore)
					break
				}
				holder = "unknown" // died, and its slot was taken since
				if o.HolderPID != 0 {
					holder = fmt.Sprint(o.HolderPID)
				}
				alive = aliveText(o.HolderPID, o.HolderAlive)
				held = heldText(&o)
			}
			state := o.State
			if o.Reason != "" {
				state += " (" + o.Reason + ")"
			}
			if o.Inconsistent && o.HolderAlive {
				state += " (recovering)"
			}
			if o.Handoff != "" {
				state += ", " + o.Handoff
			}
			if o.Queued > 0 {
				state += fmt.Sprintf(", %d queued", o.Queued)
			}
			if o.Readers > 0 {
				state += fmt.Sprintf(", %d readers", o.Readers)
			}
			if o.DeadReaders > 0 {
				state += fmt.Sprintf(", %d dead readers", o.DeadReaders)
			}
			stats := "off"
			if s := o.Stats; s != nil {
				stats = fmt.Sprintf("%d acq, %.1f%% slow, max wait %v", s.Acquisitions, 100*s.SlowPathFraction(), s.WaitMax.Round(time.Microsecond))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", shownName(o.Name), o.Kind, o.Offset, state, holder, alive, held, yesNo(o.Waiters), stats)
		}
		tw.Flush()
	}
	writeRings(w, rings)
	writeMPSCQueues(w, queues)
	writeSeqLocks(w, seqlocks)
	writeSemaphores(w, sems)
	writeProcesses(w, info.Processes, all)
	writeDeadlocks(w, info.Deadlocks)
}

// writeDeadlocks lists the region's deadlock cycles, if any.
func writeDeadlocks(w io.Writer, ds []shm.Deadlock) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(w, "Deadlocks: %d\n", len(ds))
	for _, d := range ds {
		fmt.Fprintf(w, "  %s\n", d)
	}
}

// writeRings prints the Rings table: one row per shared byte ring.
func writeRings(w io.Writer, rings []shm.ObjectInfo) {
	var rows []string
	for _, o := range rings {
		ri := o.Ring
		rows = append(rows, fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s\t%d/%d\t%d/%d", shownName(o.Name), ri.Capacity, ringFill(ri), yesNo(ri.Closed),
			roleText(ri.Producer), roleText(ri.Consumer), ri.MessagesSent, ri.MessagesReceived, ri.BytesSent, ri.BytesReceived))
	}
	writeSection(w, "Rings", "NAME\tCAPACITY\tFILL\tCLOSED\tPRODUCER\tCONSUMER\tMESSAGES SENT/RECEIVED\tBYTES SENT/RECEIVED", rows)
}

// writeSection prints a titled table, "Title: n" and its tab-separated
// rows under header, or nothing when it has no rows.
func writeSection(w io.Writer, title, header string, rows []string) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "%s: %d\n", title, len(rows))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  "+header)
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+r)
	}
	tw.Flush()
}

// ringState is a ring's STATE in the objects table.
func ringState(ri *shm.RingInfo) string {
	switch {
	case ri.Corrupt:
		return "corrupt"
	case ri.Closed:
		return "closed"
	}
	return "open"
}

// ringFill is how full a ring is: bytes used and the share of capacity.
func ringFill(ri *shm.RingInfo) string {
	if ri.Corrupt {
		return "corrupt indices"
	}
	return fmt.Sprintf("%d B (%.0f%%)", ri.Used, 100*float64(ri.Used)/float64(ri.Capacity))
}

// roleText is a ring role's holder: its PID and whether it lives, or "-".
func roleText(p *shm.ProcessInfo) string {
	switch {
	case p == nil:
		return "-"
	case p.PID == 0:
		return "unknown (dead)" // its slot was taken since
	case p.Alive:
		return fmt.Sprintf("%d (alive)", p.PID)
	}
	return fmt.Sprintf("%d (dead)", p.PID)
}

// writeSeqLocks prints the Seqlocks table: sequence and writer state.
func writeSeqLocks(w io.Writer, seqlocks []shm.ObjectInfo) {
	var rows []string
	for _, o := range seqlocks {
		sl := o.SeqLock
		writer := "idle"
		switch {
		case sl.Torn:
			writer = fmt.Sprintf("died mid-Store (PID %d): the value is torn until the next Store", o.HolderPID)
		case sl.Writing:
			writer = fmt.Sprintf("storing (PID %d, alive)", o.HolderPID)
		}
		rows = append(rows, fmt.Sprintf("%s\t%d\t%d\t%s", shownName(o.Name), sl.Sequence, sl.Stores, writer))
	}
	writeSection(w, "Seqlocks", "NAME\tSEQUENCE\tSTORES\tWRITER", rows)
}

// writeProcesses prints the attached processes: the live ones, and the
// dead ones too with all; otherwise it says how many dead it hid.
func writeProcesses(w io.Writer, procs []shm.ProcessInfo, all bool) {
	var shown []shm.ProcessInfo
	alive := 0
	for _, p := range procs {
		if p.Alive {
			alive++
		}
		if p.Alive || all {
			shown = append(shown, p)
		}
	}
	fmt.Fprintf(w, "Processes attached: %d (%d alive)", len(procs), alive)
	if hidden := len(procs) - len(shown); hidden > 0 {
		fmt.Fprintf(w, "; %d dead not listed (-all lists them)", hidden)
	}
	fmt.Fprintln(w)
	if len(shown) > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  SLOT\tPID\tALIVE")
		for _, p := range shown {
			fmt.Fprintf(tw, "  %d\t%d\t%s\n", p.Slot, p.PID, aliveText(p.PID, p.Alive))
		}
		tw.Flush()
	}
}

// heldText is the HELD FOR column of a held lock: the time since its
// held-since stamp, and which stamp that is. With statistics on, every
// acquisition takes the slow path, which stamps the hold as it begins:
// "1.5s (acquired)". Otherwise a fast-path hold is stamped by the first
// inspect that sees it, and a slow-path one by its acquirer; which of the
// two the file does not say, so the time is a lower bound from the first
// stamp: "≥1.5s (first seen)".
func heldText(o *shm.ObjectInfo) string {
	switch {
	case !o.HeldForKnown:
		return "unknown"
	case o.Stats != nil:
		return o.HeldFor.Round(time.Millisecond).String() + " (acquired)"
	}
	return "≥" + o.HeldFor.Round(time.Millisecond).String() + " (first seen)"
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
