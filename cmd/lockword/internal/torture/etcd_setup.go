package torture

import (
	"context"
	"fmt"
	"strings"
)

// checkEtcdReachable asks the -etcd endpoints, if any, for one key before
// any kind runs, when some chosen kind uses etcd: an endpoint that does
// not answer within etcdOpTimeout is a set-up error (exit status 2, as a
// C kind without a compiler), which says nothing about a lock, not a
// failed check (1). The runs ask again when they start.
func checkEtcdReachable(cfg *config, kinds []*kind) error {
	eps := cfg.etcd.endpoints
	if len(eps) == 0 || !usesEtcd(kinds) {
		return nil
	}
	cli, err := newEtcdClient(eps)
	if err != nil {
		return fmt.Errorf("-etcd %s: %w", strings.Join(eps, ","), err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, EtcdDataRoot); err != nil {
		return fmt.Errorf("-etcd %s: etcd unreachable (no answer within %v: %w); nothing was run", strings.Join(eps, ","), etcdOpTimeout, err)
	}
	return nil
}

// usesEtcd reports whether one of kinds is an etcd kind (they are all
// named etcd...).
func usesEtcd(kinds []*kind) bool {
	for _, k := range kinds {
		if strings.HasPrefix(k.name, "etcd") {
			return true
		}
	}
	return false
}
