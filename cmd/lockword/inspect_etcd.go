package main

// lockword inspect -etcd: the state of an etcdlock.Mutex or Semaphore, and
// of the Election and RWMutex built on the Mutex, read from etcd.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// inspectEtcdTimeout bounds the whole inspection: an unreachable etcd is
// an error, not a hang.
const inspectEtcdTimeout = 5 * time.Second

// newEtcdClient connects to endpoints as the torture workers do: a short
// dial timeout, and the client's own logging silenced.
func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

func inspectEtcd(endpoints, prefix string, asJSON bool, stdout, stderr io.Writer) int {
	eps := strings.Split(endpoints, ",")
	cli, err := newEtcdClient(eps)
	if err != nil {
		fmt.Fprintf(stderr, "lockword inspect: %v\n", err)
		return exitUsage
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), inspectEtcdTimeout)
	defer cancel()
	if si, err := etcdlock.InspectSemaphore(ctx, cli, prefix); err == nil && (si.Permits > 0 || len(si.Corrupt) > 0) {
		return inspectEtcdSemaphore(si, endpoints, asJSON, stdout, stderr)
	}
	info, err := etcdlock.Inspect(ctx, cli, prefix)
	if err != nil {
		fmt.Fprintf(stderr, "lockword inspect: etcd at %s: %v\n", endpoints, err)
		return exitUsage
	}
	el, err := inspectElection(ctx, cli, prefix)
	if ce := (*lockword.CorruptError)(nil); errors.As(err, &ce) {
		// A leader record no Election writes is the lock's corruption to
		// show, not a failure to inspect.
		info.State = etcdlock.StateCorrupt
		info.Corrupt = append(info.Corrupt, ce.Reason)
		el, err = nil, nil
	}
	var readers []etcdlock.Reader
	if err == nil {
		readers, err = etcdlock.Readers(ctx, cli, prefix)
	}
	var observers []observerView
	if err == nil {
		observers, err = inspectObservers(ctx, cli, prefix)
	}
	if err != nil {
		fmt.Fprintf(stderr, "lockword inspect: etcd at %s: %v\n", endpoints, err)
		return exitUsage
	}
	if asJSON {
		// One line, as every lockword -json output.
		if err := json.NewEncoder(stdout).Encode(etcdJSON(info, el, readers, observers)); err != nil {
			fmt.Fprintf(stderr, "lockword inspect: %v\n", err)
			return exitFail
		}
		return etcdCorruptStatus("lock", info.Prefix, info.Corrupt, stderr)
	}
	fmt.Fprintf(stdout, "etcd lock: %s (etcd %s, revision %d)\n", shownName(prefix), endpoints, info.Revision)
	fmt.Fprintf(stdout, "State: %s\n", info.State)
	for _, c := range info.Corrupt {
		fmt.Fprintf(stdout, "  corrupt: %s\n", shownName(c))
	}
	if h := info.Holder; h != nil {
		who := "Holder"
		if info.State == etcdlock.StateOwnerDead {
			who = "Dead holder"
		}
		fmt.Fprintf(stdout, "%s: %s\n", who, holderText(*h))
		fmt.Fprintf(stdout, "Token: %d\n", info.Token)
		fmt.Fprintf(stdout, "Held for: %v (since %s, the holder's clock)\n",
			time.Since(info.HeldSince).Round(time.Millisecond), info.HeldSince.Format(time.RFC3339Nano))
	}
	if info.LeaseTTL >= 0 {
		fmt.Fprintf(stdout, "Lease TTL left: %v (of %v)\n", info.LeaseTTL, info.LeaseGranted)
	}
	fmt.Fprintf(stdout, "Waiters: %d\n", len(info.Waiters))
	for _, w := range info.Waiters {
		fmt.Fprintf(stdout, "  %s\n", holderText(w))
	}
	if len(readers) > 0 {
		fmt.Fprintf(stdout, "RW readers: %d (holding: arrived before the writer's token; the others wait for it)\n", len(readers))
		for _, r := range readers {
			fmt.Fprintf(stdout, "  %s, arrived at revision %d\n", holderText(r.Holder), r.Revision)
		}
	}
	printElection(stdout, el, observers)
	return etcdCorruptStatus("lock", info.Prefix, info.Corrupt, stderr)
}

