package etcdlock

// Semaphore acquisition: Acquire and TryAcquire (see Semaphore, "Records"),
// and the clean-up of a failed attempt (Mutex's fence).

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// semAttempt is one acquisition, under s's gate.
type semAttempt struct {
	s     *Semaphore
	n     int
	fence int64 // the fence key's version its queuing requires
	sent  bool  // the queuing was sent: abandon must fence
	myRev int64
}

// semView is the queue and the hold records, read at one revision.
type semView struct {
	queue, holds []*mvccKV
}

// Acquire takes n permits (1 ≤ n ≤ N), waiting in FIFO order until they
// are free or ctx is done. It returns:
//
//   - nil: s holds n permits (Token gives the fencing token);
//   - a *SemOwnerDeadError (errors.Is(err, lockword.ErrOwnerDead)): s
//     holds n permits, and holders died holding permits (now returned);
//   - an error wrapping ErrBadArgument for n outside 1..N, or a
//     semaphore whose first acquirer stored another N;
//   - a *lockword.CorruptError naming a key under the prefix that no valid
//     history writes (a queue key without a lease, a weight outside 1..N,
//     a stored N that is not a count of permits);
//   - ErrLeaseLost, ctx.Err(), or the client's error.
//
// On every error but ErrOwnerDead s holds nothing and what this call wrote
// is removed or fenced as Semaphore says; it returns within ctx's
// deadline. A second Acquire on a value that holds waits for its Release.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if err := s.checkWeight(n); err != nil {
		return err
	}
	if err := s.gate.LockContext(ctx); err != nil {
		return err
	}
	a := &semAttempt{s: s, n: n, fence: s.fenced}
	err := a.acquire(ctx, true)
	if err != nil && !errors.Is(err, lockword.ErrOwnerDead) {
		a.abandon(ctx)
	}
	return s.nameErr(err)
}

// TryAcquire takes n permits if the queue lets it at once (no request
// waiting before it, n permits free), without waiting: it reports (true,
// nil or a *SemOwnerDeadError) if s holds them, (false, nil) if not (or
// while s holds or cleans up), and (false, err) on the errors of Acquire.
// It queues and reads in one transaction and, if it must not wait,
// removes its key with a second.
func (s *Semaphore) TryAcquire(ctx context.Context, n int) (bool, error) {
	if ctx == nil {
		return false, lockword.ErrNilContext
	}
	if err := s.checkWeight(n); err != nil {
		return false, err
	}
	if !s.gate.TryLock() {
		return false, nil
	}
	a := &semAttempt{s: s, n: n, fence: s.fenced}
	err := a.acquire(ctx, false)
	switch {
	case err == nil || errors.Is(err, lockword.ErrOwnerDead):
		return true, err
	case errors.Is(err, errWouldWait):
		a.abandon(ctx)
		return false, nil
	}
	a.abandon(ctx)
	return false, s.nameErr(err)
}

var errWouldWait = errors.New("etcdlock: semaphore: would wait")

func (s *Semaphore) checkWeight(n int) error {
	if n < 1 || n > s.permits {
		return fmt.Errorf("%w: %d permits asked of etcd semaphore %q, which has %d (1..%d)", ErrBadArgument, n, s.prefix, s.permits, s.permits)
	}
	return nil
}

