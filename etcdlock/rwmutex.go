package etcdlock

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key names of an RWMutex's readers below its prefix.
const (
	readerDir      = "/readers/"
	readerFenceDir = "/rfence/"
)

// A lock named with a path element "readers" or "rfence" would put its
// records among an RWMutex's read holds (which its writers wait for), so
// such names are refused too, as "queue" and "fence" are (lockName).
func init() { reservedNames = append(reservedNames, "readers", "rfence") }

// An RWMutex is a reader-writer lock between processes on any machines
// that reach one etcd cluster: any number of readers or one writer, with
// SharedRWMutex's owner-death contract where a cluster allows it. A
// writer that dies holding (its lease expires) leaves the readers out of
// the data it may have half written: the next writer gets the lock with
// ErrOwnerDead, repairs, calls MarkConsistent and unlocks, which admits
// them (Unlock without MarkConsistent makes the lock not recoverable for
// readers and writers alike). A reader that dies holding is dropped when
// its lease expires, and nobody is told: readers do not write, so there
// is nothing to repair. Txn and Put write to etcd only while rw's hold
// lasts, a read hold as a write hold (see "Fencing").
//
// Get one with NewRWMutex. Every RWMutex on the same prefix P, in any
// process, shares the lock. The writers are a Mutex on P (its queue, hold
// record and fence, and their guarantees: see Mutex); each read hold is
// one key:
//
//	key                            lease       value
//	P/readers/<lease>-<nonce>-<n>  the reader's Holder JSON: one key per read hold or waiting reader
//	P/rfence/<lease>-<nonce>-<n>   the reader's empty: a failed RLockContext's fence (see below)
//
// # Order: arrival order, phase by phase
//
// Readers and writers are served in the order etcd created their keys
// (their create revisions): a writer holds once every reader that arrived
// before it has left, and a reader holds once every writer that arrived
// before it has unlocked. Readers that arrive together share the lock;
// a writer that arrives stops the readers behind it, so no writer waits
// for readers that came after it (no writer starves, as with a
// writer-preferring lock), and no reader waits for a writer that came
// after it (no reader starves either, which a writer-preferring lock does
// not promise). This is the order etcd's recipes.RWMutex keeps; it bounds
// every wait by the holds queued ahead, as a phase-fair lock does, and
// each arrival costs one transaction. A strict phase alternation (one
// writer, then all waiting readers) would need a shared counter that
// every arrival writes: one more contended key.
//
//	reader R waits for                         writer W waits for
//	the last writer key created before R's     the Mutex (writers before W)
//	a dead writer's record, or a repair        the last reader key created before W's token
//
// A reader that finds a dead writer's hold record (its key gone), or a
// writer repairing after one, withdraws its key, so that the repairing
// writer does not wait for it, waits until the record changes, and
// arrives again: behind the repairing writer.
//
// # Calls that fail
//
// A LockContext that fails after taking the writers' Mutex unlocks it
// (or, if it took it from a dead writer, gives its lease up so that the
// next writer is told again: unlocking unrepaired would make the lock not
// recoverable). A failed RLockContext deletes its key, in a transaction
// that also creates the attempt's fence key: its put is conditioned on
// that key's absence, so a put still in flight fails, and nothing of the
// attempt survives; the fence key goes with the lease (Close). Both return
// within their context's deadline.
//
// # Fencing
//
// A holder paused past its lease (a GC pause, SIGSTOP, a partition) loses
// its hold while it sleeps: a writer's to the next writer, a reader's to
// the writer that was waiting for it. Either may then resume and write.
// Txn and Put commit only while the hold they are conditioned on still
// lasts: the write hold's queue key with its token (as Mutex.Txn), or,
// without one, the latest read hold's key with its create revision. A
// read key exists from before the read hold began until it ends, and a
// writer that arrives while it exists waits for it to go, so a write
// guarded by a read hold never commits while a later writer holds, nor
// after one has held: the late write fails with ErrNotHolder. Token is
// the write hold's fencing token, RToken the read hold's (its key's
// create revision): every writer that held before the read hold began
// has a smaller token, every writer that holds after it a larger one, so
// a store outside etcd that remembers the largest writer's token it has
// seen and refuses a reader's write with a smaller token refuses a
// paused reader's late write once a writer has written after it (readers
// hold together: compare a reader's token with the writers' only).
//
// # sync.Locker, statistics, stuck reports
//
// Lock, Unlock, RLock, RUnlock and RLocker are the sync.Locker forms, as
// for sync.RWMutex: Lock follows Mutex.Lock (a dead writer's data is
// repaired by the function given to SetRepair, or Lock unlocks it
// unrepaired and panics; ErrNotRecoverable, ErrCorrupt and ErrLeaseLost
// panic; network errors are logged and retried), and RLock likewise.
// EnableStats and Stats count read and write acquisitions together, as
// lockword.RWMutex does. An acquisition that waits past the stuck
// threshold (SetStuckThreshold; lockword.DefaultStuckThreshold, 2 s)
// logs one report naming the process it waits for: the writer, or the
// reader, or the writer whose death is being repaired, and the lock by
// its prefix and the name SetName gave it.
//
// # Memory model
//
// As for sync.RWMutex, across processes: the n'th Unlock's transaction
// commits before the m'th write hold's for n < m, and a read hold begins
// after the Unlock of the last writer before it and ends before the next
// writer holds.
//
// Read holds belong to the RWMutex value that took them (RUnlock releases
// one of them, whichever goroutine calls it); the write hold too, as for
// Mutex. A process that takes a read hold and then waits for the write
// hold through the same RWMutex waits for itself, until its context ends.
type RWMutex struct {
	m      *Mutex
	nonce  string // the Mutex's queue key name: lease and nonce
	seq    atomic.Int64
	writer atomic.Int64 // token of the write hold once readers have left; 0: none

	mu    sync.Mutex
	reads []readHold // read holds, latest last

	stats stats // read and write acquisitions together
}

