package torture

// The etcd kinds' report: the counter experiment's, with the etcd lines added.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdExtra is what an etcd kind's report adds to the standard one.
type etcdExtra struct {
	Endpoints   string  `json:"endpoints"`
	TTLSeconds  float64 `json:"ttl_s"`
	Pauses      int     `json:"pauses,omitempty"`
	LateRejects int     `json:"late_writes_rejected"`
	LeasesLost  int     `json:"leases_lost"`
	LeaderStop  string  `json:"leader_stop,omitempty"`
	Hangs       int     `json:"hangs"`
	Recoveries  int     `json:"recoveries"`
	// LiveExpiries counts -kill recoveries from live workers whose lease
	// had expired (recorded by them): not kills, not robberies.
	LiveExpiries int      `json:"live_lease_expiries"`
	Errors       []string `json:"errors,omitempty"`
	Violations   []string `json:"violations,omitempty"`
	Acquisitions uint64   `json:"acquisitions"`
	// -chaos: cancelled acquisitions, the delayed endpoint, member stops,
	// and what must be 0: locks or queue keys left when every Mutex is
	// closed, and owner-death reports (no worker dies).
	Chaos          bool   `json:"chaos,omitempty"`
	Cancelled      uint64 `json:"cancelled_acquisitions"`
	SlowEndpoint   string `json:"slow_endpoint,omitempty"`
	MemberStops    int    `json:"member_stops"`
	PhantomHolders int    `json:"phantom_holders"`
	FalseDeaths    int    `json:"false_owner_death_reports"`
}

// report reads the outcome from etcd and builds the report.
func (r *etcdRun) report(workers int, elapsed time.Duration, kr *killReport) (report, error) {
	k := r.keys
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(k.counter()),
		clientv3.OpGet(k.list("committed"), clientv3.WithPrefix()),
		clientv3.OpGet(k.list(evRecovery), clientv3.WithPrefix()),
		clientv3.OpGet(k.list(evViolation), clientv3.WithPrefix()),
		clientv3.OpGet(k.list(evRejected), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(k.list(evLeaseLost), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("reading the outcome from etcd: %w", err)
	}
	cfg := r.cfg
	per := make([]int64, workers)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		id, _ := strconv.Atoi(strings.TrimPrefix(string(kv.Key), k.list("committed")))
		if id >= 1 && id <= workers {
			per[id-1], _ = strconv.ParseInt(string(kv.Value), 10, 64)
		}
	}
	base := newReport(cfg, r.name, hammerRun{perWorker: per, elapsed: elapsed})
	if cfg.kill || cfg.etcd.pause || cfg.timed() {
		base.iters, base.duration = 0, max(elapsed.Round(time.Millisecond), time.Millisecond)
	} else {
		base.iters = r.spec.Iters
	}
	base.procs = cfg.procs
	base.actual = kvInt(resp.Responses[0])
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		r.extra.Violations = append(r.extra.Violations, string(kv.Value))
	}
	base.ownerViolations = int64(len(r.extra.Violations))
	r.extra.LateRejects = int(resp.Responses[4].GetResponseRange().Count)
	if st := r.local.stats; st.Acquisitions > 0 {
		f := float64(st.SlowPath) / float64(st.Acquisitions)
		base.slowPath = &f
	} else {
		base.noStats = "no worker lived to report its Mutex statistics"
	}

	var recs []etcdRecovery
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		var ev etcdRecovery
		if json.Unmarshal(kv.Value, &ev) == nil {
			recs = append(recs, ev)
		}
	}
	r.extra.Recoveries = len(recs)
	if cfg.etcd.chaos {
		// Nobody dies in a chaos run: an owner-death report is false,
		// unless a lease expired (keep-alives starved while a member was
		// down), which the lease-lost count shows.
		r.extra.FalseDeaths = max(0, len(recs)-r.extra.LeasesLost)
	}
	if kr != nil {
		kr.Recoveries = int64(len(recs))
		seen := map[int]bool{}
		held := r.heldAtDeath
		expired := map[int]bool{}
		for _, kv := range resp.Responses[5].GetResponseRange().Kvs {
			pid, _ := strconv.Atoi(string(kv.Value))
			expired[pid] = true
		}
		for _, ev := range recs {
			switch {
			case !kr.killed[ev.DeadPID] && expired[ev.DeadPID]:
				// A live worker whose lease expired (keep-alives starved):
				// its successor was right to take over, and told.
				r.extra.LiveExpiries++
				kr.Recoveries--
			case !kr.killed[ev.DeadPID]:
				kr.Robbed = append(kr.Robbed, ev.DeadPID)
			case seen[ev.DeadPID]:
				r.extra.Errors = append(r.extra.Errors, fmt.Sprintf("the death of PID %d was recovered twice", ev.DeadPID))
			default:
				held[ev.DeadPID] = true
				at := r.killedAt[ev.DeadPID]
				det := time.Unix(0, ev.DetectedNs).Sub(at)
				kr.detections = append(kr.detections, det)
				kr.MaxDetectionMs = max(kr.MaxDetectionMs, float64(det)/1e6)
				if ev.RepairedNs != 0 {
					rep := time.Unix(0, ev.RepairedNs).Sub(at)
					kr.repairs = append(kr.repairs, rep)
					kr.MaxRecoveryMs = max(kr.MaxRecoveryMs, float64(rep)/1e6)
				}
			}
			seen[ev.DeadPID] = true
		}
		kr.HolderKills = len(held)
		sort.Ints(kr.Robbed)
		base.killed = kr
	}
	return &etcdReport{base: base, extra: r.extra, cfg: cfg}, nil
}

