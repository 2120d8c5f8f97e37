package etcdlock

// Fencing: of a failed attempt's writes that may still land (abandon, the
// fence key; see Mutex, "Calls that fail"), and of a holder's writes that
// may land after its hold ended (Guard, Txn, Put; see "Fencing the
// holder's writes").

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fenceCmp holds while no clean-up has fenced this attempt: the fence key
// is at the version the attempt began with.
func (a *attempt) fenceCmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.Version(a.m.fenceKey), "=", a.fence)
}

// abandon ends a failed attempt and lets m's next call in (see
// handle.abandon), fencing what it sent.
func (a *attempt) abandon(ctx context.Context) { a.m.handle.abandon(ctx, a.sent, a.fenceOnce) }

// fenceOnce sends the fence: in one transaction, if the fence key is still
// at the attempt's version, it increments it (so that a write of the
// attempt still in flight fails) and deletes our queue key and the "held"
// record the attempt sent, if it stands. Whether this transaction or the
// late write commits first, nothing of the attempt is left. An
// inconsistent record (taken from a dead holder) stays: that death is
// real, and the next acquirer repairs. The fence key's version already
// past the attempt's means an earlier fenceOnce committed (its reply was
// lost): done. If the lease is gone, no write attached to it can land any
// more: the deletions alone are enough, and the fence version stays.
func (a *attempt) fenceOnce(ctx context.Context) error {
	m := a.m
	del := []clientv3.Op{clientv3.OpDelete(m.queueKey)}
	if a.held != "" {
		del = append(del, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(m.ownerKey), "=", a.held)},
			[]clientv3.Op{clientv3.OpDelete(m.ownerKey)}, nil))
	}
	bumped, err := fenceTxn(ctx, m.cli, m.fenceKey, m.me.Lease, a.fence, del)
	if bumped {
		m.fenced = a.fence + 1
	}
	return err
}

// fenceTxn is the transaction of a fenceOnce, of a Mutex's attempt or a
// Semaphore's: it increments fenceKey (a put on lease) if it is still at
// version fence, and deletes del in the same transaction; with the lease
// gone (the put cannot be made), it deletes del alone, as nothing of the
// attempt can then land. bumped reports whether the fence key moved on:
// not with the lease gone, so the caller's next attempt compares the same
// version (counting a bump that did not happen would make it read its own
// fence as another writer's, and report corruption). err is the client's.
func fenceTxn(ctx context.Context, cli *clientv3.Client, fenceKey string, lease, fence int64, del []clientv3.Op) (bumped bool, err error) {
	bump := clientv3.OpPut(fenceKey, "", clientv3.WithLease(clientv3.LeaseID(lease)))
	_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(fenceKey), "=", fence)).
		Then(append([]clientv3.Op{bump}, del...)...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		_, err = cli.Txn(ctx).Then(del...).Commit()
		return false, err
	}
	return err == nil, err
}

// Token returns the fencing token of the current hold, 0 when m does not
// hold the lock. Tokens strictly increase from one holder to the next.
func (m *Mutex) Token() int64 { return m.token.Load() }

// Guard returns the comparison that holds in an etcd transaction exactly
// while the current hold lasts (our queue key exists with the token as
// its create revision), for callers that build their own transactions.
// Without a hold it compares against token 0, which never holds.
func (m *Mutex) Guard() clientv3.Cmp { return m.guardOf(m.token.Load()) }

func (m *Mutex) guardOf(token int64) clientv3.Cmp { return holdGuard(m.queueKey, token) }

// holdGuard holds while key is the record of the hold that token names:
// key exists with token as its create revision. A deleted and re-created
// key has a new create revision, so the guard never holds again once the
// hold has ended.
func holdGuard(key string, token int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(key), "=", token)
}

// guardedTxn commits ops in one transaction if holdGuard(key, token)
// holds: the guarded write of Mutex, RWMutex and Semaphore. It returns
// ErrNotHolder writing nothing for token 0 (no hold) or a hold that has
// ended (with the response), and the client's error as it is.
func guardedTxn(ctx context.Context, cli *clientv3.Client, key string, token int64, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	if token == 0 {
		return nil, ErrNotHolder
	}
	resp, err := cli.Txn(ctx).If(holdGuard(key, token)).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return resp, ErrNotHolder
	}
	return resp, nil
}

// Txn commits ops in one etcd transaction if m still holds the lock, and
// returns ErrNotHolder (writing nothing) if it does not: the guarded
// write. ops must not touch keys under the lock's prefix.
func (m *Mutex) Txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := guardedTxn(ctx, m.cli, m.queueKey, m.token.Load(), ops)
	return resp, m.nameErr(err)
}

// Put writes key = val if m still holds the lock (Txn with one put).
func (m *Mutex) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) error {
	_, err := m.Txn(ctx, clientv3.OpPut(key, val, opts...))
	return err
}
