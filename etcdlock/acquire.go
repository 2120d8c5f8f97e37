package etcdlock

// Acquisition: LockContext and TryLockContext, each one attempt (see
// Mutex, "Records" for the moves and "Calls that fail" for the fence).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockword/lockword"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An attempt is one acquisition by LockContext or TryLockContext, under
// m's gate: what it requires of the fence and what it may have written,
// so that abandon can remove it. Its steps, with the moves of the records
// table they make:
//
//	step      writes (each conditioned on)              on success
//	fastPath  queue key + "held" record (fence, free)   holds
//	enqueue   queue key (fence)                         queued: waitTurn, claim
//	waitTurn  nothing (watches the key before ours)     our turn: claimFree
//	claimFree "held" record (our key, first, no record) holds; else it reads: claim
//	claim     record held/inconsistent (our key, rec)   holds (ErrOwnerDead if inconsistent)
//	abandon   fence: version+1, delete key and "held"   nothing of the attempt is left
type attempt struct {
	m     *Mutex
	start time.Time
	fence int64     // the fence key's version its creating writes require
	sent  bool      // a creating write was sent: abandon must fence
	held  string    // the last "held" record it sent: the fence deletes it if it stands
	myRev int64     // its queue key's create revision, once queued
	pred  []*mvccKV // the key queued before ours, as enqueue read it (until waitTurn uses it)
	parks uint64
}

func (m *Mutex) newAttempt() *attempt {
	return &attempt{m: m, start: time.Now(), fence: m.fenced}
}

// LockContext locks m, waiting until it is available or ctx is done. It
// returns:
//
//   - nil: the caller holds the lock (Token gives the fencing token);
//   - an *OwnerDeadError (errors.Is(err, lockword.ErrOwnerDead)): the
//     caller holds the lock, whose previous holder's lease expired while
//     it held; repair the data, call MarkConsistent, Unlock;
//   - an error wrapping lockword.ErrNotRecoverable, or a
//     *lockword.CorruptError (errors.Is(err, lockword.ErrCorrupt)) naming
//     the record no valid history writes: the caller does not hold it;
//   - ErrLeaseLost, ctx.Err(), or the client's error (etcd unreachable):
//     the caller does not hold it.
//
// On every error but ErrOwnerDead what this call wrote is removed, or
// made unable to land, as the type's "Calls that fail" says; it returns
// within ctx's deadline.
func (m *Mutex) LockContext(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if err := m.gate.LockContext(ctx); err != nil {
		return err
	}
	a := m.newAttempt()
	err := a.lock(ctx)
	if err != nil && !errors.Is(err, lockword.ErrOwnerDead) {
		a.abandon(ctx)
	}
	return m.nameErr(err)
}

// lock is LockContext's attempt, under the gate.
func (a *attempt) lock(ctx context.Context) error {
	m := a.m
	if m.leaseLost() {
		return ErrLeaseLost
	}
	if !m.contended {
		if ok, err := a.fastPath(ctx); ok || err != nil {
			return err
		}
		m.contended = true
	}
	first, owner, err := a.enqueue(ctx)
	if err != nil {
		return err
	}
	hook("lock-queued")
	for {
		if len(first) == 1 && string(first[0].Key) == m.queueKey {
			var done bool
			done, err = a.claim(ctx, owner)
			if done && (err == nil || errors.Is(err, lockword.ErrOwnerDead)) {
				m.stats.acquired(true, a.parks, time.Since(a.start))
				hook("lock-held")
			}
			if done || err != nil {
				return err
			}
			first, owner, err = a.reread(ctx)
		} else {
			a.parks++
			if err := a.waitTurn(ctx); err != nil {
				return err
			}
			var held bool
			if held, first, owner, err = a.claimFree(ctx); held {
				m.stats.acquired(true, a.parks, time.Since(a.start))
				hook("lock-held")
			}
			if held || err != nil {
				return err
			}
		}
		if err != nil {
			return err
		}
	}
}