// A readHold is one read hold: its key and the key's create revision.
type readHold struct {
	key   string
	token int64
}

// NewRWMutex returns an RWMutex on the lock named by prefix (as a
// Mutex's), with its own lease of opts.TTL kept alive until Close. Errors
// are NewMutex's.
func NewRWMutex(ctx context.Context, cli *clientv3.Client, prefix string, opts *Options) (*RWMutex, error) {
	m, err := newMutexOf(ctx, cli, prefix, opts, "RWMutex", "lock")
	if err != nil {
		return nil, err
	}
	return &RWMutex{m: m, nonce: m.queueKey[len(m.prefix+queueDir):]}, nil
}

// LockContext takes the write lock, waiting for the writers and readers
// that arrived before it, until ctx is done or rw's lease is lost. It
// returns Mutex.LockContext's results: nil, or an *OwnerDeadError with
// the write lock held (repair, MarkConsistent, Unlock), or an error with
// nothing held: among them lockword.ErrCorrupt (a *CorruptError naming
// the key) for a key under P/readers/ that no RWMutex writes (misnamed,
// or not attached to the lease it names), reported when the writer
// would wait for it, not at its deadline.
func (rw *RWMutex) LockContext(ctx context.Context) error {
	w := rw.newWait()
	slow0, parks0 := rw.m.stats.slow.Load(), rw.m.stats.parks.Load()
	dead := rw.m.LockContext(ctx)
	if dead != nil && !errors.Is(dead, lockword.ErrOwnerDead) {
		return dead // named by the Mutex
	}
	// Write holds are serialized by the Mutex's gate: what its statistics
	// counted since slow0 and parks0 is this acquisition's.
	w.slow = rw.m.stats.slow.Load() != slow0
	w.parks += rw.m.stats.parks.Load() - parks0
	tok := rw.m.Token()
	if err := rw.waitReaders(ctx, tok, w); err != nil {
		rw.abandonWrite()
		return rw.m.nameErr(err)
	}
	rw.writer.Store(tok)
	w.acquired()
	return dead
}

// waitReaders waits until no reader key created before token remains.
func (rw *RWMutex) waitReaders(ctx context.Context, token int64, w *rwWait) error {
	m := rw.m
	for {
		r, err := m.cli.Get(ctx, m.prefix+readerDir, append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(token-1))...)
		if err != nil {
			return err
		}
		if len(r.Kvs) == 0 {
			return nil
		}
		// A key no RWMutex wrote would never go: report it, not wait.
		if err := checkReaderKey(m.prefix, string(r.Kvs[0].Key), r.Kvs[0].Lease); err != nil {
			return corrupt(m.prefix, err)
		}
		if err := w.gone(ctx, r.Kvs[0], r.Header.Revision); err != nil {
			return err
		}
	}
}

