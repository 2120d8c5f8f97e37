package etcdlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults and bounds.
const (
	// DefaultTTL is the lease TTL of a Mutex whose Options give none: a
	// holder that dies is detected after at most about this long.
	DefaultTTL = 5 * time.Second
	// requestTimeout bounds the calls that take no context (Lock's
	// retries excepted): TryLock, Unlock, and the clean-up of an
	// acquisition that failed.
	requestTimeout = 5 * time.Second
	// lockRetryMin and lockRetryMax bound the pause between Lock's
	// attempts after a network error.
	lockRetryMin, lockRetryMax = 50 * time.Millisecond, 2 * time.Second
)

// States of the hold record (ownerRecord.State).
const (
	stateHeld           = "held"
	stateInconsistent   = "inconsistent"
	stateNotRecoverable = "not-recoverable"
)

var (
	// ErrNotHolder is returned by a guarded write (Txn, Put), by
	// UnlockContext and by MarkConsistent when this Mutex no longer holds
	// the lock, or never did: its lease expired while it held (a pause, a
	// partition), it was unlocked, or it was never locked. The write was
	// not made.
	ErrNotHolder = errors.New("etcdlock: not the lock's holder (never locked, unlocked, or the lease expired); nothing was written")
	// ErrLeaseLost is returned by LockContext and TryLockContext of a
	// Mutex whose lease has expired or was revoked (Lost is closed): it
	// can never lock again. Make a new Mutex.
	ErrLeaseLost = errors.New("etcdlock: the Mutex's lease is lost (expired or revoked); make a new Mutex")
)

// Holder identifies a Mutex's process to others: it is stored with every
// queued acquisition and in the hold record, for stuck reports, owner-dead
// errors and lockword inspect.
type Holder struct {
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	Lease int64  `json:"lease"` // the etcd lease ID
}

func (h Holder) String() string {
	return fmt.Sprintf("host %s, PID %d, lease %s", h.Host, h.PID, leaseText(h.Lease))
}

// ownerRecord is the hold record, stored without a lease at prefix+"/owner".
// Its JSON is part of the format other processes read (see Mutex).
type ownerRecord struct {
	State string `json:"state"`
	Key   string `json:"key,omitempty"` // the holder's queue key
	// Token is the holder key's create revision, or 0 in a record that
	// the fast path created in the same transaction as the key: then the
	// record's own create revision is the token.
	Token int64 `json:"token,omitempty"`
	Holder
	SinceUnixNs int64 `json:"since_unix_ns"` // holder's clock
}

// token is the fencing token of the hold a record describes; kv is the
// record's key-value.
func (r *ownerRecord) token(createRev int64) int64 {
	if r.Token != 0 {
		return r.Token
	}
	return createRev
}

// OwnerDeadError is the error LockContext returns, with the lock held,
// when the previous holder's lease expired while it held the lock (it
// died, was paused past its TTL, or was cut off). errors.Is(err,
// lockword.ErrOwnerDead) holds for it; errors.As gives the dead holder.
type OwnerDeadError struct {
	Lock string // the lock's prefix
	// Dead is the previous holder's identity, and HeldSince when its hold
	// began (its clock); both zero if unknown.
	Dead      Holder
	HeldSince time.Time
}

// Error names the lock and the dead holder.
func (e *OwnerDeadError) Error() string {
	return fmt.Sprintf("%v (etcd lock %q; previous holder %v)", lockword.ErrOwnerDead, e.Lock, e.Dead)
}

// Is reports whether target is lockword.ErrOwnerDead.
func (e *OwnerDeadError) Is(target error) bool { return target == lockword.ErrOwnerDead }

// Options configure a Mutex. The zero value (or nil) is the default.
type Options struct {
	// TTL of the Mutex's lease, rounded up to whole seconds: how long
	// after its process dies (or stops talking to etcd) its hold ends.
	// 0 means DefaultTTL. The server may grant more (its minimum lease
	// TTL, 2 s with etcd's default heartbeat); TTL reports what it gave.
	TTL time.Duration
	// Logger receives the stuck reports and failed unlocks; nil means
	// slog.Default().
	Logger *slog.Logger
}