// claimFree claims the lock in the common case after a wait, in the
// round trip that would otherwise only read: if our key is first (every
// queue key was created at or after ours) and there is no hold record
// (the holder before us unlocked), it writes the record "held". Else it
// reads what claim and the loop need, as reread does.
func (a *attempt) claimFree(ctx context.Context) (held bool, first, owner []*mvccKV, err error) {
	m := a.m
	rec := m.recordJSON(stateHeld, a.myRev)
	a.held = rec
	r, err := m.cli.Txn(ctx).If(
		m.guardOf(a.myRev),
		clientv3.Compare(clientv3.CreateRevision(m.prefix+queueDir), ">", a.myRev-1).WithPrefix(),
		clientv3.Compare(clientv3.Version(m.ownerKey), "=", 0),
	).Then(clientv3.OpPut(m.ownerKey, rec)).Else(
		clientv3.OpGet(m.queueKey),
		clientv3.OpGet(m.prefix+queueDir, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...),
		clientv3.OpGet(m.ownerKey),
	).Commit()
	if err != nil {
		return false, nil, nil, err
	}
	if r.Succeeded {
		m.acquired(a.myRev, false)
		return true, nil, nil, nil
	}
	if k := r.Responses[0].GetResponseRange().Kvs; len(k) == 0 || k[0].CreateRevision != a.myRev {
		return false, nil, nil, ErrLeaseLost
	}
	return false, r.Responses[1].GetResponseRange().Kvs, r.Responses[2].GetResponseRange().Kvs, nil
}

// fastPath takes a free lock outright: one transaction that only writes
// (an Else branch that queues and reads would make this, the common
// case, a fifth slower: measured). ok reports that m holds.
func (a *attempt) fastPath(ctx context.Context) (ok bool, err error) {
	m := a.m
	rec := m.recordJSON(stateHeld, 0)
	a.sent, a.held = true, rec
	resp, err := m.cli.Txn(ctx).If(append(m.freeCmps(), a.fenceCmp())...).
		Then(m.putKey(""), clientv3.OpPut(m.ownerKey, rec)).Commit()
	if err != nil {
		return false, leaseErr(err)
	}
	if !resp.Succeeded {
		return false, nil
	}
	m.acquired(resp.Header.Revision, false)
	m.stats.acquired(false, 0, 0)
	hook("lock-held")
	return true, nil
}

// enqueue creates our queue key and reads where we stand and the hold
// record: first is our key if it is first, else the key queued just
// before ours (waitTurn's first wait). It also tells m whether the lock
// was contended (see Mutex.contended).
func (a *attempt) enqueue(ctx context.Context) (first, owner []*mvccKV, err error) {
	m := a.m
	a.sent = true
	// The last key before ours is read before ours is put, in the same
	// transaction: it is the key waitTurn's first wait watches, and if
	// there is none ours is first. One scan of the queue, where reading
	// the first key as well would take a second (etcd sorts a range by
	// create revision only after reading all of it).
	resp, err := m.cli.Txn(ctx).If(a.fenceCmp()).Then(
		clientv3.OpGet(m.prefix+queueDir, append(clientv3.WithLastCreate(), clientv3.WithPrefix())...),
		m.putKey(m.meJSON),
		clientv3.OpGet(m.queueKey),
		clientv3.OpGet(m.ownerKey),
	).Commit()
	if err != nil {
		return nil, nil, leaseErr(err)
	}
	if !resp.Succeeded {
		switch gone, err := m.leaseGone(ctx); {
		case err != nil:
			return nil, nil, err
		case gone:
			return nil, nil, ErrLeaseLost // the fence key went with the lease
		}
		return nil, nil, corrupt(m.prefix, fmt.Errorf("fence key %s changed by another writer", m.fenceKey))
	}
	mine := resp.Responses[2].GetResponseRange().Kvs
	if len(mine) == 0 {
		return nil, nil, ErrLeaseLost // the key was put with a lease that expired since
	}
	a.myRev = mine[0].CreateRevision
	owner = resp.Responses[3].GetResponseRange().Kvs
	pred := resp.Responses[0].GetResponseRange().Kvs
	switch {
	case len(pred) == 0:
		m.contended = false
		return mine, owner, nil // first: nobody queued before us
	case string(pred[0].Key) == m.queueKey:
		// Our key was there before the put (no attempt leaves it, but
		// if one did its place says nothing of the keys before it):
		// read where we stand.
		return a.reread(ctx)
	}
	a.pred = pred
	return pred, owner, nil
}

