package torture

// torture -lock ring -procs 2: lockword's shared byte ring between two
// processes (this binary, re-executed), one producer and one consumer.
// The producer sends messages 1..N, each carrying its number and a body
// drawn from it; the consumer checks that every number arrives once, in
// order, with every byte right. The supervisor only sets up the region,
// releases the two, watches for a stall and gathers their reports.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

const (
	defaultSharedRingItems = 10_000_000 // messages across processes unless -items says otherwise
	sharedRingCapacity     = 1 << 16    // bytes of record space
	sharedRingMaxMsg       = 64         // messages are 8..64 bytes
	sharedRingName         = "torture-ring"
	sharedRingStateName    = "torture-ring-state"
	sharedRingWorkerEnv    = "LOCKWORD_TORTURE_RING_WORKER"
	// sharedRingBreakEnv (tests only) makes the producer send a few
	// numbers twice and skip others: the checks must catch it.
	sharedRingBreakEnv = "LOCKWORD_TORTURE_BREAK_RING"
)

// The shared ring torture's state, a Bytes object: plain uint64 words.
const (
	srGo       = 0  // supervisor: 1 releases the two
	srStop     = 8  // supervisor: 1 stops the producer (timed or interrupted runs)
	srReceived = 16 // consumer: messages received so far (every publishEvery)
	srReady    = 24 // +8*role: 1 once that side has attached
	srSize     = 40
)

func init() {
	register(kind{name: "shared-ring", procs: true,
		desc:  "shm.RingProducer/RingConsumer: byte ring between 2 processes (also -lock ring -procs 2)",
		usage: sharedRingUsage, run: tortureSharedRing})
	kindHelp = append(kindHelp, fmt.Sprintf(`Shared ring (-lock ring -procs 2, or -lock shared-ring -procs 2):
  a producer process sends the messages 1..N (N = -items, default %d)
  through a shared byte ring of %d bytes in a region to a consumer
  process; each message is 8 to %d bytes, its number and a body drawn from
  it. The consumer checks that every number arrives exactly once, in
  order, and every byte. It prints Items, Received, Out of order,
  Duplicates, Lost, Mangled, Throughput (M messages/s and MB/s, from the
  release of the two processes to the consumer's last message), the
  ring's sleeps and wake calls, and Result. -procs must be 2; -workers,
  -value and -work do not apply. A run that moves no message for %v
  fails as stalled.
`, defaultSharedRingItems, sharedRingCapacity, sharedRingMaxMsg, stallTimeout))
}

// sharedRingReport is the outcome of one shared ring run.
type sharedRingReport struct {
	items       int64 // requested; 0 in a timed run
	duration    time.Duration
	interrupted string        // the signal that stopped the run early, if one did
	elapsed     time.Duration // supervisor's view, for an interrupted run
	sent        sharedRingResult
	recv        sharedRingResult
	stalled     bool
	errs        []string // a side that failed
}

// sharedRingUsage checks the flags the shared ring constrains: exactly two
// processes, and no -kill (it kills lock holders; the ring has none).
func sharedRingUsage(cfg *config) error {
	if cfg.kill {
		return fmt.Errorf("-kill kills lock holders; the shared ring's peer-death tests are in the library's tests")
	}
	if cfg.procs != 2 {
		return fmt.Errorf("the shared ring has one producer and one consumer process: use -procs 2, not %d", cfg.procs)
	}
	return nil
}