// checkReaderKey returns an error unless key is named as RLockContext
// names its keys (readerDir, then the reader's queue key name: lease and
// nonce, "-" and a decimal count) and is attached to the lease it names:
// a key that no RWMutex wrote may be attached to no lease, so that it
// would never go.
func checkReaderKey(prefix, key string, lease int64) error {
	name, _ := strings.CutPrefix(key, prefix+readerDir)
	qname, n, _ := strings.Cut(name, "-") // qname: the lease for now
	nonce, n, ok := strings.Cut(n, "-")
	named, err := strconv.ParseUint(qname, 16, 64)
	_, errNonce := hex.DecodeString(nonce)
	_, errN := strconv.ParseUint(n, 10, 64)
	switch {
	case !ok || len(qname) != 16 || len(nonce) != 8 || err != nil || errNonce != nil || errN != nil:
		return fmt.Errorf("read key %s is not named as an RWMutex names its keys", key)
	case lease == 0:
		return fmt.Errorf("read key %s has no lease: it would never expire", key)
	case int64(named) != lease:
		return fmt.Errorf("read key %s is attached to lease %s, not the one it names", key, leaseText(lease))
	}
	return nil
}

// abandonWrite releases the writers' Mutex after a failed LockContext:
// unlocks it, or, taken from a dead writer and so unrepaired, gives the
// lease up, which reports that death to the next writer again.
func (rw *RWMutex) abandonWrite() {
	m := rw.m
	if !m.inconsistent {
		m.Unlock()
		return
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		m.giveUp("gave up waiting for readers after taking the lock from a dead writer", context.DeadlineExceeded)
		m.released()
	}()
}

// Unlock releases the write lock, as Mutex.Unlock (it panics if rw does
// not hold it).
func (rw *RWMutex) Unlock() {
	rw.writer.Store(0)
	rw.m.Unlock()
}

// UnlockContext releases the write lock, as Mutex.UnlockContext.
func (rw *RWMutex) UnlockContext(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	tok := rw.writer.Swap(0)
	err := rw.m.UnlockContext(ctx)
	if err != nil && !errors.Is(err, ErrNotHolder) {
		rw.writer.Store(tok) // still held
	}
	return err
}

// MarkConsistent declares the data repaired after a LockContext that
// returned ErrOwnerDead, as Mutex.MarkConsistent.
func (rw *RWMutex) MarkConsistent() error { return rw.m.MarkConsistent() }

// Token returns the write hold's fencing token, 0 when rw does not hold
// the write lock.
func (rw *RWMutex) Token() int64 { return rw.writer.Load() }

// RToken returns the fencing token of rw's latest read hold (its key's
// create revision), 0 when rw holds no read lock. See the type's
// "Fencing" for how a store outside etcd uses it.
func (rw *RWMutex) RToken() int64 {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(rw.reads) == 0 {
		return 0
	}
	return rw.reads[len(rw.reads)-1].token
}

// Txn commits ops if rw still holds the write lock (as Mutex.Txn) or,
// holding no write lock, its latest read lock, and otherwise returns
// ErrNotHolder and writes nothing: a reader or writer paused past its
// lease writes nothing once its hold has ended (see the type's
// "Fencing"). ops must not touch keys under the lock's prefix.
func (rw *RWMutex) Txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if ctx == nil {
		return nil, lockword.ErrNilContext
	}
	if rw.writer.Load() != 0 {
		return rw.m.Txn(ctx, ops...)
	}
	rw.mu.Lock()
	var hold readHold
	if len(rw.reads) > 0 {
		hold = rw.reads[len(rw.reads)-1]
	}
	rw.mu.Unlock()
	resp, err := guardedTxn(ctx, rw.m.cli, hold.key, hold.token, ops)
	return resp, rw.m.nameErr(err)
}