// A Mutex is a mutual exclusion lock between processes on any machines
// that reach one etcd cluster, with the method set and the owner-death
// contract of lockword.SharedMutex: when a holder dies while holding it
// (its lease expires), the next acquirer gets the lock with
// lockword.ErrOwnerDead, repairs, calls MarkConsistent; unlocking without
// it makes the lock lockword.ErrNotRecoverable for every process, stored
// in etcd. A holder that unlocks normally never causes either. Every
// acquisition returns a fencing token (Token) that strictly increases
// from holder to holder, and Txn and Put write to etcd only while this
// acquisition still holds, so that a holder paused past its lease cannot
// overwrite its successor's work (Kleppmann, "How to do distributed
// locking", 2016).
//
// Get one with NewMutex. Each Mutex has its own etcd lease, kept alive in
// the background (etcd's KeepAlive); Lost is closed when the lease is lost.
// The lock is named by a key prefix P; every Mutex on the same P, in any
// process, contends for the same lock.
//
// # Records
//
//	key                      lease       value
//	P/queue/<lease>-<nonce>  the Mutex's Holder JSON: one key per Mutex queued or holding
//	P/owner                  none        the hold record: {state, key, token, host, pid, lease, since_unix_ns}
//
// Queue keys are served in the order of their create revision, which etcd
// assigns in commit order: the lowest is next. The holder's token is its
// queue key's create revision; a later holder's key was created after
// every key that was queued when the earlier one was served, so tokens
// strictly increase. The hold record says what the last holder left:
//
//	P/owner                     its key with that token   state
//	absent                      —                         free, consistent
//	held, key K, token t        exists                    held by K
//	held, key K, token t        gone (lease expired)      owner dead: next acquirer gets ErrOwnerDead
//	inconsistent, K, t          exists                    held by K after an owner death, being repaired
//	inconsistent, K, t          gone                      K died repairing: next acquirer gets ErrOwnerDead
//	not-recoverable             —                         ErrNotRecoverable for every acquirer
//
// Who moves it, each move one etcd transaction conditioned on the mover's
// queue key still existing with its token (so a holder whose lease expired
// moves nothing):
//
//   - Lock, fast path (the queue is empty and there is no record): creates
//     the queue key and the record "held" together: one round trip, as
//     etcd's concurrency.Mutex.
//   - Lock, slow path (the fast path's transaction found the lock taken):
//     creates the queue key, waits (an etcd watch) until
//     no key with a lower create revision remains, then claims the record
//     if it has not changed since read: absent → held; held or
//     inconsistent naming a key that is gone → inconsistent, and
//     ErrOwnerDead; not-recoverable → the key is deleted and
//     ErrNotRecoverable returned.
//   - MarkConsistent: inconsistent (ours) → held (ours).
//   - Unlock: deletes the queue key and, in the same transaction, the
//     record (held) or makes it not-recoverable (inconsistent).
//   - etcd, when the lease expires: deletes the queue key only.
//
// # Crashes between steps
//
// A process may die between any two of these transactions; each
// transaction is atomic, so the next acquirer reads one of the states
// above. Dead after queuing, before claiming: its key expires with the
// lease and the record is as the holder before it left it (free, or an
// owner death still to be reported: it never held, so nothing of its own
// is reported). Dead after the fast path or a claim, or before Unlock's
// transaction: the record names a key that expires: ErrOwnerDead.
// Dead after Unlock: nothing is left. Dead before MarkConsistent: still
// inconsistent, so the next acquirer repairs again; dead after it: held by
// a dead key: ErrOwnerDead, as for any holder that dies. A transaction
// whose reply is lost (a network error) is treated the same way: Lock
// cleans up what it may have written before returning the error, and
// nothing is ever half written. TestMutexCrashPoints kills a process at
// each step.
//
// # Fencing
//
// A holder can be paused (a GC pause, SIGSTOP, a partition) for longer
// than its lease. Etcd then deletes its key, the next waiter takes the
// lock, and the paused process resumes believing it holds: no lock
// service can prevent that. Txn and Put make a write to etcd conditional
// on this acquisition's key still existing with its token, so the late
// write fails with ErrNotHolder. For a store outside etcd, send Token with
// each write and have the store reject a token lower than the highest it
// has seen (Kleppmann's fencing token): tokens of later holders are
// larger.
//
// # Owner death and sync.Locker
//
// As for lockword.SharedMutex: LockContext returns ErrOwnerDead with the
// lock held; Lock runs the repair function (SetRepair) or, without one or
// if it fails, unlocks without marking (making the lock not recoverable)
// and panics. Lock also panics on ErrNotRecoverable and ErrLeaseLost; on
// network errors it retries, logging each, since sync.Locker cannot
// return them: use LockContext where the network may fail.
//
// # Memory model
//
// Etcd is linearizable: the n'th successful Unlock's transaction commits
// before the m'th acquisition's for any n < m, and a reader of etcd after
// Lock returns sees every write committed before the previous Unlock.
// Within a process, Unlock synchronizes before the next Lock of the same
// Mutex (it serializes its own goroutines through a lockword.Mutex).
//
// Ownership is per Mutex value: any goroutine may Unlock it. Stuck reports
// (a log/slog warning naming the lock, the holder's host, PID and lease,
// and how long it has held) come from a waiter past SetStuckThreshold.
type Mutex struct {
	_        noCopy
	cli      *clientv3.Client
	prefix   string
	queueKey string
	ownerKey string
	me       Holder
	meJSON   string
	ttl      time.Duration // granted
	log      *slog.Logger

	stopKeepAlive context.CancelFunc
	lost          chan struct{} // closed when the lease is lost

	// gate serializes this Mutex's goroutines: one queue key per Mutex.
	gate lockword.Mutex

	// The current hold, written by the goroutine that locks (under gate).
	token        atomic.Int64 // 0: not held
	inconsistent bool
	heldRecord   string // the record value we wrote "held", for clean-up

	stuckNs atomic.Int64 // 0: lockword.DefaultStuckThreshold; <0: never
	repair  atomic.Pointer[func() error]
	stats   stats
}

