package torture

// The torture help: what the experiment does, the kinds (from the registry),
// every flag (from defineTortureFlags), the output, exit statuses, examples.

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Help writes the torture help: what the experiment does, the lock
// kinds (from the registry, so new kinds appear by themselves), every flag
// (from defineTortureFlags), the output, exit statuses and examples.
func Help(w io.Writer) {
	fmt.Fprintf(w, `Usage: lockword torture [flags]

Torture hammers each chosen lock from many goroutines (workers) and checks,
inside every critical section, that the lock excludes. Each worker, holding
the lock:
  1. checks that the owner slot, a plain int, is 0 (free), and writes its
     id (1..workers) there;
  2. reads a plain, non-atomic int64 counter into a local, does the optional
     busy work (-work), and writes back the local plus -value: a
     read-modify-write that loses additions unless the lock excludes;
  3. checks that the owner slot still holds its id, and clears it to 0.
A failed check counts an owner-slot violation. A lock passes when the
counter ends at workers × additions × value (Expected) and no owner-slot
check failed. With no flags, every kind in 'all' runs the classic
experiment: %d workers × %d additions × value %d.

Lock kinds (-lock), where all means every kind marked *:
`, defaultWorkers, defaultIters, defaultValue)
	listKinds := func(procs bool) {
		width := 0
		for _, k := range kinds {
			if k.procs == procs {
				width = max(width, len(k.name))
			}
		}
		for _, k := range kinds {
			if k.procs != procs {
				continue
			}
			mark := " "
			if k.inAll {
				mark = "*"
			}
			fmt.Fprintf(w, "  %-*s %s  %s\n", width, k.name, mark, k.desc)
		}
	}
	listKinds(false)
	fmt.Fprint(w, "\nLock kinds across processes (need -procs N; there, all means those marked *):\n")
	listKinds(true)
	fmt.Fprint(w, "\nFlags:\n")
	fs := flag.NewFlagSet("lockword torture", flag.ContinueOnError)
	defineTortureFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		placeholder, usage := flag.UnquoteUsage(f)
		if placeholder == "value" { // a bool flag: nothing to fill in
			placeholder = ""
		}
		fmt.Fprintln(w, "  "+strings.TrimSpace("-"+f.Name+" "+placeholder))
		for line := range strings.SplitSeq(usage, "\n") {
			fmt.Fprintf(w, "        %s\n", line)
		}
		if f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" && f.DefValue != "" {
			fmt.Fprintf(w, "        (default %s)\n", f.DefValue)
		}
	})
	for _, section := range kindHelp {
		fmt.Fprint(w, "\n"+section)
	}
	fmt.Fprint(w, `
Counting or timing:
  By default each worker makes exactly -iters additions, and the report
  says "Additions per worker: N". With -duration D the workers add until D
  has elapsed; each completes as many additions as it can, the report says
  "Duration: D" and "Additions per worker: varies, min A, max B (T total)",
  and Expected is T × value. Either way every addition is one acquisition.

Output (text), per kind, a blank line between kinds:
  Lock, Workers, [Duration,] Additions per worker, Value per addition,
  [Busy work, when -work is set,] Expected, Actual, Owner-slot violations,
  Throughput (acquisitions per wall-clock second, in millions, from the
  moment the workers are released until the last one finishes), Slow path
  (the share of acquisitions that found the lock held, from the lockword
  lock's Stats; n/a for kinds that keep none), the fairness block below
  (in-process kinds except none), and Result: PASS, or FAIL with the
  reasons.

Fairness (in-process kinds), up to three lines:
  Fairness: each worker's acquisitions over the window in which all of
    them contend (from the moment the last one first reaches the lock to
    the first one's finish, or to the end of a -duration run), min, max
    and max/min, "even", or "uneven" when max > 2×min, as the kernel's
    locktorture flags starvation. Uneven is information, not a failure:
    mutex, spin and sync are unfair on purpose. The line appears only
    when the window held at least 100 acquisitions per worker on average:
    with fewer (a fast lock whose first worker is done before the last
    one starts), who started first decides the shares, not the lock.
  Wait latency: p50, p99 and max of the time from calling Lock to
    holding the lock, timed on one acquisition in 16 per worker.
  Starvation check: for 200ms one goroutine re-locks in a tight loop
    while another locks repeatedly; the other's longest wait, and how
    often the re-locking goroutine acquired during that wait (overtakes).
    For ticket it must stay under 10ms, or the run fails: counted less the
    time the two goroutines' threads were runnable but had no CPU (the
    kernel's per-thread schedstat; a loaded 2-core host can keep a thread
    waiting for a CPU over 10ms, which is not the lock's doing, while a
    lock that makes its waiter wait keeps it asleep, which counts in
    full). An attempt that reaches 10ms is run again, up to 3 attempts,
    and the last decides. For the others it is information. (rw: a writer re-locks, a reader waits; rw-read-mostly:
    a reader re-locks, a writer waits; cond: a goroutine signals, another
    waits for a Signal.)
  rw kinds add the reads and writes made and the reader-writer overlaps
  seen (a reader that met a writer inside; any fails the run); every
  acquisition adds -value (a reader to its own tally), so Expected is as
  for the other kinds. cond: -workers producers each put -iters items
  through a queue of capacity 1 (two Conds, Signal only) and as many
  consumers take them; an addition is one item, and the shares are the
  items each consumer took.

Output (-json), one object per kind and line, with the fields
  lock, workers, iters (null with -duration), additions (total), value,
  work, expected, actual, owner_violations, throughput_macq_s,
  slow_path_fraction (0..1, null when the lock keeps no statistics),
  stats_acquisitions (the lock's own count of acquisitions, null without
  statistics; it must equal additions, or the run fails), duration_s
  (measured wall time), result ("PASS", "FAIL", or "INTERRUPTED": see
  below), failures (the reasons, only when it failed), interrupted (the
  signal that stopped a -procs run early, only then), and, for
  in-process kinds, fairness:
  {shares, shares_at, min_share, max_share, max_min (null when a worker
  made none), judged (whether the shares mean something: see
  Fairness), flagged (judged and uneven), wait_sampled_every,
  wait_samples, wait_p50_ns, wait_p99_ns, wait_max_ns, starvation: {what,
  max_wait_ns, counted_max_wait_ns (the longest wait less the threads'
  time without a CPU: what the limit applies to), sched_delay_ns (that
  time), overtakes, earlier_max_wait_ns (the counted waits of attempts
  that reached the limit and were run again), acquisitions, limit_ns
  (null: information only), passed},
  notes}.

Across processes (-procs N):
  The shared kinds run the same experiment with the workers spread over N
  processes (this binary, re-executed) that map one region, where the
  counter, the owner slot and each worker's committed total live. The
  region is an anonymous memory file (a sealed memfd) that the workers
  inherit: it has no path and vanishes with the last process, so nothing
  is left in /dev/shm even if the supervisor is killed. The report adds "Processes: N" after Workers. Every update
  first writes an intent record (whose update, the counter and the
  worker's total before it) and clears it after.
  With -kill, a supervisor SIGKILLs a worker process every few
  milliseconds, and starts a replacement that carries on with the same
  worker ids. Every other kill is aimed at the process holding the lock
  (found through the owner slot and stopped inside its critical section,
  so the kill lands mid-update); the others pick a process at random,
  which holds the lock too as often as the lock is busy, so "of the
  lock's holder" is at least about half of the kills (shared: 60-80%). The next acquirer
  gets the lock with ErrOwnerDead, rolls a half-done update back from the
  intent record, and marks the lock consistent. The report then adds
  Kills (and how many hit the holder), Recoveries (each kill of a holder
  must be recovered exactly once; more would mean a live holder was
  robbed), Recovery latency (kill to repaired lock) and Detection latency
  (kill to a waiter's ErrOwnerDead): p50, p99 and max over the timed
  recoveries. A dead holder is noticed at a waiter's next liveness check,
  made every 10 ms whenever the waiter gets a CPU: about 10 ms after the
  death when CPUs are free, later as the load grows (2 cores, p99: 12 ms
  at load 5-9, 28-92 ms at load 9-23, 1.2 s at load 24-32).
  Then Hangs (no progress for 10 s, or a recovery that never came: must
  be 0). Expected is the sum of every worker's committed additions; the
  counter must match it exactly. -json adds processes and a kill object:
  {kills, holder_kills, recoveries, rolled_back,
  max_detection_latency_ms, max_recovery_latency_ms, hangs,
  detection_latency_ms and recovery_latency_ms: {samples, p50_ms, p99_ms,
  max_ms}, worker_errors, robbed}.
  With -lock shared-rw the workers also read: before about half of its
  writes a worker takes the read lock (RLockContext, given 10 s), checks
  that no writer is inside (the owner slot) and that the counter stands
  still while it reads it twice with busy work between, and commits a
  read count that a replacement continues from. The report adds "Reads:
  N (V saw a writer inside)" after the owner-slot line (V must be 0;
  -json: reads, read_violations) and, with -kill, "Kills: N (H of the
  lock's holder, R of a reader)": a quarter of the kills are aimed at a
  read holder, stopped inside its read. A dead reader needs no recovery
  (readers write nothing), but the next writer must get in: "Reader kill
  to next write: max T ms" is the longest time from a reader's kill to
  the next completed write, and a write that does not come within 10 s
  is a hang (-json kill object: reader_kills,
  max_reader_kill_to_write_ms). A -kill run of shared-rw leaves the
  lock's statistics off (Slow path: n/a), since with them every RLock
  takes its slow path.
  SIGINT (Ctrl-C), SIGTERM or SIGHUP stops a -procs run early: the
  supervisor tells the workers to stop between updates (they run in a
  process group of their own and ignore these signals), waits for them
  (killing any that have not stopped within 10 s, a hang, or at once on
  a second signal, after which it recovers the lock as a worker would),
  releases the region, prints the report so far with "Interrupted:
  by SIGINT after T" and the additions made until then, and exits 128 +
  the signal: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP). The kernel
  kills the workers if the supervisor itself is killed (SIGKILL).
  Its result is INTERRUPTED, or FAIL if a check already failed. Kinds not
  yet started are skipped. In-process runs just end, leaving nothing.

Progress:
  A kind that runs longer than about a second shows a progress bar on
  stderr, when stderr is a terminal; the bar is erased before the kind's
  report is printed. Nothing is drawn when stderr is not a terminal. It
  shows the share of the run done, by what bounds it (acquisitions of
  -iters, items, kills of a -kill run, or time with -duration: with both
  -kills and -duration, whichever is nearer its end), the rate, and the
  time left (for a count, assuming the rate so far holds).

Exit status:
  0    every kind passed
  1    at least one kind failed (lost additions, owner-slot violations, a
       failed check of its own), or did no work (no addition completed)
  2    usage error: unknown flag or lock kind, bad flag value, stray argument;
       or a set-up error, before anything runs: a kind this machine cannot
       run (the C kinds without a C compiler), or -etcd endpoints that do
       not answer within 3 s
  130  a -procs run was interrupted by SIGINT (143: SIGTERM, 129: SIGHUP),
       whatever the partial result: see Across processes

The none kind must fail: it shows that the checks catch a lock that does
not exclude. It needs at least 2 workers to fail (one worker cannot race),
and yields the processor in the middle of its update so that it fails even
with few additions on few cores.

Examples:
  lockword torture
  lockword torture -lock spin -workers 64 -iters 1000000
  lockword torture -lock mutex,sync -work 200 -duration 5s
  lockword torture -lock none                  # FAIL, exit status 1
  lockword torture -procs 4                    # the shared kind, 4 processes
  lockword torture -procs 4 -kill -kills 1000  # owner death, 1000 times
  lockword torture -procs 4 -lock shared-ticket -kill  # the same, FIFO lock
  lockword torture -lock ring -procs 2         # the shared ring, 10,000,000 messages
  lockword torture -json | jq -c '{lock, throughput_macq_s}'
`)
}
