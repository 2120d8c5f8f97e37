package torture

// The etcd-election kinds' checks, read back from etcd's history of the
// run's keys, and their report.

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/lockword/lockword/etcdlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// electionExtra is what an etcd-election run found.
type electionExtra struct {
	Endpoints   string   `json:"endpoints"`
	TTLSeconds  float64  `json:"ttl_s"`
	Terms       int      `json:"terms"`        // leader records with a new token in P/leader's history
	Depositions int      `json:"depositions"`  // leaders deposed: killed, paused or their lease revoked
	Kills       int      `json:"kills"`        // -procs -kill: leader processes SIGKILLed
	Pauses      int      `json:"pauses"`       // -procs -pause: leader processes SIGSTOPped past their lease
	Processes   int      `json:"processes"`    // -procs: worker processes at the start
	OwnerDeaths int      `json:"owner_deaths"` // Campaigns that returned ErrOwnerDead
	LateRejects int      `json:"late_writes_rejected"`
	LateLanded  int      `json:"late_writes_landed"`
	Writes      int      `json:"writes"`
	Observers   int      `json:"observers"`
	ObserverOK  int      `json:"observers_complete"` // saw every leader record once, in order
	Hangs       int      `json:"hangs"`
	Errors      []string `json:"errors"`
	Violations  []string `json:"violations"`
}

// check reads the history of the run's keys since startRev and fills in
// r.x: the terms, the late writes, the violations, the observers.
func (r *electionRun) check(startRev int64, obs []*electionObserver) {
	r.mu.Lock()
	r.x.Errors = append([]string{}, r.errs...)
	r.mu.Unlock()
	r.x.Violations = []string{}
	violate := func(format string, args ...any) {
		r.x.Violations = append(r.x.Violations, fmt.Sprintf(format, args...))
	}
	events, err := r.history(startRev)
	if err != nil {
		r.x.Errors = append(r.x.Errors, "reading the history: "+err.Error())
		return
	}
	leaderKey := r.election() + "/leader"
	var ref []etcdlock.Term
	var lastTerm, maxWrite int64
	for _, ev := range events {
		key := string(ev.Kv.Key)
		if ev.Type != mvccpb.PUT {
			continue
		}
		switch {
		case key == leaderKey:
			var rec struct {
				Token int64 `json:"token"`
				Lease int64 `json:"lease"`
			}
			json.Unmarshal(ev.Kv.Value, &rec)
			if n := len(ref); n > 0 {
				p := ref[n-1]
				switch {
				case rec.Token < p.Token:
					violate("leader record of term %d after term %d's: tokens went back", rec.Token, p.Token)
				case rec.Token == p.Token && rec.Lease != p.Leader.Lease:
					violate("term %d has two leaders (leases %x and %x)", rec.Token, p.Leader.Lease, rec.Lease)
				}
			}
			if len(ref) == 0 || rec.Token != ref[len(ref)-1].Token {
				r.x.Terms++
			}
			ref = append(ref, etcdlock.Term{Token: rec.Token, Leader: etcdlock.Holder{Lease: rec.Lease}, Revision: ev.Kv.ModRevision})
		case strings.HasPrefix(key, r.data+"/ownerdead/"):
			r.x.OwnerDeaths++
		case strings.HasPrefix(key, r.data+"/rejected/"):
			r.x.LateRejects++
		case strings.HasPrefix(key, r.data+"/terms/"):
			tok, _ := strconv.ParseInt(key[len(r.data+"/terms/"):], 10, 64)
			if tok <= lastTerm {
				violate("term record %d committed after term %d's: tokens must strictly increase", tok, lastTerm)
			}
			lastTerm = max(lastTerm, tok)
		case strings.HasPrefix(key, r.data+"/writes/"):
			r.x.Writes++
			tok, _ := strconv.ParseInt(string(ev.Kv.Value), 10, 64)
			if tok < maxWrite {
				r.x.LateLanded++
				if r.x.LateLanded <= 3 {
					violate("a write of term %d landed after one of term %d (a deposed leader's late write)", tok, maxWrite)
				}
			}
			maxWrite = max(maxWrite, tok)
		}
	}
	r.x.Observers = len(obs)
	for i, o := range obs {
		if why := o.compare(ref); why != "" {
			violate("observer %d: %s", i+1, why)
		} else {
			r.x.ObserverOK++
		}
	}
}

// history returns every event on the run's keys after startRev, in
// commit order.
func (r *electionRun) history(startRev int64) ([]*clientv3.Event, error) {
	return etcdHistory(r.cli, r.data, startRev)
}