// noCopy makes go vet report copies of a Mutex.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// The interfaces lockword's locks satisfy.
var (
	_ lockword.ContextLocker = (*Mutex)(nil)
	_ interface {
		Lock()
		TryLock() bool
		LockContext(context.Context) error
		Unlock()
		MarkConsistent() error
	} = (*Mutex)(nil)
)

// NewMutex returns a Mutex on the lock named by prefix (for example
// "/locks/orders": keys under prefix+"/" belong to the lock), with a new
// lease of opts.TTL kept alive until Close. It returns the client's error
// if the lease cannot be granted.
func NewMutex(ctx context.Context, cli *clientv3.Client, prefix string, opts *Options) (*Mutex, error) {
	if ctx == nil {
		return nil, lockword.ErrNilContext
	}
	if prefix == "" {
		return nil, errors.New("etcdlock: empty lock prefix")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.TTL < 0 {
		return nil, fmt.Errorf("etcdlock: negative TTL %v", o.TTL)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	secs := int64((o.TTL + time.Second - 1) / time.Second)
	g, err := cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: granting a lease: %w", err)
	}
	kctx, stop := context.WithCancel(context.Background())
	ka, err := cli.KeepAlive(kctx, g.ID)
	if err != nil {
		stop()
		return nil, fmt.Errorf("etcdlock: keeping the lease alive: %w", err)
	}
	host, _ := os.Hostname()
	var nonce [4]byte
	rand.Read(nonce[:])
	m := &Mutex{
		cli:           cli,
		prefix:        prefix,
		queueKey:      fmt.Sprintf("%s/queue/%016x-%s", prefix, int64(g.ID), hex.EncodeToString(nonce[:])),
		ownerKey:      prefix + "/owner",
		me:            Holder{Host: host, PID: os.Getpid(), Lease: int64(g.ID)},
		ttl:           time.Duration(g.TTL) * time.Second,
		log:           o.Logger,
		stopKeepAlive: stop,
		lost:          make(chan struct{}),
	}
	b, _ := json.Marshal(m.me)
	m.meJSON = string(b)
	m.gate.SetStuckThreshold(-1) // the Mutex reports, naming the holder
	go func() {
		// The channel closes when the lease is gone (expired, revoked)
		// or Close stopped it.
		for range ka {
		}
		close(m.lost)
	}()
	return m, nil
}

// Close stops keeping the lease alive and revokes it. A lock held through
// m is then released as if its process had died: the next acquirer gets
// ErrOwnerDead. It returns the client's error if the revocation failed
// (the lease then expires after its TTL).
func (m *Mutex) Close() error {
	m.stopKeepAlive()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_, err := m.cli.Revoke(ctx, clientv3.LeaseID(m.me.Lease))
	return err
}

// Lost returns a channel that is closed when m's lease is lost: it expired
// (the process was paused or cut off from etcd longer than the TTL), was
// revoked, or Close was called. A holder should stop its work when it
// fires: its guarded writes fail from then on.
func (m *Mutex) Lost() <-chan struct{} { return m.lost }

// TTL returns the lease TTL the server granted.
func (m *Mutex) TTL() time.Duration { return m.ttl }

// Name returns the lock's prefix.
func (m *Mutex) Name() string { return m.prefix }

// Identity returns what other processes see of m's holder.
func (m *Mutex) Identity() Holder { return m.me }

func (m *Mutex) leaseLost() bool {
	select {
	case <-m.lost:
		return true
	default:
		return false
	}
}

// Lock locks m, waiting until it is available. See the type's "Owner death
// and sync.Locker" for what it does on an owner death and on errors.
func (m *Mutex) Lock() {
	pause := lockRetryMin
	for {
		err := m.LockContext(context.Background())
		switch {
		case err == nil:
			return
		case errors.Is(err, lockword.ErrOwnerDead):
			m.repairOrPanic(err)
			return
		case errors.Is(err, lockword.ErrNotRecoverable), errors.Is(err, ErrLeaseLost):
			panic(err)
		}
		m.log.Warn("etcdlock: Lock failed, retrying", "lock", m.prefix, "err", err, "retry_in", pause)
		time.Sleep(pause)
		pause = min(2*pause, lockRetryMax)
	}
}

// repairOrPanic runs the repair function after Lock took m from a dead
// holder; see SharedMutex.Lock for why it unlocks before panicking.
func (m *Mutex) repairOrPanic(dead error) {
	fn := m.repair.Load()
	if fn == nil {
		m.Unlock()
		panic(fmt.Errorf("%w; no repair function was set (SetRepair), so Lock unlocked it unrepaired: %w", dead, lockword.ErrNotRecoverable))
	}
	ok := false
	defer func() {
		if !ok {
			m.Unlock()
		}
	}()
	if err := (*fn)(); err != nil {
		panic(fmt.Errorf("%w; the repair function failed (%w), so Lock unlocked it unrepaired: %w", dead, err, lockword.ErrNotRecoverable))
	}
	if err := m.MarkConsistent(); err != nil {
		panic(err)
	}
	ok = true
}

// SetRepair sets the function that Lock runs, holding the lock, when it
// takes the lock from a dead holder; nil removes it. See
// lockword.SharedMutex.SetRepair.
func (m *Mutex) SetRepair(fn func() error) {
	if fn == nil {
		m.repair.Store(nil)
		return
	}
	m.repair.Store(&fn)
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
// (false, nil) for a held lock, and (false, err) when etcd could not be
// asked or m's lease is lost.
func (m *Mutex) TryLockContext(ctx context.Context) (bool, error) {
	if ctx == nil {
		return false, lockword.ErrNilContext
	}
	if !m.gate.TryLock() {
		return false, nil
	}
	if m.leaseLost() {
		m.gate.Unlock()
		return false, ErrLeaseLost
	}
	rec := m.recordJSON(stateHeld, 0)
	resp, err := m.cli.Txn(ctx).If(m.freeCmps()...).Then(m.putKey(), clientv3.OpPut(m.ownerKey, rec)).Commit()
	if err != nil {
		m.heldRecord = rec
		m.cleanUp(0)
		m.gate.Unlock()
		return false, err
	}
	if !resp.Succeeded {
		m.gate.Unlock()
		return false, nil
	}
	m.acquired(resp.Header.Revision, rec, false)
	m.stats.acquired(false, 0, 0)
	return true, nil
}

// freeCmps hold when the lock is free and consistent: nobody queued, no
// hold record.
func (m *Mutex) freeCmps() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(m.prefix+"/queue/"), "=", 0).WithPrefix(),
		clientv3.Compare(clientv3.Version(m.ownerKey), "=", 0),
	}
}