// Put writes key = val if rw still holds the write lock or a read lock
// (Txn with one put).
func (rw *RWMutex) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) error {
	_, err := rw.Txn(ctx, clientv3.OpPut(key, val, opts...))
	return err
}

// RLockContext takes a read lock, waiting for the writers that arrived
// before it (and for the repair of a dead writer's data), until ctx is
// done or rw's lease is lost. It returns nil with a read hold; an error
// wrapping lockword.ErrNotRecoverable, ErrLeaseLost, ctx.Err() or the
// client's error with none, or lockword.ErrCorrupt (a *CorruptError naming
// the key) for a record in the writers' queue or a hold record that no
// valid history writes, as LockContext does, and nothing of the attempt left (see the
// type's "Calls that fail").
func (rw *RWMutex) RLockContext(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	m := rw.m
	if m.leaseLost() {
		return m.nameErr(ErrLeaseLost)
	}
	w := rw.newWait()
	for {
		n := rw.seq.Add(1)
		key := fmt.Sprintf("%s%s%s-%d", m.prefix, readerDir, rw.nonce, n)
		fence := fmt.Sprintf("%s%s%s-%d", m.prefix, readerFenceDir, rw.nonce, n)
		token, err := rw.rlock(ctx, key, fence, w)
		if err != nil {
			rw.fenceRead(ctx, key, fence)
			return m.nameErr(err)
		}
		if token != 0 {
			rw.mu.Lock()
			rw.reads = append(rw.reads, readHold{key, token})
			rw.mu.Unlock()
			w.acquired()
			return nil
		}
	}
}

// rlock is one arrival of RLockContext: it puts key and waits for the
// writers before it. It returns the read hold's token (key's create
// revision) once it holds. 0 with a nil error means that it found a dead
// writer's data unrepaired: it withdrew its key (so that the writer that
// repairs does not wait for it), waited for the hold record to change,
// and the reader must arrive again.
func (rw *RWMutex) rlock(ctx context.Context, key, fence string, w *rwWait) (token int64, err error) {
	m := rw.m
	lease := clientv3.WithLease(clientv3.LeaseID(m.me.Lease))
	r, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(fence), "=", 0)).Then(
		clientv3.OpPut(key, m.meJSON, lease),
		clientv3.OpGet(m.prefix+queueDir, append(clientv3.WithLastCreate(), clientv3.WithPrefix())...),
		clientv3.OpGet(m.ownerKey),
	).Commit()
	if err != nil {
		return 0, leaseErr(err)
	}
	if !r.Succeeded {
		return 0, ErrLeaseLost // only our own clean-up writes the fence key
	}
	mine := r.Header.Revision // our key's create revision
	writers, owner, rev := r.Responses[1].GetResponseRange().Kvs, r.Responses[2].GetResponseRange().Kvs, r.Header.Revision
	for {
		switch {
		case len(writers) == 1:
			// A writer arrived before us: wait until it has unlocked,
			// unless no Mutex wrote its key (it would never go).
			if err := checkQueueKey(m.prefix, string(writers[0].Key), writers[0].Lease); err != nil {
				return 0, corrupt(m.prefix, err)
			}
			if err := w.gone(ctx, writers[0], rev); err != nil {
				return 0, err
			}
		case len(owner) == 1:
			rec, err := parseRecord(owner[0].Value)
			if err != nil {
				return 0, corrupt(m.prefix, fmt.Errorf("hold record %s: %v", m.ownerKey, err))
			}
			if rec.State == stateNotRecoverable {
				return 0, fmt.Errorf("%w (etcd lock %q)", lockword.ErrNotRecoverable, m.prefix)
			}
			if rec.State == stateHeld && rec.token(owner[0].CreateRevision) > mine {
				return mine, nil // a writer after us: it waits for us
			}
			// A writer before us died holding (its key is gone: it is not
			// in the queue before ours), or one is repairing after such a
			// death: stay out until the record changes.
			if _, err := m.cli.Delete(ctx, key); err != nil {
				return 0, err
			}
			return 0, w.gone(ctx, owner[0], rev)
		default:
			return mine, nil
		}
		g, err := m.cli.Txn(ctx).Then(
			clientv3.OpGet(m.prefix+queueDir, append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(mine-1))...),
			clientv3.OpGet(m.ownerKey),
		).Commit()
		if err != nil {
			return 0, err
		}
		writers, owner, rev = g.Responses[0].GetResponseRange().Kvs, g.Responses[1].GetResponseRange().Kvs, g.Header.Revision
	}
}

