package etcdlock

// Release and repair: Unlock, MarkConsistent, Reinitialize.

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockword/lockword/shm"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Unlock unlocks m; if m was taken with ErrOwnerDead and MarkConsistent
// was not called, the lock becomes not recoverable. It panics if m is not
// locked ("etcdlock: Unlock of unlocked Mutex"). Network errors cannot be
// returned here: if etcd has not confirmed the unlock within unlockWait
// (1 s), Unlock returns anyway, m no longer holds (its guarded writes
// fail), and the unlock goes on in the background, retried for one lease
// TTL; m's next Lock and Close wait for it. If etcd still cannot be told,
// m gives its lease up (revokes it, or lets it expire), which ends the
// hold as a death would: the next acquirer gets ErrOwnerDead, and m's
// lease is lost. Use UnlockContext to see and handle the errors.
func (m *Mutex) Unlock() {
	tok := m.token.Load()
	if tok == 0 {
		panic(fmt.Sprintf("etcdlock: Unlock of unlocked Mutex %q", m.prefix))
	}
	ctx, cancel := context.WithTimeout(context.Background(), unlockWait)
	err := m.UnlockContext(ctx)
	cancel()
	if err == nil || errors.Is(err, ErrNotHolder) {
		return
	}
	m.log.Warn("etcdlock: Unlock not confirmed; retrying in the background", append(m.logAttrs(), "err", err)...)
	m.token.Store(0) // the caller has unlocked: no guarded write from here on
	inconsistent := m.inconsistent
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		m.unlockInBackground(tok, inconsistent)
		m.released()
	}()
}

// unlockInBackground retries the unlock of the hold of token for one
// lease TTL; if etcd still cannot be told, it gives the lease up.
func (m *Mutex) unlockInBackground(token int64, inconsistent bool) {
	err := m.retry(func(ctx context.Context) error {
		_, err := m.unlockTxn(ctx, token, inconsistent)
		return err
	})
	if err != nil {
		m.giveUp("could not unlock", err)
	}
}

// UnlockContext unlocks m in one etcd transaction and returns its error.
// On nil m is unlocked; ErrNotHolder says that the hold had already ended
// (the lease expired while it held: a successor may hold it now), and m
// is unlocked too. On the client's error (etcd unreachable, ctx done) m
// still holds: call UnlockContext again (a transaction that committed
// although its reply was lost makes the retry return ErrNotHolder, with
// the lock released), Unlock, or Close. It returns ErrNotHolder if m is
// not locked.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	tok := m.token.Load()
	if tok == 0 {
		return m.nameErr(ErrNotHolder)
	}
	hook("unlock-before")
	ok, err := m.unlockTxn(ctx, tok, m.inconsistent)
	if err != nil {
		return err // still held; the transaction may or may not have committed: a retry tells
	}
	m.released()
	if !ok {
		return m.nameErr(ErrNotHolder)
	}
	hook("unlock-after")
	return nil
}

// unlockTxn deletes the hold of token: its queue key and the record (or
// makes the record not-recoverable), if the hold still lasts. ok reports
// that it did.
func (m *Mutex) unlockTxn(ctx context.Context, token int64, inconsistent bool) (ok bool, err error) {
	last := clientv3.OpDelete(m.ownerKey)
	if inconsistent {
		last = clientv3.OpPut(m.ownerKey, m.recordJSON(stateNotRecoverable, 0))
	}
	resp, err := m.cli.Txn(ctx).If(m.guardOf(token)).Then(clientv3.OpDelete(m.queueKey), last).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// released forgets the hold locally and lets m's next Lock in.
func (m *Mutex) released() {
	m.token.Store(0)
	m.inconsistent = false
	m.gate.Unlock()
}

// MarkConsistent declares that the data protected by m, taken with
// ErrOwnerDead, has been repaired. It returns ErrNotHolder if m does not
// hold the lock (or no longer: its lease expired), and the client's error
// if etcd could not be told; on a hold that is not inconsistent it does
// nothing. It uses a 5 s timeout; MarkConsistentContext takes a context.
func (m *Mutex) MarkConsistent() error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	return m.MarkConsistentContext(ctx)
}

// MarkConsistentContext is MarkConsistent with a context.
func (m *Mutex) MarkConsistentContext(ctx context.Context) error {
	tok := m.token.Load()
	if tok == 0 {
		return m.nameErr(ErrNotHolder)
	}
	if !m.inconsistent {
		return nil
	}
	rec := m.recordJSON(stateHeld, tok)
	hook("mark-before")
	resp, err := m.cli.Txn(ctx).If(m.guardOf(tok)).Then(clientv3.OpPut(m.ownerKey, rec)).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return m.nameErr(ErrNotHolder)
	}
	m.inconsistent = false
	hook("mark-after")
	return nil
}

// Reinitialize makes a not-recoverable lock usable again: free and
// consistent, for every process, as shm.Mutex.Reinitialize does. Call it
// once the data the lock protects has been restored by other means, since
// the lock itself can no longer vouch for it. It also removes what
// ErrCorrupt reports (a hold record, or queue keys, that no valid history
// writes).
//
// It acts only on a not-recoverable (or corrupt) lock, which no process
// holds and every acquirer leaves at once, so resetting it strands nobody:
// it returns nil and does nothing if the lock is free, and an error
// wrapping shm.ErrRegionBusy if it is held, by a live holder or a
// dead one (a dead holder's lock is recovered through LockContext and
// ErrOwnerDead), or changed while it looked. It uses a 5 s timeout;
// ReinitializeContext takes a context.
func (m *Mutex) Reinitialize() error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	return m.ReinitializeContext(ctx)
}

// ReinitializeContext is Reinitialize with a context.
func (m *Mutex) ReinitializeContext(ctx context.Context) error {
	r, err := m.cli.Txn(ctx).Then(
		clientv3.OpGet(m.ownerKey),
		clientv3.OpGet(m.prefix+queueDir, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return err
	}
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	remove := func(kv *mvccKV) {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
		ops = append(ops, clientv3.OpDelete(string(kv.Key)))
	}
	if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		rec, err := parseRecord(kvs[0].Value)
		if err == nil && rec.State != stateNotRecoverable {
			return fmt.Errorf("%w: etcd lock %q is held (%v); Reinitialize acts only on a not-recoverable lock", shm.ErrRegionBusy, m.prefix, rec.Holder)
		}
		remove(kvs[0])
	}
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		if checkQueueKey(m.prefix, string(kv.Key), kv.Lease) != nil {
			remove(kv)
		}
	}
	if len(ops) == 0 {
		return nil
	}
	resp, err := m.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: etcd lock %q changed while Reinitialize looked; try again", shm.ErrRegionBusy, m.prefix)
	}
	return nil
}
