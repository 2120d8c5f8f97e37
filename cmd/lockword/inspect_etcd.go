package main

// lockword inspect -etcd: the state of an etcdlock.Mutex or Semaphore,
// read from etcd.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

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
	if asJSON {
		// One line, as every lockword -json output.
		if err := json.NewEncoder(stdout).Encode(info); err != nil {
			fmt.Fprintf(stderr, "lockword inspect: %v\n", err)
			return exitFail
		}
		return exitOK
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
	return exitOK
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
		return exitOK
	}
	fmt.Fprintf(stdout, "etcd semaphore: %s (etcd %s, revision %d)\n", shownName(si.Prefix), endpoints, si.Revision)
	fmt.Fprintf(stdout, "Permits in use: %d of %d\n", si.InUse, si.Permits)
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
	return exitOK
}
