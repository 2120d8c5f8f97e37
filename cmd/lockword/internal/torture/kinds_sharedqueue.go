package torture

// torture -lock shared-queue -procs N [-kill]: lockword's shared MPSC
// byte queue, N producer processes and one consumer process (this binary,
// re-executed). Each producer sends its messages 0..items-1, each naming
// its producer and number with a body drawn from both; the consumer checks
// that, per producer, every number arrives once, in order, every byte
// right. With -kill the supervisor SIGKILLs half the producers at random
// moments: their published messages must still arrive whole and in order
// (a prefix of their numbers), and the claims they abandoned are counted.
// shared-queue-broken runs the same over a queue that stores a record's
// header before its payload: it must FAIL.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"
)

const (
	defaultSharedQueueItems = 1_000_000 // messages per producer unless -items says otherwise
	sharedQueueCapacity     = 1 << 16   // bytes of record space
	sharedQueueMaxMsg       = 256       // messages are 16..256 bytes
	sharedQueueName         = "torture-queue"
	sharedQueueStateName    = "torture-queue-state"
	sharedQueueWorkerEnv    = "LOCKWORD_TORTURE_QUEUE_WORKER"
	sharedQueueMaxProcs     = 64
)

// The torture's state, a Bytes object of plain uint64 words.
const (
	sqGo       = 0  // supervisor: 1 releases the workers
	sqStop     = 8  // supervisor: 1 once every producer has exited: the consumer drains and ends
	sqReceived = 16 // consumer: messages received so far (every publishEvery)
	sqReady    = 24 // +8*i: 1 once worker i (0 the consumer, 1.. the producers) has attached
	// -kill: the supervisor arms producer i (+8*i) with the step of a
	// send (sqStepClaiming, sqStepClaimed) where it is to be killed; the
	// producer, at its next send's step, sets its in-window word and
	// waits there to be killed (see holdForKill).
	sqArm      = sqReady + 8*(sharedQueueMaxProcs+1)
	sqInWindow = sqArm + 8*sharedQueueMaxProcs
	sqSize     = sqInWindow + 8*sharedQueueMaxProcs
)

// The steps of a send where an armed producer stops, named as
// faultpoint.MPSC names them.
const (
	sqStepClaiming = 1 // "claiming": the claim word holds its claim; a kill leaves it to be taken back
	sqStepClaimed  = 2 // "claimed": its record's header is written, no payload; a kill leaves a record to skip
)

// armWait is how long an armed producer is given to reach its step
// before the supervisor kills it wherever it is (it may be waiting for
// room, or done).
const armWait = 5 * time.Second

func init() {
	for _, broken := range []bool{false, true} {
		name, desc := "shared-queue", "shm.MPSCProducer/MPSCConsumer: N producer processes, 1 consumer (-procs N, -kill)"
		if broken {
			name, desc = "shared-queue-broken", "shared-queue over a queue that publishes the header before the payload: must FAIL"
		}
		register(kind{name: name, procs: true, desc: desc, usage: sharedQueueUsage,
			run: func(cfg *config) (report, error) { return tortureSharedQueue(cfg, broken) }})
	}
	kindHelp = append(kindHelp, fmt.Sprintf(`Shared queue (-lock shared-queue -procs N [-kill]):
  N producer processes send their messages 0..M-1 (M = -items, default
  %d) through one shared MPSC queue of %d bytes to a consumer process;
  each message is 16 to %d bytes, naming its producer and number, with a
  body drawn from both. The consumer checks, per producer, that every
  number arrives once, in order, every byte right. -kill SIGKILLs half
  the producers from random moments, two in three of them once they stop
  between claim and publish (holding the claim word, or with the
  record's header written and no payload): their published messages
  must arrive, and the claims they abandoned are counted (Lost, Claims
  recovered). shared-queue-broken publishes each record's
  header before its payload, and must FAIL. A run that moves no message for
  %v fails as stalled.
`, defaultSharedQueueItems, sharedQueueCapacity, sharedQueueMaxMsg, stallTimeout))
}

// sharedQueueUsage checks -procs: 1 to 64 producers.
func sharedQueueUsage(cfg *config) error {
	if cfg.procs < 1 || cfg.procs > sharedQueueMaxProcs {
		return fmt.Errorf("-procs is the number of producer processes, 1 to %d, not %d", sharedQueueMaxProcs, cfg.procs)
	}
	if cfg.kill && cfg.procs < 2 {
		return fmt.Errorf("-kill kills half the producers and keeps the rest: use -procs 2 or more")
	}
	if cfg.timed() {
		return fmt.Errorf("the shared queue runs -items messages per producer; -duration does not apply")
	}
	if cfg.etcd.itersSet {
		return fmt.Errorf("the shared queue runs -items messages per producer; -iters does not apply")
	}
	return nil
}