// reread reads our key, the first key of the queue and the record again.
func (a *attempt) reread(ctx context.Context) (first, owner []*mvccKV, err error) {
	m := a.m
	r, err := m.cli.Txn(ctx).Then(
		clientv3.OpGet(m.queueKey),
		clientv3.OpGet(m.prefix+queueDir, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...),
		clientv3.OpGet(m.ownerKey),
	).Commit()
	if err != nil {
		return nil, nil, err
	}
	if k := r.Responses[0].GetResponseRange().Kvs; len(k) == 0 || k[0].CreateRevision != a.myRev {
		return nil, nil, ErrLeaseLost
	}
	return r.Responses[1].GetResponseRange().Kvs, r.Responses[2].GetResponseRange().Kvs, nil
}

// claim takes the hold record when our key is first in the queue. done
// reports that LockContext returns err; !done with a nil err means the
// record changed under us (read again).
func (a *attempt) claim(ctx context.Context, owner []*mvccKV) (done bool, err error) {
	m := a.m
	var old ownerRecord
	var oldMod int64
	if len(owner) == 1 {
		oldMod = owner[0].ModRevision
		if old, err = parseRecord(owner[0].Value); err != nil {
			return true, corrupt(m.prefix, fmt.Errorf("hold record %s: %v", m.ownerKey, err))
		}
		if old.State == stateNotRecoverable {
			return true, fmt.Errorf("%w (etcd lock %q)", lockword.ErrNotRecoverable, m.prefix)
		}
	}
	state := stateHeld
	if len(owner) == 1 && !testIgnoreDeadOwner.Load() {
		// A record naming another key while ours is first: that key is
		// gone (it was served before ours), and Unlock would have removed
		// the record with it. Its holder's lease expired holding.
		state = stateInconsistent
	}
	rec := m.recordJSON(state, a.myRev)
	if state == stateHeld {
		a.held = rec
	}
	resp, err := m.cli.Txn(ctx).
		If(m.guardOf(a.myRev), clientv3.Compare(clientv3.ModRevision(m.ownerKey), "=", oldMod)).
		Then(clientv3.OpPut(m.ownerKey, rec)).
		Commit()
	if err != nil {
		return false, err
	}
	if !resp.Succeeded {
		return false, nil
	}
	m.acquired(a.myRev, state == stateInconsistent)
	if state == stateHeld {
		return true, nil
	}
	return true, &OwnerDeadError{Lock: m.prefix, Dead: old.Holder, HeldSince: time.Unix(0, old.SinceUnixNs)}
}