// printElection prints an election's leader, if it has one, and its
// observers, if it has a leader or observers.
func printElection(stdout io.Writer, el *electionView, observers []observerView) {
	if el == nil && len(observers) == 0 {
		return
	}
	if el != nil {
		fmt.Fprintf(stdout, "Election leader: %s\n", holderText(el.Leader))
		fmt.Fprintf(stdout, "  value: %s\n", shownName(el.Value))
		fmt.Fprintf(stdout, "  term token: %d; leader since %s (its clock)\n", el.Token, el.Since.Format(time.RFC3339Nano))
		if el.LeaseTTL >= 0 {
			fmt.Fprintf(stdout, "  lease TTL left: %v (of %v)\n", el.LeaseTTL, el.LeaseGranted)
		}
	} else {
		fmt.Fprintln(stdout, "Election leader: none now")
	}
	fmt.Fprintf(stdout, "  observers: %d\n", len(observers))
	for _, o := range observers {
		line := "    " + holderText(o.Holder)
		if o.Name != "" {
			line += ", name " + shownName(o.Name)
		}
		if o.Since != nil {
			line += fmt.Sprintf(", observing since %s (its clock)", o.Since.Format(time.RFC3339Nano))
		}
		fmt.Fprintln(stdout, line)
	}
}

// etcdCorruptStatus is inspect -etcd's exit status once it has printed
// its report: exitFail, with the records named on stderr, if some record
// under prefix is one no valid history writes (a script that runs inspect
// as a check must not read that as healthy; as corruptStatus for a
// region), else exitOK.
func etcdCorruptStatus(kind, prefix string, corrupt []string, stderr io.Writer) int {
	if len(corrupt) == 0 {
		return exitOK
	}
	fmt.Fprintf(stderr, "lockword inspect: etcd %s %s is corrupt: %s; its calls fail with ErrCorrupt\n",
		kind, shownName(prefix), strings.Join(corrupt, "; "))
	return exitFail
}

// electionView is the leader of an etcdlock.Election, as inspect shows
// it; the waiters are the Mutex's (the campaigners).
type electionView struct {
	etcdlock.Term
	Since        *time.Time    `json:"since,omitempty"`
	LeaseTTL     time.Duration `json:"lease_ttl_ns"`
	LeaseGranted time.Duration `json:"lease_granted_ns"`
}

// inspectElection reads the election leader record at prefix, nil if
// there is none (no election, or no leader now).
func inspectElection(ctx context.Context, cli *clientv3.Client, prefix string) (*electionView, error) {
	t, err := etcdlock.Leader(ctx, cli, prefix)
	if errors.Is(err, etcdlock.ErrNoLeader) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := &electionView{Term: t, LeaseTTL: -1, LeaseGranted: -1}
	if !t.Since.IsZero() {
		v.Since = &t.Since
	}
	if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(t.Leader.Lease)); err == nil && ttl.TTL >= 0 {
		v.LeaseTTL = time.Duration(ttl.TTL) * time.Second
		v.LeaseGranted = time.Duration(ttl.GrantedTTL) * time.Second
	}
	return v, nil
}

// observerView is an election's observer as inspect shows it: its
// Since left out of -json when the key does not say.
type observerView struct {
	etcdlock.Observer
	Since *time.Time `json:"since,omitempty"`
}

// inspectObservers reads the observers of the election at prefix ([] if
// none).
func inspectObservers(ctx context.Context, cli *clientv3.Client, prefix string) ([]observerView, error) {
	obs, err := etcdlock.Observers(ctx, cli, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]observerView, len(obs))
	for i, o := range obs {
		out[i].Observer = o
		if !o.Since.IsZero() {
			out[i].Since = &obs[i].Since
		}
	}
	return out, nil
}