func (m *Mutex) putKey() clientv3.Op {
	return clientv3.OpPut(m.queueKey, m.meJSON, clientv3.WithLease(clientv3.LeaseID(m.me.Lease)))
}

func (m *Mutex) recordJSON(state string, token int64) string {
	b, _ := json.Marshal(ownerRecord{State: state, Key: m.queueKey, Token: token, Holder: m.me, SinceUnixNs: time.Now().UnixNano()})
	return string(b)
}

// acquired records the hold of token.
func (m *Mutex) acquired(token int64, heldRecord string, inconsistent bool) {
	m.token.Store(token)
	m.heldRecord, m.inconsistent = heldRecord, inconsistent
}

// LockContext locks m, waiting until it is available or ctx is done. It
// returns:
//
//   - nil: the caller holds the lock (Token gives the fencing token);
//   - an *OwnerDeadError (errors.Is(err, lockword.ErrOwnerDead)): the
//     caller holds the lock, whose previous holder's lease expired while
//     it held; repair the data, call MarkConsistent, Unlock;
//   - an error wrapping lockword.ErrNotRecoverable: the caller does not
//     hold it;
//   - ErrLeaseLost, ctx.Err(), or the client's error (etcd unreachable):
//     the caller does not hold it, and what this call wrote is removed.
func (m *Mutex) LockContext(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if err := m.gate.LockContext(ctx); err != nil {
		return err
	}
	err := m.lock(ctx)
	if err != nil && !errors.Is(err, lockword.ErrOwnerDead) {
		m.gate.Unlock()
	}
	return err
}