// acquire queues, waits (if wait) until the queue grants it, then writes
// its hold record, taking any dead holder's.
func (a *semAttempt) acquire(ctx context.Context, wait bool) error {
	s := a.s
	if isClosed(s.lost) {
		return ErrLeaseLost
	}
	v, err := a.enqueue(ctx)
	if err != nil {
		return err
	}
	var wch clientv3.WatchChan
	for {
		ok, err := a.granted(v)
		if err != nil {
			return err
		}
		if ok {
			done, err := a.claim(ctx, v)
			if done || err != nil {
				return err
			}
		} else if !wait {
			return errWouldWait
		} else if wch == nil {
			// Watch from now, then read: no deletion falls between.
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			wch = s.cli.Watch(clientv3.WithRequireLeader(wctx), s.prefix+queueDir, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
			if err := a.waitEvent(ctx, wch); err != nil {
				return err
			}
		} else if err := a.waitEvent(ctx, wch); err != nil {
			return err
		}
		if v, err = a.read(ctx); err != nil {
			return err
		}
	}
}

// waitEvent waits for the watch's next response (a deletion in the queue,
// or its creation), ctx or the lease's loss. A broken watch is not an
// error: the caller reads again (and, with ctx not done, waits again on
// a closed channel that returns at once: the loop then polls).
func (a *semAttempt) waitEvent(ctx context.Context, wch clientv3.WatchChan) error {
	select {
	case _, ok := <-wch:
		if !ok {
			// A closed watch (ctx done or the client closing): pause, so
			// that the read loop does not spin.
			select {
			case <-time.After(lockRetryMin):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return ctx.Err()
	case <-a.s.lost:
		return ErrLeaseLost
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueue creates the queue key, if the fence and the stored count allow,
// and reads the queue and hold records in the same transaction.
func (a *semAttempt) enqueue(ctx context.Context) (semView, error) {
	s := a.s
	for {
		a.sent = true
		resp, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.Version(s.fenceKey), "=", a.fence),
			clientv3.Compare(clientv3.Value(s.permitsKey), "=", strconv.Itoa(s.permits)),
		).Then(
			clientv3.OpPut(s.queueKey, s.entryJSON(a.n, 0), clientv3.WithLease(clientv3.LeaseID(s.me.Lease))),
			clientv3.OpGet(s.queueKey),
			clientv3.OpGet(s.prefix+queueDir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
			clientv3.OpGet(s.prefix+holdsDir, clientv3.WithPrefix()),
		).Else(clientv3.OpGet(s.permitsKey), clientv3.OpGet(s.fenceKey)).Commit()
		if err != nil {
			return semView{}, leaseErr(err)
		}
		if resp.Succeeded {
			mine := resp.Responses[1].GetResponseRange().Kvs
			if len(mine) == 0 {
				return semView{}, ErrLeaseLost
			}
			a.myRev = mine[0].CreateRevision
			return semView{resp.Responses[2].GetResponseRange().Kvs, resp.Responses[3].GetResponseRange().Kvs}, nil
		}
		perm := resp.Responses[0].GetResponseRange().Kvs
		switch {
		case len(perm) == 1 && string(perm[0].Value) != strconv.Itoa(s.permits):
			if _, err := parsePermits(perm[0].Key, perm[0].Value); err != nil {
				return semView{}, semCorrupt(s.prefix, err)
			}
			return semView{}, fmt.Errorf("%w: etcd semaphore %q has %q permits (%s), not %d", ErrBadArgument, s.prefix, perm[0].Value, s.permitsKey, s.permits)
		case len(perm) == 0:
			// The first acquirer stores N, if nobody did meanwhile.
			_, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(s.permitsKey), "=", 0)).
				Then(clientv3.OpPut(s.permitsKey, strconv.Itoa(s.permits))).Commit()
			if err != nil {
				return semView{}, err
			}
		default:
			switch gone, err := s.leaseGone(ctx); {
			case err != nil:
				return semView{}, err
			case gone:
				return semView{}, ErrLeaseLost // the fence key went with the lease
			}
			return semView{}, semCorrupt(s.prefix, fmt.Errorf("fence key %s changed by another writer", s.fenceKey))
		}
	}
}

// read reads the queue and hold records again.
func (a *semAttempt) read(ctx context.Context) (semView, error) {
	s := a.s
	r, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.prefix+queueDir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(s.prefix+holdsDir, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return semView{}, err
	}
	return semView{r.Responses[0].GetResponseRange().Kvs, r.Responses[1].GetResponseRange().Kvs}, nil
}

// granted reports whether the weights of our key and of every key before
// it add up to at most N. A key before ours that no Semaphore writes is
// ErrCorrupt; ours gone (or created again) is ErrLeaseLost.
func (a *semAttempt) granted(v semView) (bool, error) {
	s := a.s
	sum := 0
	for _, kv := range v.queue {
		key := string(kv.Key)
		if key == s.queueKey {
			if kv.CreateRevision != a.myRev {
				return false, ErrLeaseLost
			}
			return sum+a.n <= s.permits, nil
		}
		if err := checkQueueKey(s.prefix, key, kv.Lease); err != nil {
			return false, semCorrupt(s.prefix, err)
		}
		var e semEntry
		if err := json.Unmarshal(kv.Value, &e); err != nil || e.N < 1 || e.N > s.permits {
			return false, semCorrupt(s.prefix, fmt.Errorf("queue key %s: value %q is not a request of 1..%d permits", key, kv.Value, s.permits))
		}
		sum += e.N
	}
	return false, ErrLeaseLost
}

// claim writes our hold record, if our key still stands, and deletes the
// hold records of dead holders read in v, each if unchanged and its queue
// key still as v read it. done reports that acquire returns err; !done
// with a nil err means that something changed (read again).
func (a *semAttempt) claim(ctx context.Context, v semView) (done bool, err error) {
	s := a.s
	cmps := []clientv3.Cmp{s.guardOf(a.myRev)}
	ops := []clientv3.Op{clientv3.OpPut(s.holdKey, s.entryJSON(a.n, a.myRev))}
	dead, permits, err := a.deadHolds(v, &cmps, &ops)
	if err != nil {
		return true, err
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	if !resp.Succeeded {
		return false, nil
	}
	s.token.Store(a.myRev)
	s.held.Store(int64(a.n))
	if len(dead) > 0 {
		return true, &SemOwnerDeadError{Semaphore: s.prefix, Dead: dead, Permits: permits}
	}
	return true, nil
}

// deadHolds finds in v the hold records whose queue key is gone or was
// created again (their holder's lease ended while it held), and appends
// to cmps and ops the conditions and deletions that take them.
func (a *semAttempt) deadHolds(v semView, cmps *[]clientv3.Cmp, ops *[]clientv3.Op) (dead []Holder, permits int, err error) {
	s := a.s
	live := make(map[string]int64, len(v.queue))
	for _, kv := range v.queue {
		live[string(kv.Key)] = kv.CreateRevision
	}
	for _, kv := range v.holds {
		key := string(kv.Key)
		name := strings.TrimPrefix(key, s.prefix+holdsDir)
		var e semEntry
		if !semNameOK(name) || json.Unmarshal(kv.Value, &e) != nil || e.N < 1 || e.N > s.permits || e.Token <= 0 || kv.Lease != 0 {
			return nil, 0, semCorrupt(s.prefix, fmt.Errorf("hold record %s = %q is not one a Semaphore of %d permits writes", key, kv.Value, s.permits))
		}
		qkey := s.prefix + queueDir + name
		rev := live[qkey]
		if rev == e.Token || key == s.holdKey {
			continue
		}
		dead = append(dead, e.Holder)
		permits += e.N
		*cmps = append(*cmps,
			clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision),
			clientv3.Compare(clientv3.CreateRevision(qkey), "=", rev))
		*ops = append(*ops, clientv3.OpDelete(key))
	}
	return dead, permits, nil
}

// semNameOK reports whether name is <lease, 16 hex digits>-<nonce, 8 hex
// digits>, as queueKeyName writes.
func semNameOK(name string) bool {
	id, nonce, ok := strings.Cut(name, "-")
	if !ok || len(id) != 16 || len(nonce) != 8 {
		return false
	}
	_, err1 := hex.DecodeString(id)
	_, err2 := hex.DecodeString(nonce)
	return err1 == nil && err2 == nil
}

// abandon ends a failed attempt and lets s's next call in (see
// handle.abandon), fencing what it sent.
func (a *semAttempt) abandon(ctx context.Context) { a.s.handle.abandon(ctx, a.sent, a.fenceOnce) }

// fenceOnce increments the fence key, if still at the attempt's version,
// and deletes our queue key and hold record in the same transaction (see
// attempt.fenceOnce); with the lease gone, the deletions alone, and the
// fence version unchanged.
func (a *semAttempt) fenceOnce(ctx context.Context) error {
	s := a.s
	del := []clientv3.Op{clientv3.OpDelete(s.queueKey), clientv3.OpDelete(s.holdKey)}
	bumped, err := fenceTxn(ctx, s.cli, s.fenceKey, s.me.Lease, a.fence, del)
	if bumped {
		s.fenced = a.fence + 1
	}
	return err
}