// etcdInfoJSON is inspect -etcd -json: etcdlock.Info without a null or a
// zero time (an empty list is [], a missing holder or time is left out),
// and the election's leader if there is one.
type etcdInfoJSON struct {
	Prefix       string            `json:"prefix"`
	State        string            `json:"state"`
	Holder       *etcdlock.Holder  `json:"holder,omitempty"`
	Token        int64             `json:"token"`
	HeldSince    *time.Time        `json:"held_since,omitempty"`
	LeaseTTL     time.Duration     `json:"lease_ttl_ns"`
	LeaseGranted time.Duration     `json:"lease_granted_ns"`
	Waiters      []etcdlock.Holder `json:"waiters"`
	Revision     int64             `json:"revision"`
	Corrupt      []string          `json:"corrupt"`
	Election     *electionView     `json:"election,omitempty"`
	// Readers are an RWMutex's readers ([] for a Mutex or an Election).
	Readers []etcdlock.Reader `json:"readers"`
	// Observers are an Election's observers (Election.Observe), with or
	// without a leader ([] if none).
	Observers []observerView `json:"observers"`
}

func etcdJSON(info *etcdlock.Info, el *electionView, readers []etcdlock.Reader, observers []observerView) etcdInfoJSON {
	j := etcdInfoJSON{Prefix: info.Prefix, State: info.State, Holder: info.Holder, Token: info.Token,
		LeaseTTL: info.LeaseTTL, LeaseGranted: info.LeaseGranted, Revision: info.Revision,
		Waiters: info.Waiters, Corrupt: info.Corrupt, Election: el}
	if !info.HeldSince.IsZero() {
		j.HeldSince = &info.HeldSince
	}
	if j.Waiters == nil {
		j.Waiters = []etcdlock.Holder{}
	}
	if j.Corrupt == nil {
		j.Corrupt = []string{}
	}
	j.Readers = readers
	if j.Readers == nil {
		j.Readers = []etcdlock.Reader{}
	}
	j.Observers = observers
	if j.Observers == nil {
		j.Observers = []observerView{}
	}
	return j
}

// holderText is a holder as inspect prints it, its host name quoted if it
// is not plain (it comes from etcd: anyone with write access sets it).
func holderText(h etcdlock.Holder) string {
	return fmt.Sprintf("host %s, PID %d, lease %x", shownName(h.Host), h.PID, h.Lease)
}

// inspectEtcdSemaphore prints a semaphore: permits in use by each holder,
// the waiters, and holders that died holding, not yet reported.
func inspectEtcdSemaphore(si *etcdlock.SemInfo, endpoints string, asJSON bool, stdout, stderr io.Writer) int {
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(si); err != nil {
			fmt.Fprintf(stderr, "lockword inspect: %v\n", err)
			return exitFail
		}
		return etcdCorruptStatus("semaphore", si.Prefix, si.Corrupt, stderr)
	}
	fmt.Fprintf(stdout, "etcd semaphore: %s (etcd %s, revision %d)\n", shownName(si.Prefix), endpoints, si.Revision)
	if si.Permits > 0 {
		fmt.Fprintf(stdout, "Permits in use: %d of %d\n", si.InUse, si.Permits)
	} else {
		fmt.Fprintln(stdout, "Permits: corrupt (the stored count is not one a Semaphore writes)")
	}
	for _, c := range si.Corrupt {
		fmt.Fprintf(stdout, "  corrupt: %s\n", shownName(c))
	}
	for _, l := range []struct {
		what  string
		holds []etcdlock.SemHold
	}{{"Holders", si.Holders}, {"Waiters", si.Waiters}, {"Dead holders (not yet reported)", si.Dead}} {
		fmt.Fprintf(stdout, "%s: %d\n", l.what, len(l.holds))
		for _, h := range l.holds {
			fmt.Fprintf(stdout, "  %d permits, token %d: %s\n", h.N, h.Token, holderText(h.Holder))
		}
	}
	return etcdCorruptStatus("semaphore", si.Prefix, si.Corrupt, stderr)
}