// sharedQueueReport is the outcome of one run.
type sharedQueueReport struct {
	name      string
	producers int
	items     int64
	killed    map[int]bool // producers killed
	inWindow  [3]int       // of them, killed stopped at a step (sqStepClaiming, sqStepClaimed)
	recv      sharedQueueResult
	sent      []sharedQueueResult
	stalled   bool
	errs      []string
}

func tortureSharedQueue(cfg *config, broken bool) (report, error) {
	exe, err := workerExe()
	if err != nil {
		return nil, err
	}
	items := cfg.items
	if items == 0 {
		items = defaultSharedQueueItems
	}
	r, cleanup, err := tortureRegion("lockword-torture-queue", 1<<20+2*sharedQueueCapacity)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	st, err := r.Bytes(sharedQueueStateName, sqSize)
	if err != nil {
		return nil, err
	}
	rep := &sharedQueueReport{name: "shared-queue", producers: cfg.procs, items: items, killed: map[int]bool{}}
	if broken {
		rep.name += "-broken"
	}
	procs := make([]*workerProc, cfg.procs+1) // the consumer, then the producers
	defer func() { killWorkers(procs) }()
	for i := range procs {
		js, _ := json.Marshal(sharedQueueSpec{Region: r.Path(), ID: i - 1, Producers: cfg.procs, Items: items, Broken: broken})
		cmd := workerCommand(exe, rep.name, fmt.Sprint(i-1), r.Path())
		cmd.Env = append(os.Environ(), sharedQueueWorkerEnv+"="+string(js))
		if procs[i], err = startWorker(cmd, nil, workerFiles(r), true); err != nil {
			return nil, err
		}
	}
	attached := func() bool {
		for i := range procs {
			if get(st, sqReady+8*i) == 0 {
				return false
			}
		}
		return true
	}
	if err := awaitAttach(procs, attached, time.Millisecond, cfg.interrupt,
		"queue worker process", "the queue's processes", "queue worker processes did not attach within a minute"); err != nil {
		return nil, err
	}
	start := time.Now()
	put(st, sqGo, 1)
	prog := startProgress(cfg.progress, runProgress(cfg, rep.name, start, items*int64(cfg.procs),
		func() int64 { return int64(get(st, sqReceived)) }, "items"))
	// -kill: half the producers (never all), each from a random moment in
	// the first part of the run: one in three at that moment, wherever it
	// is; the others armed then, and killed once they stop between claim
	// and publish (alternately with the claim word held, and with the
	// record's header written), which a random moment almost never hits.
	type kill struct {
		at    time.Time
		step  uint64 // 0: at once
		armed time.Time
	}
	kills := make([]kill, 0, cfg.procs/2)
	if cfg.kill {
		for i := range cfg.procs / 2 {
			kills = append(kills, kill{at: start.Add(time.Duration(rand.IntN(200)+5) * time.Millisecond),
				step: [3]uint64{sqStepClaiming, sqStepClaimed, 0}[i%3]})
		}
	}
	last, since := uint64(0), time.Now()
	for {
		for id := range kills { // producer id is procs[id+1]
			k := &kills[id]
			if k.at.IsZero() || time.Now().Before(k.at) {
				continue
			}
			if k.step != 0 && k.armed.IsZero() {
				put(st, sqArm+8*id, k.step)
				k.armed = time.Now()
			}
			if k.step != 0 && get(st, sqInWindow+8*id) == 0 && time.Since(k.armed) < armWait && !exited(procs[id+1]) {
				continue
			}
			if !exited(procs[id+1]) {
				procs[id+1].cmd.Process.Kill()
				rep.killed[id] = true
				if k.step != 0 && get(st, sqInWindow+8*id) != 0 {
					rep.inWindow[k.step]++
				}
			}
			k.at = time.Time{}
		}
		all := true
		for _, p := range procs[1:] {
			all = all && exited(p)
		}
		if all {
			break
		}
		if cfg.interrupt.Interrupted() {
			break
		}
		if n := get(st, sqReceived); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= stallTimeout {
			rep.stalled = true
			break
		}
		time.Sleep(time.Millisecond)
	}
	put(st, sqStop, 1)
	select {
	case <-procs[0].done:
	case <-time.After(stallTimeout):
		rep.stalled = true
	}
	killWorkers(procs)
	prog.stop()
	for i, p := range procs {
		var res sharedQueueResult
		if err := p.result(&res); err != nil {
			if i == 0 || !rep.killed[i-1] {
				rep.errs = append(rep.errs, p.noResult(fmt.Sprintf("worker %d", i-1)))
			}
		} else if res.Err != "" {
			rep.errs = append(rep.errs, fmt.Sprintf("worker %d: %s", i-1, res.Err))
		}
		if i == 0 {
			rep.recv = res
		} else {
			rep.sent = append(rep.sent, res)
		}
	}
	procs = nil
	return rep, nil
}

