package etcdlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Timeouts of the calls that take no context.
const (
	// requestTimeout bounds one request of TryLock, MarkConsistent and of
	// a background clean-up's tries.
	requestTimeout = 5 * time.Second
	// unlockWait is how long Unlock waits for etcd before it hands the
	// unlock to the background (see Unlock).
	unlockWait = time.Second
	// closeTimeout bounds Close: the wait for a background clean-up, then
	// the revocation of the lease.
	closeTimeout = time.Second
	// lockRetryMin and lockRetryMax bound the pause between Lock's
	// attempts after a network error, and between a background clean-up's
	// tries.
	lockRetryMin, lockRetryMax = 50 * time.Millisecond, 2 * time.Second
)

// Options configure a Mutex. The zero value (or nil) is the default.
type Options struct {
	// TTL of the Mutex's lease, rounded up to whole seconds: how long
	// after its process dies (or stops talking to etcd) its hold ends.
	// 0 means DefaultTTL; more than MaxTTL is refused. The server may
	// grant more (its minimum lease TTL, 2 s with etcd's default
	// heartbeat); TTL reports what it gave.
	TTL time.Duration
	// Logger receives the stuck reports, failed unlocks and clean-ups;
	// nil means slog.Default().
	Logger *slog.Logger
	// Session, if not nil, holds the Mutex's lease instead of a lease of
	// its own: see Session for what the Mutexes on one share. TTL must
	// then be 0 (the Session's applies).
	Session *Session
}