// compare waits (up to hangTimeout) until o has seen as many records as
// ref holds, and says how what it saw differs from ref ("" if it does
// not: every record once, in order, without a gap).
func (o *electionObserver) compare(ref []etcdlock.Term) string {
	return o.compareWithin(ref, hangTimeout)
}

func (o *electionObserver) compareWithin(ref []etcdlock.Term, wait time.Duration) string {
	deadline := time.Now().Add(wait)
	got := o.seen()
	for len(got) < len(ref) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		got = o.seen()
	}
	time.Sleep(20 * time.Millisecond) // one sent twice would show now
	got = o.seen()
	for i, t := range got {
		switch {
		case t.Gap:
			return fmt.Sprintf("a gap before record %d (term %d)", i+1, t.Token)
		case i >= len(ref):
			return fmt.Sprintf("%d records, of %d written: record %d (term %d, revision %d) is extra", len(got), len(ref), i+1, t.Token, t.Revision)
		case t.Revision != ref[i].Revision || t.Token != ref[i].Token:
			return fmt.Sprintf("record %d is term %d at revision %d, want term %d at revision %d (skipped or out of order)", i+1, t.Token, t.Revision, ref[i].Token, ref[i].Revision)
		}
	}
	if len(got) < len(ref) {
		return fmt.Sprintf("saw %d of the %d leader records", len(got), len(ref))
	}
	return ""
}

// electionReport is an etcd-election run's report.
type electionReport struct {
	name    string
	workers int
	elapsed time.Duration
	x       electionExtra
}

func (e *electionReport) failures() []string {
	var why []string
	x := e.x
	if x.LateLanded > 0 {
		why = append(why, fmt.Sprintf("%d late writes of deposed leaders landed", x.LateLanded))
	}
	if n := len(x.Violations) - min(x.LateLanded, 3); n > 0 {
		why = append(why, fmt.Sprintf("%d other violations", n))
	}
	if x.Depositions == 0 {
		why = append(why, "no leader was deposed: the run proves nothing about fencing")
	}
	if x.Hangs > 0 {
		why = append(why, fmt.Sprintf("%d hangs", x.Hangs))
	}
	for _, s := range x.Errors {
		why = append(why, "worker failed: "+s)
	}
	return why
}

func (e *electionReport) passed() bool { return len(e.failures()) == 0 }

func (e *electionReport) writeText(w io.Writer) {
	x := e.x
	fmt.Fprintf(w, "Lock: %s\n", e.name)
	fmt.Fprintf(w, "Workers: %d\n", e.workers)
	fmt.Fprintf(w, "etcd: %s; lease TTL %v\n", x.Endpoints, time.Duration(x.TTLSeconds*float64(time.Second)))
	fmt.Fprintf(w, "Terms: %d in %v\n", x.Terms, e.elapsed.Round(time.Millisecond))
	if x.Processes > 0 {
		fmt.Fprintf(w, "Processes: %d; leaders SIGKILLed: %d, SIGSTOPped past their lease: %d\n", x.Processes, x.Kills, x.Pauses)
	}
	fmt.Fprintf(w, "Depositions: %d (killed, paused, or lease revoked under a leader); owner deaths reported: %d\n", x.Depositions, x.OwnerDeaths)
	fmt.Fprintf(w, "Writes landed: %d; late writes rejected by the fence: %d\n", x.Writes, x.LateRejects)
	fmt.Fprintf(w, "Late writes landed: %d\n", x.LateLanded)
	fmt.Fprintf(w, "Observers complete: %d of %d (every leader record once, in order)\n", x.ObserverOK, x.Observers)
	fmt.Fprintf(w, "Hangs: %d\n", x.Hangs)
	for i, v := range x.Violations {
		if i == 5 {
			fmt.Fprintf(w, "  ... %d more\n", len(x.Violations)-i)
			break
		}
		fmt.Fprintf(w, "  violation: %s\n", v)
	}
	if why := e.failures(); len(why) > 0 {
		fmt.Fprintf(w, "Result: FAIL (%s)\n", strings.Join(why, "; "))
		return
	}
	fmt.Fprintln(w, "Result: PASS")
}

func (e *electionReport) writeJSON(w io.Writer) error {
	m := map[string]any{"lock": e.name, "workers": e.workers, "elapsed_ns": e.elapsed, "etcd": e.x}
	return writeVerdictJSON(w, m, e.failures())
}
