package torture

// The set-up the etcd toolkit kinds (etcd-election, etcd-rw) share:
// the server (embedded, or -etcd), a client, and the run's data prefix,
// removed at the end.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/lockword/lockword/internal/etcdembed"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdEnv is an in-process etcd kind's server, client and keys.
type etcdEnv struct {
	cli       *clientv3.Client
	eps       []string // the client's endpoints
	keys      etcdKeys
	endpoints string // as the report shows them
	startRev  int64  // the revision before the run wrote anything
	close     func()
}

// startEtcdEnv starts (or reaches, with -etcd) the server and checks
// that it answers; close removes the run's keys and stops what it
// started.
func startEtcdEnv(cfg *config) (*etcdEnv, error) {
	eps := cfg.etcd.endpoints
	env := &etcdEnv{endpoints: strings.Join(eps, ","), close: func() {}}
	if len(eps) == 0 {
		c, err := etcdembed.Start(1)
		if err != nil {
			return nil, err
		}
		eps = c.Endpoints()
		env.endpoints = "embedded, 1 member(s) on " + strings.Join(eps, ",")
		env.close = func() { c.Close() }
	}
	cli, err := newEtcdClient(eps)
	if err != nil {
		env.close()
		return nil, err
	}
	env.eps = eps
	stop := env.close
	env.cli = cli
	env.keys = etcdKeys{fmt.Sprintf("%s%d-%08x", EtcdDataRoot, os.Getpid(), rand.Uint32())}
	env.close = func() {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		defer cancel()
		cli.Delete(ctx, env.keys.data+"/", clientv3.WithPrefix()) // a real cluster keeps nothing of ours
		cli.Close()
		stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	g, err := cli.Get(ctx, env.keys.start()) // fail early, clearly, if etcd is unreachable
	if err != nil {
		env.close()
		return nil, fmt.Errorf("etcd at %s: %w", strings.Join(eps, ","), err)
	}
	env.startRev = g.Header.Revision
	return env, nil
}