// A Mutex is a mutual exclusion lock between processes on any machines
// that reach one etcd cluster, with the method set and the owner-death
// contract of shm.Mutex: when a holder dies while holding it
// (its lease expires), the next acquirer gets the lock with
// lockword.ErrOwnerDead, repairs, calls MarkConsistent; unlocking without
// it makes the lock lockword.ErrNotRecoverable for every process, stored
// in etcd, until Reinitialize. A holder that unlocks normally never causes
// either, nor does a call that failed. Every acquisition returns a fencing
// token (Token) that strictly increases from holder to holder, and Txn and
// Put write to etcd only while this acquisition still holds, so that a
// holder paused past its lease cannot overwrite its successor's work
// (Kleppmann, "How to do distributed locking", 2016).
//
// Get one with NewMutex. Each Mutex has its own etcd lease, kept alive in
// the background (etcd's KeepAlive), or shares one with others on a
// Session; Lost is closed when the lease is lost.
// The lock is named by a key prefix P ("/p" and "/p/" name the same lock;
// a name with a path element "queue" or "fence" is refused, since its
// records would lie among another lock's); every Mutex on the same P, in
// any process, contends for the same lock.
//
// # Records
//
//	key                      lease       value
//	P/queue/<lease>-<nonce>  the Mutex's Holder JSON (empty if the fast path made it): one key per Mutex queued or holding
//	P/owner                  none        the hold record: {state, key, token, host, pid, lease, since_unix_ns}
//	P/fence/<lease>-<nonce>  the Mutex's empty; its version counts the Mutex's failed attempts
//
// Queue keys are served in the order of their create revision, which etcd
// assigns in commit order: the lowest is next. The holder's token is its
// queue key's create revision; a later holder's key was created after
// every key that was queued when the earlier one was served, so tokens
// strictly increase. A queue key not named after the lease it is attached
// to, or attached to none (written by hand, say), is reported to the
// acquirer that would wait for it as lockword.ErrCorrupt naming the key,
// and so is a hold record no valid history writes. The hold record says
// what the last holder left:
//
//	P/owner                     its key with that token   state
//	absent                      —                         free, consistent
//	held, key K, token t        exists                    held by K
//	held, key K, token t        gone (lease expired)      owner dead: next acquirer gets ErrOwnerDead
//	inconsistent, K, t          exists                    held by K after an owner death, being repaired
//	inconsistent, K, t          gone                      K died repairing: next acquirer gets ErrOwnerDead
//	not-recoverable             —                         ErrNotRecoverable for every acquirer
//
// Who moves it, each move one etcd transaction:
//
//   - Lock, fast path (the queue is empty and there is no record): creates
//     the queue key and the record "held" together: one round trip, as
//     etcd's concurrency.Mutex.
//   - Lock, slow path (the fast path's transaction found the lock taken,
//     or this Mutex's previous acquisition did: under contention the fast
//     path would only fail, so it is skipped until an acquisition finds
//     the queue empty): creates the queue key, waits (an etcd watch) until
//     no key with a lower create revision remains, then claims the record
//     if it has not changed since read: absent → held; held or
//     inconsistent naming a key that is gone → inconsistent, and
//     ErrOwnerDead; not-recoverable → the key is deleted and
//     ErrNotRecoverable returned.
//   - MarkConsistent: inconsistent (ours) → held (ours).
//   - Unlock: deletes the queue key and, in the same transaction, the
//     record (held) or makes it not-recoverable (inconsistent).
//   - A failed acquisition's clean-up (the fence): increments the fence
//     key and deletes the queue key and a "held" record naming it.
//   - Reinitialize: not-recoverable or corrupt → absent.
//   - etcd, when the lease expires: deletes the queue key and fence key.
//
// The transactions that create the queue key (the fast path and the
// queuing) hold only if the fence key's version is still the one the
// attempt began with; those that claim, mark or unlock hold only if the
// mover's queue key still exists with its token, so a holder whose lease
// expired moves nothing.
//
// # Round trips
//
// Uncontended: one transaction to lock (the fast path), one to unlock,
// as concurrency.Mutex. Contended: the queuing transaction (it reads the
// key queued before ours, the only scan of the queue before the wait, and
// the hold record); the watch on that key, created from the present, and
// a read that the key is still there (a watch that starts in the past
// waits for the server's catch-up loop, every 100 ms); on its deletion,
// the claim, one transaction that writes the record "held" if our key is
// first and the record absent, and reads otherwise; the unlock: four
// requests and a watch, one request more for the first contended
// acquisition after an uncontended one (its failed fast path). The
// fences cost no round trip: the fence key's version is one comparison
// more in the creating transactions, and the guard one in the claim and
// the unlock. What concurrency.Mutex does not have is the hold record,
// written with the queue key (fast path) or by the claim and removed by
// the unlock, in transactions that are sent anyway: no round trip and no
// revision more, but two key mutations more per acquisition (the record's
// put and delete: four against the peer's two) and the unlock's guard,
// where the peer's unlock is a plain Delete. Uncontended that is the whole
// difference: an uncontended Lock+Unlock takes about 6% longer than the
// peer's at the median, and without the record the two are at par. It is
// the price of reporting owner deaths, and no fewer mutations would do
// while the guard ends with the holder's lease: the guard and the token
// need a key on the holder's lease created per hold (and removed when it
// ends, or the queue never empties); the record needs a key without a
// lease, so that it outlives a holder that dies; and an unlock must remove
// or rewrite that record, since etcd shows the deletion of a leased key by
// a Delete and by its lease's expiry alike. Two mutations would do if the
// record alone marked an uncontended hold, naming for its liveness a key
// that lives as long as the Mutex (its fence key): the guard would then be
// the record's revision, which still holds for a holder whose lease expired
// until a successor claims the record, and RWMutex's readers, which find a
// writer by its queue key, would have to read the record as well.
//
// # Calls that fail
//
// A request can land after its caller gave up on it: a transaction sent
// on a slow link, or one whose reply was lost, commits later, and the
// etcd client cannot take it back. So every write of one acquisition
// attempt that creates something is conditioned on the fence key's
// version as it stood when the attempt began, and the clean-up of a
// failed attempt increments that version in the same transaction that
// deletes what the attempt wrote. Whichever commits first, nothing of the
// attempt survives: a clean-up that commits first makes the late write
// fail; a late write that commits first is deleted by it. Later writes of
// the attempt (the claim) are conditioned on its queue key, which the
// clean-up deletes. The clean-up is idempotent (it holds only at the
// version it increments), so a clean-up whose reply was lost is simply
// sent again. It costs no round trip on success: one comparison more in
// the transactions an acquisition sends anyway.
//
// The invariant: a LockContext or TryLockContext that returned an error
// other than ErrOwnerDead holds nothing, and nothing it wrote outlives
// its return by more than two lease TTLs and a request timeout (5 s); in
// the common case (etcd reachable) nothing outlives the clean-up's one
// round trip, done when the Mutex is idle again. The clean-up runs inside
// the caller's deadline when
// the context has time left, else in a background goroutine that keeps
// the Mutex busy (its next LockContext waits for it, honouring its
// context) and retries for one TTL; if etcd still cannot be told, it
// stops keeping the lease alive and revokes it, so the keys go with the
// lease at most one TTL later, and the Mutex is lost (ErrLeaseLost). A
// "held" record left naming the lost lease's key then reads as an owner
// death: the lock errs on the side of reporting one. Close waits for the
// clean-up (bounded by closeTimeout, 1 s; the lease's revocation or expiry
// does the rest). The same holds for a late write, a lost reply, a lost
// connection and a member stopped mid-transaction: each is one of "the
// write committed, or will, or never does", and the fence covers all
// three.
//
// Every call that takes a context returns within its deadline (plus the
// time to schedule the returning goroutine: well under 100 ms on a quiet
// host); Unlock returns within unlockWait (1 s), handing an unlock etcd
// did not confirm to the background (see Unlock), and Close within
// closeTimeout.
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
// a dead key: ErrOwnerDead, as for any holder that dies. Dead before its
// clean-up: as dead after queuing or holding. TestMutexCrashPoints kills a
// process at each step.
//
// # Fencing the holder's writes
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
// As for shm.Mutex: LockContext returns ErrOwnerDead with the
// lock held; Lock runs the repair function (SetRepair) or, without one or
// if it fails, unlocks without marking (making the lock not recoverable)
// and panics. Lock also panics on ErrNotRecoverable, ErrCorrupt and
// ErrLeaseLost; on network errors it retries, logging each, since
// sync.Locker cannot return them: use LockContext where the network may
// fail.
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
	fenceKey string
	me       Holder
	meJSON   string // me, encoded once (json)
	keyJSON  string // queueKey, encoded once (json)
	handle          // the lease, the gate, the background clean-ups

	// Under gate: the fence key's version the next attempt conditions its
	// writes on (the number of fences committed), and the current hold.
	fenced       int64
	token        atomic.Int64 // 0: not held
	inconsistent bool
	// contended: m's last attempt found the lock taken, so the next
	// one queues at once instead of first trying the fast path, which
	// would fail under contention: a round trip and a scan of the queue
	// saved per contended acquisition. An attempt that queues first
	// clears it.
	contended bool

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
		Reinitialize() error
	} = (*Mutex)(nil)
)

