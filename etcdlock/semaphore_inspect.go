package etcdlock

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SemHold is one acquisition of a semaphore as InspectSemaphore shows it.
type SemHold struct {
	Holder
	N     int   `json:"n"`     // permits asked or held
	Token int64 `json:"token"` // its queue key's create revision
}

// SemInfo is what InspectSemaphore found of a semaphore.
type SemInfo struct {
	Prefix string `json:"prefix"`
	// Permits is N as the semaphore's first acquirer stored it; 0: no
	// Semaphore has acquired under this name (it may be a Mutex's).
	Permits int `json:"permits"`
	InUse   int `json:"in_use"` // permits held by live holders
	// Holders hold permits; Waiters wait, first first; Dead are holders
	// whose lease ended holding, not yet reported to an acquirer. Never
	// nil (an empty list is JSON's [], not null).
	Holders []SemHold `json:"holders"`
	Waiters []SemHold `json:"waiters"`
	Dead    []SemHold `json:"dead"`
	// Corrupt names the keys no valid history writes (acquirers report
	// them as lockword.ErrCorrupt).
	Corrupt  []string `json:"corrupt,omitempty"`
	Revision int64    `json:"revision"`
}

// InspectSemaphore reads the semaphore at prefix without changing it, in
// one round trip. A bad prefix is an error wrapping ErrBadArgument.
func InspectSemaphore(ctx context.Context, cli *clientv3.Client, prefix string) (*SemInfo, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", ErrBadArgument)
	}
	p, err := lockName(prefix)
	if err != nil {
		return nil, err
	}
	r, err := cli.Txn(ctx).Then(
		clientv3.OpGet(p+permitsKey),
		clientv3.OpGet(p+queueDir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(p+holdsDir, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, err
	}
	info := &SemInfo{Prefix: p, Revision: r.Header.Revision, Holders: []SemHold{}, Waiters: []SemHold{}, Dead: []SemHold{}}
	if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		if info.Permits, err = parsePermits(kvs[0].Key, kvs[0].Value); err != nil {
			info.Corrupt = append(info.Corrupt, err.Error())
			return info, nil
		}
	}
	if info.Permits == 0 {
		return info, nil
	}
	live := map[string]int64{}
	sum := 0
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		var e semEntry
		if err := checkQueueKey(p, string(kv.Key), kv.Lease); err != nil {
			info.Corrupt = append(info.Corrupt, err.Error())
			continue
		}
		if json.Unmarshal(kv.Value, &e) != nil || e.N < 1 || e.N > info.Permits {
			info.Corrupt = append(info.Corrupt, fmt.Sprintf("queue key %s: value %q is not a request of 1..%d permits", kv.Key, kv.Value, info.Permits))
			continue
		}
		live[string(kv.Key)] = kv.CreateRevision
		h := SemHold{Holder: e.Holder, N: e.N, Token: kv.CreateRevision}
		if sum += e.N; sum <= info.Permits && len(info.Waiters) == 0 {
			info.Holders = append(info.Holders, h)
			info.InUse += e.N
		} else {
			info.Waiters = append(info.Waiters, h)
		}
	}
	for _, kv := range r.Responses[2].GetResponseRange().Kvs {
		var e semEntry
		name := strings.TrimPrefix(string(kv.Key), p+holdsDir)
		if !semNameOK(name) || json.Unmarshal(kv.Value, &e) != nil || e.N < 1 || e.Token <= 0 {
			info.Corrupt = append(info.Corrupt, fmt.Sprintf("hold record %s = %q is not one a Semaphore writes", kv.Key, kv.Value))
			continue
		}
		if live[p+queueDir+name] != e.Token {
			info.Dead = append(info.Dead, SemHold{Holder: e.Holder, N: e.N, Token: e.Token})
		}
	}
	return info, nil
}