// fenceRead removes what a failed RLockContext wrote: its key, in the
// transaction that creates its fence key, so that its put, if still in
// flight, fails. Within ctx if it has time left, else in the background
// for one TTL, after which the lease is given up (its keys go with it).
func (rw *RWMutex) fenceRead(ctx context.Context, key, fence string) {
	m := rw.m
	try := func(ctx context.Context) error {
		_, err := m.cli.Txn(ctx).Then(clientv3.OpDelete(key),
			clientv3.OpPut(fence, "", clientv3.WithLease(clientv3.LeaseID(m.me.Lease)))).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			_, err = m.cli.Delete(ctx, key) // the lease is gone: no put can land
		}
		return err
	}
	if ctx.Err() == nil && try(ctx) == nil {
		return
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		rw.retry("could not clean up after a failed RLockContext", try)
	}()
}

// retry runs try until it succeeds, for one TTL; then it gives the lease
// up.
func (rw *RWMutex) retry(what string, try func(context.Context) error) {
	m := rw.m
	deadline := time.Now().Add(m.ttl)
	pause := lockRetryMin
	for {
		ctx, cancel := tryContext(deadline)
		err := try(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			m.giveUp(what, err)
			return
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, lockRetryMax)
	}
}

// RUnlockContext releases one of rw's read locks: it deletes its key. It
// returns ErrNotHolder if rw holds none, and the client's error with the
// read lock still held.
func (rw *RWMutex) RUnlockContext(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	rw.mu.Lock()
	if len(rw.reads) == 0 {
		rw.mu.Unlock()
		return rw.m.nameErr(ErrNotHolder)
	}
	hold := rw.reads[len(rw.reads)-1]
	rw.reads = rw.reads[:len(rw.reads)-1]
	rw.mu.Unlock()
	if _, err := rw.m.cli.Delete(ctx, hold.key); err != nil {
		rw.mu.Lock()
		rw.reads = append(rw.reads, hold)
		rw.mu.Unlock()
		return err
	}
	return nil
}

// RUnlock releases one of rw's read locks; it panics if rw holds none. If
// etcd has not confirmed within 1 s it returns anyway and the release
// goes on in the background for one TTL, after which rw gives its lease
// up (which drops the read hold as a reader's death would).
func (rw *RWMutex) RUnlock() {
	ctx, cancel := context.WithTimeout(context.Background(), unlockWait)
	err := rw.RUnlockContext(ctx)
	cancel()
	switch {
	case errors.Is(err, ErrNotHolder):
		panic(fmt.Sprintf("etcdlock: RUnlock of unlocked RWMutex %q", rw.m.prefix))
	case err == nil:
		return
	}
	rw.mu.Lock()
	key := rw.reads[len(rw.reads)-1].key
	rw.reads = rw.reads[:len(rw.reads)-1]
	rw.mu.Unlock()
	rw.m.bg.Add(1)
	go func() {
		defer rw.m.bg.Done()
		rw.retry("could not release a read lock", func(ctx context.Context) error {
			_, err := rw.m.cli.Delete(ctx, key)
			return err
		})
	}()
}

// Close revokes rw's lease (as Mutex.Close): its read holds end, and a
// write hold ends as a writer's death.
func (rw *RWMutex) Close() error { return rw.m.Close() }

// Lost returns a channel that is closed when rw's lease is lost.
func (rw *RWMutex) Lost() <-chan struct{} { return rw.m.Lost() }

// SetName names rw in its log lines (stuck reports, failed unlocks and
// clean-ups), beside its prefix, as every lockword lock takes a name:
// for whoever reads this process's logs. Other processes do not see it;
// inspect shows the prefix and the holder's host, PID and lease.
func (rw *RWMutex) SetName(name string) { rw.m.setName(name) }

// Name returns the name given by SetName, or the prefix (normalised) if
// none was.
func (rw *RWMutex) Name() string { return rw.m.nameOr() }

// Identity returns what other processes see of rw's holder.
func (rw *RWMutex) Identity() Holder { return rw.m.me }