func (r *sharedQueueReport) failures() []string {
	var why []string
	if r.recv.Gaps > 0 {
		why = append(why, fmt.Sprintf("%d messages out of order or after lost ones", r.recv.Gaps))
	}
	if r.recv.Dups > 0 {
		why = append(why, fmt.Sprintf("%d duplicated", r.recv.Dups))
	}
	if r.recv.Mangled > 0 {
		why = append(why, fmt.Sprintf("%d mangled", r.recv.Mangled))
	}
	if r.stalled {
		why = append(why, fmt.Sprintf("stalled: no message moved for %v", stallTimeout))
	}
	why = append(why, r.errs...)
	// A producer killed with a record claimed leaves it for the consumer
	// to skip; one killed holding the claim word, the word to take back.
	if n := r.inWindow[sqStepClaimed]; n > 0 && r.recv.Lost == 0 {
		why = append(why, fmt.Sprintf("%d producer(s) killed with a record claimed, but no record was counted lost", n))
	}
	if n := r.inWindow[sqStepClaiming]; n > 0 && r.recv.Recovered == 0 {
		why = append(why, fmt.Sprintf("%d producer(s) killed holding the claim word, but no claim was recovered", n))
	}
	for id := range r.producers {
		if r.killed[id] || id >= len(r.recv.Next) {
			continue
		}
		if n := r.recv.Next[id]; n != uint64(r.items) {
			why = append(why, fmt.Sprintf("producer %d: %d of %d messages arrived in order", id, n, r.items))
		}
	}
	return why
}

func (r *sharedQueueReport) passed() bool { return len(r.failures()) == 0 }

// killedArrived is the messages of the killed producers that arrived.
func (r *sharedQueueReport) killedArrived() (n uint64) {
	for id := range r.killed {
		if id < len(r.recv.Next) {
			n += r.recv.Next[id]
		}
	}
	return n
}

func (r *sharedQueueReport) throughput() float64 {
	if r.recv.ElapsedNs <= 0 {
		return 0
	}
	return float64(r.recv.Received) / (float64(r.recv.ElapsedNs) / 1e9) / 1e6
}

func (r *sharedQueueReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Lock: %s\n", r.name)
	fmt.Fprintf(w, "Processes: %d producers, 1 consumer; capacity %d bytes; messages 16..%d bytes\n", r.producers, sharedQueueCapacity, sharedQueueMaxMsg)
	fmt.Fprintf(w, "Items: %d per producer\n", r.items)
	fmt.Fprintf(w, "Received: %d\n", r.recv.Received)
	fmt.Fprintf(w, "Killed producers: %d (%d holding the claim word, %d with a record claimed); their messages received: %d\n",
		len(r.killed), r.inWindow[sqStepClaiming], r.inWindow[sqStepClaimed], r.killedArrived())
	fmt.Fprintf(w, "Out of order or gaps: %d\n", r.recv.Gaps)
	fmt.Fprintf(w, "Duplicates: %d\n", r.recv.Dups)
	fmt.Fprintf(w, "Mangled: %d\n", r.recv.Mangled)
	fmt.Fprintf(w, "Lost (abandoned records skipped): %d\n", r.recv.Lost)
	fmt.Fprintf(w, "Claims recovered: %d\n", r.recv.Recovered)
	fmt.Fprintf(w, "Throughput: %.2f M messages/s\n", r.throughput())
	writeResult(w, r.failures())
}

func (r *sharedQueueReport) writeJSON(w io.Writer) error {
	return writeJSONLine(w, struct {
		Lock            string   `json:"lock"`
		Producers       int      `json:"producers"`
		Items           int64    `json:"items_per_producer"`
		Received        int64    `json:"received"`
		Killed          int      `json:"killed"`
		KilledClaiming  int      `json:"killed_claiming"`
		KilledClaimed   int      `json:"killed_claimed"`
		KilledArrived   uint64   `json:"killed_received"`
		Gaps            int64    `json:"gaps"`
		Duplicates      int64    `json:"duplicates"`
		Mangled         int64    `json:"mangled"`
		Lost            uint64   `json:"lost"`
		ClaimsRecovered uint64   `json:"claims_recovered"`
		ThroughputM     float64  `json:"throughput_mitems_s"`
		Result          string   `json:"result"`
		Failures        []string `json:"failures,omitempty"`
	}{r.name, r.producers, r.items, r.recv.Received, len(r.killed), r.inWindow[sqStepClaiming], r.inWindow[sqStepClaimed], r.killedArrived(), r.recv.Gaps, r.recv.Dups, r.recv.Mangled,
		r.recv.Lost, r.recv.Recovered, r.throughput(), verdict(r.failures()), r.failures()})
}