// NewMutex returns a Mutex on the lock named by prefix (for example
// "/locks/orders": keys under prefix+"/" belong to the lock; trailing
// slashes are dropped), with a new lease of opts.TTL kept alive until
// Close, or on opts.Session. It returns an error wrapping ErrBadArgument
// for a nil client, a TTL below 0 or above MaxTTL (or any TTL with a
// Session), or a bad name (see Mutex), ErrLeaseLost if the Session's
// lease is lost, and the client's error if the lease cannot be granted.
func NewMutex(ctx context.Context, cli *clientv3.Client, prefix string, opts *Options) (*Mutex, error) {
	return newMutexOf(ctx, cli, prefix, opts, "Mutex", "lock")
}

// newMutexOf is NewMutex for the type typeName built on the Mutex
// (RWMutex, Election): its errors name that type, and its logs and
// errors call the lock an etcd kind ("lock", "election").
func newMutexOf(ctx context.Context, cli *clientv3.Client, prefix string, opts *Options, typeName, kind string) (*Mutex, error) {
	if err := checkClient(ctx, cli); err != nil {
		return nil, err
	}
	prefix, err := lockName(prefix)
	if err != nil {
		return nil, err
	}
	o, sess, own, err := optionsLease(ctx, cli, opts)
	if err != nil {
		return nil, err
	}
	m := &Mutex{
		cli:      cli,
		prefix:   prefix,
		ownerKey: prefix + ownerKey,
	}
	m.queueKey, m.me = newQueueKey(prefix, int64(sess.id))
	m.fenceKey = prefix + fenceDir + m.queueKey[len(prefix+queueDir):]
	b, _ := json.Marshal(m.me)
	m.meJSON = string(b)
	b, _ = json.Marshal(m.queueKey)
	m.keyJSON = string(b)
	m.handle.init(sess, own, o.Logger, typeName, kind, prefix)
	return m, nil
}

