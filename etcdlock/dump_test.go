package etcdlock

import (
	"context"
	"runtime"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// dumpState logs, for a failed test, what explains a wait that did not
// end: every key under the lock's prefix p (with its create revision and
// lease, so that a stranded queue key or a stale hold record shows) and
// the stacks of every goroutine of the test binary (a Mutex call parked
// on a watch, a keep-alive loop that stopped). It is called once, when
// the test has already failed, and never fails it further.
func dumpState(t testing.TB, cli *clientv3.Client, p string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	if r, err := cli.Get(ctx, p, clientv3.WithPrefix()); err != nil {
		t.Logf("dump: keys under %s: %v", p, err)
	} else {
		t.Logf("dump: %d keys under %s at revision %d", len(r.Kvs), p, r.Header.Revision)
		for _, kv := range r.Kvs {
			t.Logf("dump:   %s = %q (create %d, mod %d, lease %x)", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Lease)
		}
	}
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Logf("dump: goroutines at %s:\n%s", time.Now().Format(time.RFC3339Nano), buf)
}