// waitTurn waits until the key queued just before ours is deleted (by its
// Unlock, its abandoned wait, or its lease's expiry), ctx is done or our
// lease is lost. It reports a waiter past the stuck threshold once, and a
// key before ours that no Mutex writes as ErrCorrupt.
func (a *attempt) waitTurn(ctx context.Context) error {
	m := a.m
	kvs := a.pred // read by enqueue, for the first wait
	a.pred = nil
	if kvs == nil {
		r, err := m.cli.Get(ctx, m.prefix+queueDir, append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(a.myRev-1))...)
		if err != nil {
			return err
		}
		kvs = r.Kvs
	}
	if len(kvs) == 0 {
		return nil // our turn
	}
	pred, predRev := string(kvs[0].Key), kvs[0].CreateRevision
	if err := checkQueueKey(m.prefix, pred, kvs[0].Lease); err != nil {
		return corrupt(m.prefix, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watch from now, not from the revision read: a watch that starts in
	// the past is caught up by the server's background loop (every 100 ms),
	// which would make every handover that slow. So: watch, wait until the
	// watch exists, then look whether pred is still there.
	wch := m.cli.Watch(clientv3.WithRequireLeader(wctx), pred, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	select {
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil || wr.Canceled || !wr.Created {
			return ctx.Err() // nil: read again
		}
	case <-m.lost:
		return ErrLeaseLost
	case <-ctx.Done():
		return ctx.Err()
	}
	if g, err := m.cli.Get(ctx, pred); err != nil {
		return err
	} else if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != predRev {
		return nil // gone already
	}
	var stuck <-chan time.Time
	if d := m.stuckThreshold(); d > 0 {
		t := time.NewTimer(max(d-time.Since(a.start), 0))
		defer t.Stop()
		stuck = t.C
	}
	for {
		select {
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || wr.Canceled {
				return ctx.Err() // nil: read again (a compaction, a lost leader)
			}
			if len(wr.Events) > 0 {
				return nil
			}
		case <-m.lost:
			return ErrLeaseLost
		case <-ctx.Done():
			return ctx.Err()
		case <-stuck:
			stuck = nil
			m.reportStuck(ctx, a.start)
		}
	}
}

// TryLock tries to lock m with one etcd transaction, without queuing, and
// reports whether it did: only a free, consistent lock is taken (one whose
// holder died is left to LockContext, which reports it). Network errors
// and the request timeout (5 s) report false.
func (m *Mutex) TryLock() bool {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	ok, _ := m.TryLockContext(ctx)
	return ok
}

// TryLockContext is TryLock with a context and the error: it returns
// (false, nil) for a held lock (or while m's own clean-up of a failed
// call still runs), and (false, err) when etcd could not be asked or m's
// lease is lost; then, as for LockContext, what it wrote is removed or
// fenced, and it returns within ctx's deadline.
func (m *Mutex) TryLockContext(ctx context.Context) (bool, error) {
	if ctx == nil {
		return false, lockword.ErrNilContext
	}
	if !m.gate.TryLock() {
		return false, nil
	}
	if m.leaseLost() {
		m.gate.Unlock()
		return false, m.nameErr(ErrLeaseLost)
	}
	a := m.newAttempt()
	ok, err := a.fastPath(ctx)
	if err != nil {
		a.abandon(ctx)
		return false, m.nameErr(err)
	}
	if !ok {
		m.gate.Unlock()
	}
	return ok, nil
}

// freeCmps hold when the lock is free and consistent: nobody queued, no
// hold record.
func (m *Mutex) freeCmps() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(m.prefix+queueDir), "=", 0).WithPrefix(),
		clientv3.Compare(clientv3.Version(m.ownerKey), "=", 0),
	}
}

// putKey creates our queue key with the value who: our identity when
// queuing (inspect names the waiters from it), empty on the fast path,
// whose record, written in the same transaction, names us: 60-odd bytes
// less in every uncontended Lock's transaction, log entry and stored
// revision.
func (m *Mutex) putKey(who string) clientv3.Op {
	return clientv3.OpPut(m.queueKey, who, clientv3.WithLease(clientv3.LeaseID(m.me.Lease)))
}

// recordJSON returns the hold record {state, our key, token (omitted if
// 0), our identity, now}: byte for byte what json.Marshal writes of the
// ownerRecord, built without reflection from the key and identity that
// NewMutex encoded once: every acquisition writes a record, and
// json.Marshal's reflection was a seventh of Lock's CPU in the calling
// goroutine, profiled at one client.
func (m *Mutex) recordJSON(state string, token int64) string {
	var b strings.Builder
	b.Grow(len(`{"state":"","key":,"token":,"since_unix_ns":}`) + len(state) + len(m.keyJSON) + len(m.meJSON) + 2*20)
	b.WriteString(`{"state":"`)
	b.WriteString(state) // a state constant: nothing to escape
	b.WriteString(`","key":`)
	b.WriteString(m.keyJSON)
	var num [20]byte
	if token != 0 {
		b.WriteString(`,"token":`)
		b.Write(strconv.AppendInt(num[:0], token, 10))
	}
	b.WriteByte(',')
	b.WriteString(m.meJSON[1 : len(m.meJSON)-1]) // Holder's fields, inlined as json inlines an embedded struct
	b.WriteString(`,"since_unix_ns":`)
	b.Write(strconv.AppendInt(num[:0], time.Now().UnixNano(), 10))
	b.WriteByte('}')
	return b.String()
}

// acquired records the hold of token.
func (m *Mutex) acquired(token int64, inconsistent bool) {
	m.token.Store(token)
	m.inconsistent = inconsistent
}

// leaseErr maps the server's "no such lease" (a write attached to our
// lease after it expired) to ErrLeaseLost.
func leaseErr(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%w (%v)", ErrLeaseLost, err)
	}
	return err
}
