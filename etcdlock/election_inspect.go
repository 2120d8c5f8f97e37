package etcdlock

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// An Observer is one Election.Observe in progress, as Observers reports
// it.
type Observer struct {
	// Holder identifies the observing process and the lease its key is
	// on (the observing Election's).
	Holder
	// Name is the observing Election's SetName name when Observe was
	// called, "" if it had none.
	Name string `json:"name,omitempty"`
	// Since is when Observe was called (the observer's clock); zero if
	// the key's value is not one Observe writes.
	Since time.Time `json:"-"`
	// Revision is the create revision of its key.
	Revision int64 `json:"revision"`
}

// Observers returns the observers registered by Election.Observe on the
// election named by prefix, oldest first, as etcd has them now (one round
// trip). A key whose value is not one Observe writes shows only its
// lease. A bad name or nil client is an error wrapping ErrBadArgument.
func Observers(ctx context.Context, cli *clientv3.Client, prefix string) ([]Observer, error) {
	if err := checkClient(ctx, cli); err != nil {
		return nil, err
	}
	prefix, err := lockName(prefix)
	if err != nil {
		return nil, err
	}
	r, err := cli.Get(ctx, prefix+observerDir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := []Observer{}
	for _, kv := range r.Kvs {
		var rec observerRecord
		if json.Unmarshal(kv.Value, &rec) != nil || rec.SinceUnixNs <= 0 {
			out = append(out, Observer{Holder: Holder{Lease: kv.Lease}, Revision: kv.CreateRevision})
			continue
		}
		rec.Lease = kv.Lease // the lease it goes with, whatever the value says
		out = append(out, Observer{Holder: rec.Holder, Name: rec.Name, Since: time.Unix(0, rec.SinceUnixNs), Revision: kv.CreateRevision})
	}
	return out, nil
}