func checkClient(ctx context.Context, cli *clientv3.Client) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if cli == nil {
		return fmt.Errorf("%w: nil etcd client", ErrBadArgument)
	}
	return nil
}

// Close waits for m's background clean-up, if any, and ends m, within
// closeTimeout (1 s). With a lease of its own, it stops keeping the lease
// alive and revokes it; on a Session, it deletes m's queue key (the
// Session lives on). A lock held through m is then released as if its
// process had died: the next acquirer gets ErrOwnerDead. Lost is closed.
// It returns the client's error if the revocation or deletion failed (the
// keys then go when the lease does), and on a Session an error if a call
// on m was still running at the deadline (what it wrote goes when it
// ends, or with the Session).
func (m *Mutex) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	m.closeWait(ctx)
	if m.ownSession {
		return m.sess.revoke(ctx)
	}
	return m.dropHold(ctx)
}

// dropHold ends m on a shared Session, within ctx. Once no call of m is
// running (its gate is free), nothing of m is left in etcd but, after a
// failed attempt, its fence key, which stays with the lease so that a
// late write it fenced still fails. If m holds (the gate is the hold's),
// it deletes the hold's queue key, as the lease's expiry would.
func (m *Mutex) dropHold(ctx context.Context) error {
	for {
		if m.gate.TryLock() {
			m.gate.Unlock()
			return nil
		}
		if tok := m.token.Load(); tok != 0 {
			_, err := m.cli.Txn(ctx).If(m.guardOf(tok)).Then(clientv3.OpDelete(m.queueKey)).Commit()
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdlock: Close: a call on %s is still running: %w", m.label(), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitIdle waits until m's background clean-ups are done (tests).
func (m *Mutex) waitIdle() { m.bg.Wait() }

// Lost returns a channel that is closed when m's lease is lost: it expired
// (the process was paused or cut off from etcd longer than the TTL), was
// revoked (by Session.Close, for a shared one), or Close was called. A
// holder should stop its work when it fires: its guarded writes fail from
// then on.
func (m *Mutex) Lost() <-chan struct{} { return m.lost }

// TTL returns the lease TTL the server granted.
func (m *Mutex) TTL() time.Duration { return m.ttl }

// SetName names m in its log lines (stuck reports, failed unlocks and
// clean-ups), beside its prefix, as every lockword lock takes a name:
// for whoever reads this process's logs. Other processes do not see it;
// inspect shows the prefix and the holder's host, PID and lease.
func (m *Mutex) SetName(name string) { m.setName(name) }

// Name returns the name given by SetName, or the prefix (normalised) if
// none was.
func (m *Mutex) Name() string { return m.nameOr() }

// Identity returns what other processes see of m's holder.
func (m *Mutex) Identity() Holder { return m.me }

func (m *Mutex) leaseLost() bool { return isClosed(m.lost) }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
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
		case errors.Is(err, lockword.ErrNotRecoverable), errors.Is(err, lockword.ErrCorrupt), errors.Is(err, ErrLeaseLost):
			panic(err)
		}
		m.log.Warn("etcdlock: Lock failed, retrying", append(m.logAttrs(), "err", err, "retry_in", pause)...)
		time.Sleep(pause)
		pause = min(2*pause, lockRetryMax)
	}
}

// repairOrPanic runs the repair function after Lock took m from a dead
// holder; see shm.Mutex.Lock for why it unlocks before panicking.
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
// shm.Mutex.SetRepair.
func (m *Mutex) SetRepair(fn func() error) {
	if fn == nil {
		m.repair.Store(nil)
		return
	}
	m.repair.Store(&fn)
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