// lock is LockContext under the gate.
func (m *Mutex) lock(ctx context.Context) error {
	if m.leaseLost() {
		return ErrLeaseLost
	}
	start := time.Now()
	rec := m.recordJSON(stateHeld, 0)
	queue := m.prefix + "/queue/"
	// Fast path: take a free lock outright, one transaction that only
	// writes (an Else branch that queues and reads would make this, the
	// common case, a fifth slower: measured).
	resp, err := m.cli.Txn(ctx).If(m.freeCmps()...).Then(m.putKey(), clientv3.OpPut(m.ownerKey, rec)).Commit()
	if err != nil {
		m.heldRecord = rec // it may have committed
		m.cleanUp(0)
		return err
	}
	if resp.Succeeded {
		m.acquired(resp.Header.Revision, rec, false)
		m.stats.acquired(false, 0, 0)
		hook("lock-held")
		return nil
	}
	// Slow path: queue (unless queued already: a retry after a lost
	// reply) and read where we stand.
	resp, err = m.cli.Txn(ctx).Then(
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(m.queueKey), "=", 0)}, []clientv3.Op{m.putKey()}, nil),
		clientv3.OpGet(m.queueKey),
		clientv3.OpGet(queue, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...),
		clientv3.OpGet(m.ownerKey),
	).Commit()
	if err != nil {
		m.cleanUp(0)
		return err
	}
	mine := resp.Responses[1].GetResponseRange().Kvs
	if len(mine) == 0 {
		return ErrLeaseLost // the key was put with a lease that no longer exists
	}
	myRev := mine[0].CreateRevision
	hook("lock-queued")
	first := resp.Responses[2].GetResponseRange().Kvs
	owner := resp.Responses[3].GetResponseRange().Kvs
	parks := uint64(0)
	for {
		if len(first) == 1 && string(first[0].Key) == m.queueKey {
			done, err := m.claim(ctx, myRev, owner)
			if done {
				if err == nil || errors.Is(err, lockword.ErrOwnerDead) {
					m.stats.acquired(true, parks, time.Since(start))
					hook("lock-held")
				}
				return err
			}
			if err != nil {
				m.cleanUp(myRev)
				return err
			}
		} else {
			parks++
			if err := m.waitTurn(ctx, myRev, start); err != nil {
				m.cleanUp(myRev)
				return err
			}
		}
		// Read again: our key, the key before ours (none: our turn), the
		// record.
		r, err := m.cli.Txn(ctx).Then(
			clientv3.OpGet(m.queueKey),
			clientv3.OpGet(queue, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...),
			clientv3.OpGet(m.ownerKey),
		).Commit()
		if err != nil {
			m.cleanUp(myRev)
			return err
		}
		if k := r.Responses[0].GetResponseRange().Kvs; len(k) == 0 || k[0].CreateRevision != myRev {
			return ErrLeaseLost
		}
		first = r.Responses[1].GetResponseRange().Kvs
		owner = r.Responses[2].GetResponseRange().Kvs
	}
}

