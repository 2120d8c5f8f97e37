package etcdlock

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Readers returns the read holds and waiting readers of the RWMutex at
// prefix, oldest first, as etcd has them now (one round trip; Inspect
// gives its writers: the holder and the waiters). A reader's key does not
// say whether it holds or waits for a writer before it: a reader created
// before the holder's token holds (or is leaving), one created after it
// waits. A bad name or nil client is an error wrapping ErrBadArgument.
func Readers(ctx context.Context, cli *clientv3.Client, prefix string) ([]Reader, error) {
	if ctx == nil {
		return nil, lockword.ErrNilContext
	}
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", ErrBadArgument)
	}
	prefix, err := lockName(prefix)
	if err != nil {
		return nil, err
	}
	r, err := cli.Get(ctx, prefix+readerDir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := []Reader{}
	for _, kv := range r.Kvs {
		var h Holder
		json.Unmarshal(kv.Value, &h) // a corrupt identity shows as zero
		out = append(out, Reader{Holder: h, Revision: kv.CreateRevision})
	}
	return out, nil
}

// Reader is one reader of an RWMutex, as Readers reports it.
type Reader struct {
	Holder
	// Revision is the create revision of its key: its place in the order
	// of arrival, comparable with a writer's token.
	Revision int64 `json:"revision"`
}