// tortureSharedRing runs the shared ring experiment; parseTorture has
// checked the flags with sharedRingUsage.
func tortureSharedRing(cfg *config) (report, error) {
	exe, err := workerExe()
	if err != nil {
		return nil, err
	}
	items := cfg.items
	if items == 0 && !cfg.timed() {
		items = defaultSharedRingItems
	}
	r, cleanup, err := tortureRegion("lockword-torture-ring", 1<<20+sharedRingCapacity)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	path := r.Path()
	st, err := r.Bytes(sharedRingStateName, srSize)
	if err != nil {
		return nil, err
	}
	// Create the ring (attaching is the way to), and give the role back.
	c, err := r.RingConsumer(sharedRingName, sharedRingCapacity)
	if err != nil {
		return nil, err
	}
	c.Detach()

	sides := make([]*workerProc, 2) // producer, consumer
	defer func() { killWorkers(sides) }()
	for i := range sides {
		js, _ := json.Marshal(sharedRingSpec{Region: path, Producer: i == 0, Items: items,
			Broken: i == 0 && os.Getenv(sharedRingBreakEnv) != ""})
		role := "consumer"
		if i == 0 {
			role = "producer"
		}
		cmd := workerCommand(exe, "shared-ring", role, path)
		cmd.Env = append(os.Environ(), sharedRingWorkerEnv+"="+string(js))
		if sides[i], err = startWorker(cmd, nil, workerFiles(r), true); err != nil {
			return nil, err
		}
	}
	attached := func() bool { return get(st, srReady)+get(st, srReady+8) == 2 }
	if err := awaitAttach(sides, attached, time.Millisecond, cfg.interrupt,
		"ring worker process", "the ring's processes", "ring worker processes did not attach within a minute"); err != nil {
		return nil, err
	}
	start := time.Now()
	put(st, srGo, 1)
	prog := startProgress(cfg.progress, runProgress(cfg, "shared-ring", start, items,
		func() int64 { return int64(get(st, srReceived)) }, "items"))
	rep := &sharedRingReport{items: items, duration: cfg.duration}
	tick := time.NewTicker(min(stallTimeout/20, 10*time.Millisecond)) // -duration ends on time
	last, since := uint64(0), time.Now()
watch:
	for {
		select {
		case <-sides[1].done:
			break watch
		case <-cfg.interrupt.Hurry(): // a second signal: stop waiting
			sides[0].cmd.Process.Kill()
			sides[1].cmd.Process.Kill()
			break watch
		case <-tick.C:
		}
		if (cfg.timed() && time.Since(start) >= cfg.duration) || cfg.interrupt.Interrupted() {
			put(st, srStop, 1) // the producer stops and closes; the consumer drains
		}
		if n := get(st, srReceived); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= stallTimeout {
			rep.stalled = true
			break watch
		}
	}
	tick.Stop()
	if rep.stalled {
		for _, s := range sides {
			s.cmd.Process.Kill()
		}
	}
	select { // the producer ends once its last Send returns
	case <-sides[0].done:
	case <-time.After(stallTimeout):
		rep.errs = append(rep.errs, "the producer did not exit after the consumer")
		sides[0].cmd.Process.Kill()
	}
	<-sides[0].done
	prog.stop()
	if cfg.interrupt.Interrupted() {
		rep.interrupted, rep.elapsed = cfg.interrupt.Name(), time.Since(start)
	}
	for i, s := range sides {
		who := [...]string{"producer", "consumer"}[i]
		res := &rep.sent
		if i == 1 {
			res = &rep.recv
		}
		if err := s.result(res); err != nil {
			if !rep.stalled {
				rep.errs = append(rep.errs, s.noResult(who))
			}
			continue
		}
		if res.Err != "" {
			rep.errs = append(rep.errs, fmt.Sprintf("%s: %s", who, res.Err))
		}
	}
	sides = nil // reaped
	// Numbers never reached (the stream ended early) are lost too.
	rep.recv.Lost += max(0, rep.sent.Sent-rep.recv.Reached)
	return rep, nil
}

func (r *sharedRingReport) failures() []string {
	why := streamFailures("messages", r.recv.OutOfOrder, r.recv.Duplicates, r.recv.Lost)
	if r.recv.Mangled > 0 {
		why = append(why, fmt.Sprintf("%d mangled", r.recv.Mangled))
	}
	if r.stalled {
		why = append(why, stalledFailure("message"))
	}
	why = append(why, r.errs...)
	if !r.stalled && len(r.errs) == 0 {
		if r.items > 0 && r.sent.Sent != r.items && r.interrupted == "" {
			why = append(why, fmt.Sprintf("the producer sent %d of %d messages", r.sent.Sent, r.items))
		}
		if r.recv.Received != r.sent.Sent {
			why = append(why, fmt.Sprintf("%d messages sent, %d received", r.sent.Sent, r.recv.Received))
		}
	}
	return why
}

func (r *sharedRingReport) passed() bool { return len(r.failures()) == 0 }

