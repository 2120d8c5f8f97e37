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
// more: the deletions alone are enough.
func (a *attempt) fenceOnce(ctx context.Context) error {
	m := a.m
	del := []clientv3.Op{clientv3.OpDelete(m.queueKey)}
	if a.held != "" {
		del = append(del, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(m.ownerKey), "=", a.held)},
			[]clientv3.Op{clientv3.OpDelete(m.ownerKey)}, nil))
	}
	bump := clientv3.OpPut(m.fenceKey, "", clientv3.WithLease(clientv3.LeaseID(m.me.Lease)))
	_, err := m.cli.Txn(ctx).If(a.fenceCmp()).Then(append([]clientv3.Op{bump}, del...)...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		_, err = m.cli.Txn(ctx).Then(del...).Commit()
	}
	if err != nil {
		return err
	}
	m.fenced = a.fence + 1
	return nil
}

// Token returns the fencing token of the current hold, 0 when m does not
// hold the lock. Tokens strictly increase from one holder to the next.
func (m *Mutex) Token() int64 { return m.token.Load() }

// Guard returns the comparison that holds in an etcd transaction exactly
// while the current hold lasts (our queue key exists with the token as
// its create revision), for callers that build their own transactions.
// Without a hold it compares against token 0, which never holds.
func (m *Mutex) Guard() clientv3.Cmp { return m.guardOf(m.token.Load()) }

func (m *Mutex) guardOf(token int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(m.queueKey), "=", token)
}

// Txn commits ops in one etcd transaction if m still holds the lock, and
// returns ErrNotHolder (writing nothing) if it does not: the guarded
// write. ops must not touch keys under the lock's prefix.
func (m *Mutex) Txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	tok := m.token.Load()
	if tok == 0 {
		return nil, m.nameErr(ErrNotHolder)
	}
	resp, err := m.cli.Txn(ctx).If(m.guardOf(tok)).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return resp, m.nameErr(ErrNotHolder)
	}
	return resp, nil
}

// Put writes key = val if m still holds the lock (Txn with one put).
func (m *Mutex) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) error {
	_, err := m.Txn(ctx, clientv3.OpPut(key, val, opts...))
	return err
}
