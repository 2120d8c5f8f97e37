package etcdlock

// Fencing: of a failed attempt's writes that may still land (abandon, the
// fence key; see Mutex, "Calls that fail"), and of a holder's writes that
// may land after its hold ended (Guard, Txn, Put; see "Fencing the
// holder's writes").

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fenceCmp holds while no clean-up has fenced this attempt: the fence key
// is at the version the attempt began with.
func (a *attempt) fenceCmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.Version(a.m.fenceKey), "=", a.fence)
}

// abandon ends a failed attempt and lets m's next call in: at once if the
// attempt wrote nothing, after its fence otherwise. The fence is tried
// within ctx if it has time left; else, or if that try fails, it runs in
// the background, which holds the gate until it is done.
func (a *attempt) abandon(ctx context.Context) {
	m := a.m
	if !a.sent {
		m.gate.Unlock()
		return
	}
	if ctx.Err() == nil && a.fenceOnce(ctx) == nil {
		m.gate.Unlock()
		return
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		a.fenceInBackground()
		m.gate.Unlock()
	}()
}

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

// fenceInBackground retries the fence for one lease TTL; if etcd still
// cannot be told, it gives the lease up (see giveUp).
func (a *attempt) fenceInBackground() {
	m := a.m
	deadline := time.Now().Add(m.ttl)
	pause := lockRetryMin
	for {
		ctx, cancel := tryContext(deadline)
		err := a.fenceOnce(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			m.giveUp("could not clean up after a failed acquisition", err)
			return
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, lockRetryMax)
	}
}

// tryContext bounds one try of a background retry: requestTimeout, and
// not past the retries' deadline.
func tryContext(deadline time.Time) (context.Context, context.CancelFunc) {
	if d := time.Now().Add(requestTimeout); d.Before(deadline) {
		deadline = d
	}
	return context.WithDeadline(context.Background(), deadline)
}

// giveUp ends m's lease because etcd could not be told what it must know
// (a clean-up, an unlock) within one TTL: it stops the keep-alive and
// revokes the lease (if etcd is still unreachable, the lease expires
// within a TTL), so that m's keys go with it; m is lost (ErrLeaseLost),
// and so is every Mutex on its Session.
func (m *Mutex) giveUp(what string, err error) {
	m.log.Warn("etcdlock: "+what+" within the lease TTL; giving the lease up, which removes the Mutex's keys (and ends its Session's other Mutexes)", "lock", m.prefix, "err", err)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	m.sess.revoke(ctx)
	select {
	case <-m.lost:
	case <-ctx.Done():
	}
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
		return nil, ErrNotHolder
	}
	resp, err := m.cli.Txn(ctx).If(m.guardOf(tok)).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return resp, ErrNotHolder
	}
	return resp, nil
}

// Put writes key = val if m still holds the lock (Txn with one put).
func (m *Mutex) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) error {
	_, err := m.Txn(ctx, clientv3.OpPut(key, val, opts...))
	return err
}