// etcdReport is the standard report of the counter experiment with the
// etcd kinds' lines added, and throughput in acquisitions per second.
type etcdReport struct {
	base  *counterReport
	extra etcdExtra
	cfg   *config
	// lines and checks are what a kind adds: lines before the result,
	// checks' failures to it (etcd-rw across processes).
	lines  []string
	checks func() []string
}

func (e *etcdReport) failures() []string {
	why := e.base.failures()
	if e.checks != nil {
		why = append(why, e.checks()...)
	}
	if e.extra.Hangs > 0 {
		why = append(why, fmt.Sprintf("%d hangs", e.extra.Hangs))
	}
	for _, s := range e.extra.Errors {
		why = append(why, "worker failed: "+s)
	}
	if e.extra.PhantomHolders > 0 {
		why = append(why, fmt.Sprintf("%d phantom holders", e.extra.PhantomHolders))
	}
	if e.extra.FalseDeaths > 0 {
		why = append(why, fmt.Sprintf("%d false owner-death reports", e.extra.FalseDeaths))
	}
	if e.cfg.etcd.pause && e.extra.Pauses < e.cfg.etcd.pauses {
		why = append(why, fmt.Sprintf("%d of %d pauses made", e.extra.Pauses, e.cfg.etcd.pauses))
	}
	return why
}

func (e *etcdReport) passed() bool { return len(e.failures()) == 0 }

func (e *etcdReport) writeText(w io.Writer) {
	var buf bytes.Buffer
	e.base.writeText(&buf)
	for line := range strings.SplitAfterSeq(buf.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "Throughput: "):
			fmt.Fprintf(w, "Throughput: %.0f acquisitions/s\n", float64(e.base.total())/e.base.elapsed.Seconds())
			continue
		case strings.HasPrefix(line, "Recoveries: "):
			fmt.Fprintf(w, "Recoveries: %d (each found counter = value × committed: an update is one transaction, nothing to roll back)\n", e.base.killed.Recoveries)
			continue
		case strings.HasPrefix(line, "Result: "):
			e.writeExtra(w)
			if why := e.failures(); len(why) > 0 {
				fmt.Fprintf(w, "Result: FAIL (%s)\n", strings.Join(why, "; "))
				continue
			}
		}
		io.WriteString(w, line)
	}
}

func (e *etcdReport) writeExtra(w io.Writer) {
	x := e.extra
	fmt.Fprintf(w, "etcd: %s; lease TTL %v\n", x.Endpoints, time.Duration(x.TTLSeconds*float64(time.Second)))
	if e.base.killed == nil {
		fmt.Fprintf(w, "Owner deaths recovered: %d\n", x.Recoveries)
	}
	if e.cfg.etcd.pause {
		fmt.Fprintf(w, "Pauses: %d (SIGSTOP of the holder past its TTL)\n", x.Pauses)
	}
	fmt.Fprintf(w, "Late writes rejected by the fence: %d; leases lost: %d\n", x.LateRejects, x.LeasesLost)
	if x.LiveExpiries > 0 {
		fmt.Fprintf(w, "Recoveries from live workers whose lease expired (not counted above): %d\n", x.LiveExpiries)
	}
	if x.LeaderStop != "" {
		fmt.Fprintf(w, "Leader stop: %s\n", x.LeaderStop)
	}
	if x.Chaos {
		fmt.Fprintf(w, "Chaos: %d cancelled acquisitions; slow endpoint %s; member stops: %d\n", x.Cancelled, x.SlowEndpoint, x.MemberStops)
		fmt.Fprintf(w, "Phantom holders: %d\n", x.PhantomHolders)
		fmt.Fprintf(w, "False owner-death reports: %d\n", x.FalseDeaths)
	}
	if e.base.killed == nil {
		fmt.Fprintf(w, "Hangs: %d\n", x.Hangs)
	}
	for _, l := range e.lines {
		fmt.Fprintln(w, l)
	}
	for i, v := range x.Violations {
		if i == 5 {
			fmt.Fprintf(w, "  ... %d more\n", len(x.Violations)-i)
			break
		}
		fmt.Fprintf(w, "  violation: %s\n", v)
	}
}

func (e *etcdReport) writeJSON(w io.Writer) error {
	var buf bytes.Buffer
	if err := e.base.writeJSON(&buf); err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		return err
	}
	m["etcd"] = e.extra
	return writeVerdictJSON(w, m, e.failures())
}

// writeVerdictJSON adds the verdict to an etcd kind's JSON report m
// ("result" PASS or FAIL, and the failures when there are any) and writes
// m as one line.
func writeVerdictJSON(w io.Writer, m map[string]any, failures []string) error {
	m["result"] = "PASS"
	if len(failures) > 0 {
		m["result"], m["failures"] = "FAIL", failures
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