// throughput is in M messages/s and MB/s of payload.
func (r *sharedRingReport) throughput() (mmsgs, mbytes float64) {
	if r.recv.ElapsedNs <= 0 {
		return 0, 0
	}
	s := float64(r.recv.ElapsedNs) / 1e9
	return float64(r.recv.Received) / s / 1e6, float64(r.recv.Bytes) / s / 1e6
}

func (r *sharedRingReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: shared-ring\n")
	fmt.Fprintf(w, "Processes: 2 (one producer, one consumer); capacity %d bytes; messages 8..%d bytes\n",
		sharedRingCapacity, sharedRingMaxMsg)
	if r.interrupted != "" {
		fmt.Fprintf(w, "Interrupted: by %s after %v; a partial report, of the messages sent until then\n",
			r.interrupted, r.elapsed.Round(time.Millisecond))
	}
	if r.duration > 0 {
		fmt.Fprintf(w, "Duration: %v\n", r.duration)
		fmt.Fprintf(w, "Items: %d (sent in that time)\n", r.sent.Sent)
	} else if r.interrupted != "" {
		fmt.Fprintf(w, "Items: %d asked, %d sent\n", r.items, r.sent.Sent)
	} else {
		fmt.Fprintf(w, "Items: %d\n", r.items)
	}
	writeStreamCounts(w, r.recv.Received, r.recv.OutOfOrder, r.recv.Duplicates, r.recv.Lost)
	fmt.Fprintf(w, "Mangled: %d\n", r.recv.Mangled)
	m, mb := r.throughput()
	fmt.Fprintf(w, "Throughput: %.2f M messages/s, %.1f MB/s\n", m, mb)
	if s := r.recv.Stats; s != nil {
		fmt.Fprintf(w, "Sleeps: producer %d, consumer %d; wake calls %d\n", s.ProducerSleeps, s.ConsumerSleeps, s.Wakes)
	}
	if why := r.failures(); len(why) == 0 && r.interrupted != "" {
		fmt.Fprintln(w, "Result: INTERRUPTED (no check failed until then)")
		return
	}
	writeResult(w, r.failures())
}

func (r *sharedRingReport) writeJSON(w io.Writer) error {
	m, mb := r.throughput()
	j := struct {
		Lock           string   `json:"lock"`
		Processes      int      `json:"processes"`
		Items          int64    `json:"items"`
		Received       int64    `json:"received"`
		OutOfOrder     int64    `json:"out_of_order"`
		Duplicates     int64    `json:"duplicates"`
		Lost           int64    `json:"lost"`
		Mangled        int64    `json:"mangled"`
		Capacity       int      `json:"capacity_bytes"`
		ThroughputM    float64  `json:"throughput_mitems_s"`
		ThroughputMB   float64  `json:"throughput_mb_s"`
		ProducerSleeps *uint64  `json:"producer_sleeps"`
		ConsumerSleeps *uint64  `json:"consumer_sleeps"`
		WakeCalls      *uint64  `json:"wake_calls"`
		DurationS      float64  `json:"duration_s"`
		Result         string   `json:"result"`
		Failures       []string `json:"failures,omitempty"`
		Interrupted    string   `json:"interrupted,omitempty"`
	}{
		Lock: "shared-ring", Processes: 2, Items: r.sent.Sent, Received: r.recv.Received,
		OutOfOrder: r.recv.OutOfOrder, Duplicates: r.recv.Duplicates, Lost: r.recv.Lost, Mangled: r.recv.Mangled,
		Capacity: sharedRingCapacity, ThroughputM: m, ThroughputMB: mb,
		DurationS: float64(r.recv.ElapsedNs) / 1e9, Result: verdict(r.failures()), Failures: r.failures(),
		Interrupted: r.interrupted,
	}
	if j.Result == "PASS" && r.interrupted != "" {
		j.Result = "INTERRUPTED"
	}
	if s := r.recv.Stats; s != nil {
		j.ProducerSleeps, j.ConsumerSleeps, j.WakeCalls = &s.ProducerSleeps, &s.ConsumerSleeps, &s.Wakes
	}
	return writeJSONLine(w, j)
}