// claim takes the hold record when our key is first in the queue. done
// reports that LockContext returns err; !done with a nil err means the
// record changed under us (read again).
func (m *Mutex) claim(ctx context.Context, myRev int64, owner []*mvccKV) (done bool, err error) {
	var old ownerRecord
	var oldMod, oldCreate int64
	if len(owner) == 1 {
		oldMod, oldCreate = owner[0].ModRevision, owner[0].CreateRevision
		if err := json.Unmarshal(owner[0].Value, &old); err != nil {
			return true, fmt.Errorf("etcdlock: corrupt hold record %s: %v", m.ownerKey, err)
		}
	}
	mineNow := clientv3.Compare(clientv3.CreateRevision(m.queueKey), "=", myRev)
	switch {
	case len(owner) == 1 && old.State == stateNotRecoverable:
		m.cleanUp(myRev)
		return true, fmt.Errorf("%w (etcd lock %q)", lockword.ErrNotRecoverable, m.prefix)
	case len(owner) == 1 && old.Key == m.queueKey && old.token(oldCreate) == myRev:
		// Ours already: an earlier attempt's reply was lost.
		m.acquired(myRev, "", old.State == stateInconsistent)
		if old.State == stateInconsistent {
			return true, &OwnerDeadError{Lock: m.prefix}
		}
		return true, nil
	}
	state := stateHeld
	if len(owner) == 1 && !testIgnoreDeadOwner.Load() {
		// A record naming another key while ours is first: that key is
		// gone (it was served before ours), and Unlock would have removed
		// the record with it. Its holder's lease expired holding.
		state = stateInconsistent
	}
	rec := m.recordJSON(state, myRev)
	resp, err := m.cli.Txn(ctx).
		If(mineNow, clientv3.Compare(clientv3.ModRevision(m.ownerKey), "=", oldMod)).
		Then(clientv3.OpPut(m.ownerKey, rec)).
		Commit()
	if err != nil {
		if state == stateHeld {
			m.heldRecord = rec
		}
		return false, err
	}
	if !resp.Succeeded {
		return false, nil
	}
	if state == stateHeld {
		m.acquired(myRev, rec, false)
		return true, nil
	}
	m.acquired(myRev, "", true)
	return true, &OwnerDeadError{Lock: m.prefix, Dead: old.Holder, HeldSince: time.Unix(0, old.SinceUnixNs)}
}

// waitTurn waits until the key queued just before ours is deleted (by its
// Unlock, its abandoned wait, or its lease's expiry), ctx is done or our
// lease is lost. It reports a waiter past the stuck threshold once.
func (m *Mutex) waitTurn(ctx context.Context, myRev int64, start time.Time) error {
	queue := m.prefix + "/queue/"
	r, err := m.cli.Get(ctx, queue, append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(myRev-1))...)
	if err != nil {
		return err
	}
	if len(r.Kvs) == 0 {
		return nil // our turn
	}
	pred, predRev := string(r.Kvs[0].Key), r.Kvs[0].CreateRevision
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
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil // read again
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
		t := time.NewTimer(max(d-time.Since(start), 0))
		defer t.Stop()
		stuck = t.C
	}
	for {
		select {
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || wr.Canceled {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return nil // read again (a compaction, a lost leader)
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
			m.reportStuck(ctx, start)
		}
	}
}

// cleanUp removes what a failed acquisition may have written: our queue
// key (of create revision rev, or any if rev is 0, when a fast path's
// reply was lost) and, if it still holds exactly the "held" record we
// tried to write, the record, so the lock is as we found it. An
// inconsistent record we wrote stays: the next acquirer repairs.
func (m *Mutex) cleanUp(rev int64) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cmp := clientv3.Compare(clientv3.CreateRevision(m.queueKey), "=", rev)
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(m.queueKey), ">", 0)
	}
	then := []clientv3.Op{clientv3.OpDelete(m.queueKey)}
	if m.heldRecord != "" {
		then = append(then, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(m.ownerKey), "=", m.heldRecord)},
			[]clientv3.Op{clientv3.OpDelete(m.ownerKey)}, nil))
	}
	m.heldRecord = ""
	if _, err := m.cli.Txn(ctx).If(cmp).Then(then...).Commit(); err != nil {
		// The lease's expiry removes the key; a record left naming it is
		// then read as an owner death: safe.
		m.log.Warn("etcdlock: could not clean up after a failed Lock; the lease's expiry will", "lock", m.prefix, "err", err)
	}
}

