package etcdlock

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lock states as Inspect reports them.
const (
	StateFree           = "free"
	StateHeld           = "held"
	StateRepairing      = "held, inconsistent (taken from a dead holder, MarkConsistent not yet called)"
	StateOwnerDead      = "owner dead (its lease expired holding; the next acquirer gets ErrOwnerDead)"
	StateNotRecoverable = "not recoverable"
	StateCorrupt        = "corrupt (records no valid history writes; see Corrupt; Reinitialize removes them)"
)

// Info is what Inspect found of a lock.
type Info struct {
	Prefix string `json:"prefix"`
	State  string `json:"state"` // one of the State constants
	// Holder is the holder, or the dead holder in StateOwnerDead, or nil;
	// Token its fencing token and HeldSince when its hold began (its
	// clock).
	Holder    *Holder   `json:"holder"`
	Token     int64     `json:"token"`
	HeldSince time.Time `json:"held_since"`
	// LeaseTTL is how long the holder's lease has left (whole seconds, as
	// etcd reports it) and LeaseGranted its full TTL; -1 when there is no
	// live holder.
	LeaseTTL     time.Duration `json:"lease_ttl_ns"`
	LeaseGranted time.Duration `json:"lease_granted_ns"`
	// Waiters are the queued Mutexes other than the holder, first first.
	Waiters []Holder `json:"waiters"`
	// Revision is the etcd revision Inspect read at.
	Revision int64 `json:"revision"`
	// Corrupt says, in StateCorrupt, what no valid history writes: a hold
	// record that does not parse, or queue keys no Mutex writes (named,
	// each, with the reason); acquirers report it as lockword.ErrCorrupt.
	Corrupt []string `json:"corrupt,omitempty"`
}

// Inspect reads the lock at prefix without changing it: its hold record,
// its queue and the holder's lease (two round trips). prefix is
// normalised as NewMutex does; a bad one is an error wrapping
// ErrBadArgument.
func Inspect(ctx context.Context, cli *clientv3.Client, prefix string) (*Info, error) {
	return inspect(ctx, cli, prefix, true)
}

// Peek is Inspect in one round trip, without the holder's lease TTL
// (LeaseTTL and LeaseGranted are -1): for a caller that must act on what
// it saw at once.
func Peek(ctx context.Context, cli *clientv3.Client, prefix string) (*Info, error) {
	return inspect(ctx, cli, prefix, false)
}

func inspect(ctx context.Context, cli *clientv3.Client, prefix string, lease bool) (*Info, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", ErrBadArgument)
	}
	prefix, err := lockName(prefix)
	if err != nil {
		return nil, err
	}
	owner := prefix + ownerKey
	r, err := cli.Txn(ctx).Then(
		clientv3.OpGet(owner),
		clientv3.OpGet(prefix+queueDir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
	).Commit()
	if err != nil {
		return nil, err
	}
	info := &Info{Prefix: prefix, State: StateFree, LeaseTTL: -1, LeaseGranted: -1, Revision: r.Header.Revision}
	var queue []*mvccKV
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		if err := checkQueueKey(prefix, string(kv.Key), kv.Lease); err != nil {
			info.Corrupt = append(info.Corrupt, err.Error())
			continue
		}
		queue = append(queue, kv)
	}
	var holderKey string
	if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		if _, err := parseRecord(kvs[0].Value); err != nil {
			info.Corrupt = append(info.Corrupt, fmt.Sprintf("hold record %s: %v", owner, err))
		}
	}
	if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && len(info.Corrupt) == 0 {
		rec, _ := parseRecord(kvs[0].Value)
		info.Token = rec.token(kvs[0].CreateRevision)
		h := rec.Holder
		info.Holder, info.HeldSince = &h, time.Unix(0, rec.SinceUnixNs)
		alive := len(queue) > 0 && string(queue[0].Key) == rec.Key && queue[0].CreateRevision == info.Token
		switch {
		case rec.State == stateNotRecoverable:
			info.State, info.Holder, info.Token = StateNotRecoverable, nil, 0
		case !alive:
			info.State = StateOwnerDead
		case rec.State == stateInconsistent:
			info.State, holderKey = StateRepairing, rec.Key
		default:
			info.State, holderKey = StateHeld, rec.Key
		}
	}
	if len(info.Corrupt) > 0 {
		info.State = StateCorrupt
	}
	for _, kv := range queue {
		if string(kv.Key) == holderKey {
			continue
		}
		h := Holder{Lease: kv.Lease} // a fast path's key has no value: its record names it
		json.Unmarshal(kv.Value, &h) // a corrupt identity shows only the lease
		info.Waiters = append(info.Waiters, h)
	}
	if holderKey != "" && lease {
		if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(info.Holder.Lease)); err == nil && ttl.TTL >= 0 {
			info.LeaseTTL = time.Duration(ttl.TTL) * time.Second
			info.LeaseGranted = time.Duration(ttl.GrantedTTL) * time.Second
		}
	}
	return info, nil
}