// Unlock unlocks m; if m was taken with ErrOwnerDead and MarkConsistent
// was not called, the lock becomes not recoverable. It panics if m is not
// locked ("etcdlock: Unlock of unlocked Mutex"). Network errors cannot be
// returned here: Unlock logs them and tries again, three times in all
// with a 5 s timeout each; if etcd still cannot be told, it closes m
// (revoking its lease, or letting it expire), which ends the hold as a
// death would: the next acquirer gets ErrOwnerDead, and m's lease is lost.
// Use UnlockContext to see and handle the errors.
func (m *Mutex) Unlock() {
	if m.token.Load() == 0 {
		panic(fmt.Sprintf("etcdlock: Unlock of unlocked Mutex %q", m.prefix))
	}
	var err error
	for attempt := range unlockAttempts {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		err = m.UnlockContext(ctx)
		cancel()
		if err == nil || errors.Is(err, ErrNotHolder) {
			return
		}
		m.log.Warn("etcdlock: Unlock failed", "lock", m.prefix, "attempt", attempt+1, "err", err)
		time.Sleep(lockRetryMin << attempt)
	}
	m.Close()
	m.released()
}

// unlockAttempts is how often Unlock tries before it gives the hold up.
const unlockAttempts = 3

// UnlockContext unlocks m in one etcd transaction and returns its error.
// On nil m is unlocked; ErrNotHolder says that the hold had already ended
// (the lease expired while it held: a successor may hold it now), and m
// is unlocked too. On the client's error (etcd unreachable, ctx done) m
// still holds: call UnlockContext again, or Close. It returns
// ErrNotHolder if m is not locked.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	tok := m.token.Load()
	if tok == 0 {
		return ErrNotHolder
	}
	last := clientv3.OpDelete(m.ownerKey)
	if m.inconsistent {
		b, _ := json.Marshal(ownerRecord{State: stateNotRecoverable, Holder: m.me, SinceUnixNs: time.Now().UnixNano()})
		last = clientv3.OpPut(m.ownerKey, string(b))
	}
	hook("unlock-before")
	resp, err := m.cli.Txn(ctx).If(m.Guard()).Then(clientv3.OpDelete(m.queueKey), last).Commit()
	if err != nil {
		return err // still held; the transaction may or may not have committed: a retry tells
	}
	m.released()
	if !resp.Succeeded {
		return ErrNotHolder
	}
	hook("unlock-after")
	return nil
}

// released forgets the hold locally and lets m's next Lock in.
func (m *Mutex) released() {
	m.token.Store(0)
	m.heldRecord, m.inconsistent = "", false
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
		return ErrNotHolder
	}
	if !m.inconsistent {
		return nil
	}
	rec := m.recordJSON(stateHeld, tok)
	hook("mark-before")
	resp, err := m.cli.Txn(ctx).If(m.Guard()).Then(clientv3.OpPut(m.ownerKey, rec)).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrNotHolder
	}
	m.heldRecord, m.inconsistent = rec, false
	hook("mark-after")
	return nil
}

// Token returns the fencing token of the current hold, 0 when m does not
// hold the lock. Tokens strictly increase from one holder to the next.
func (m *Mutex) Token() int64 { return m.token.Load() }

// Guard returns the comparison that holds in an etcd transaction exactly
// while the current hold lasts (our queue key exists with the token as
// its create revision), for callers that build their own transactions.
// Without a hold it compares against token 0, which never holds.
func (m *Mutex) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(m.queueKey), "=", m.token.Load())
}

// Txn commits ops in one etcd transaction if m still holds the lock, and
// returns ErrNotHolder (writing nothing) if it does not: the guarded
// write. ops must not touch keys under the lock's prefix.
func (m *Mutex) Txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if m.token.Load() == 0 {
		return nil, ErrNotHolder
	}
	resp, err := m.cli.Txn(ctx).If(m.Guard()).Then(ops...).Commit()
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

// testHook, set by tests only, is called at each step of Lock, Unlock and
// MarkConsistent (the crash points: "lock-queued", "lock-held",
// "unlock-before", "unlock-after", "mark-before", "mark-after"), so that a
// test can kill the process exactly there.
var testHook func(step string)

// testIgnoreDeadOwner, set by a test only, breaks the lock on purpose: a
// claim takes a dead holder's record as free, so owner death goes
// unreported; the crash-point checker must catch it.
var testIgnoreDeadOwner atomic.Bool

func hook(step string) {
	if testHook != nil {
		testHook(step)
	}
}
