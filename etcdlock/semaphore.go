package etcdlock

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A Semaphore is a counting semaphore of N permits shared by processes on
// any machines that reach one etcd cluster. Each Semaphore value is one
// holder: Acquire takes n of the N permits (1 ≤ n ≤ N) and holds them until
// Release; a value holds at most one acquisition at a time (make one
// Semaphore per concurrent holder, on a Session to share one lease). A
// holder that dies (its lease expires) gives its permits back, and the
// next acquirer told of it gets them with a *SemOwnerDeadError naming the
// dead holder and the permits recovered. Every acquisition returns a
// fencing token (Token), and Txn and Put write to etcd only while the
// acquisition still holds, as Mutex's do.
//
// Get one with NewSemaphore; every Semaphore on the same name P and the
// same N, in any process, shares the N permits. The Options are Mutex's:
// a lease of its own (TTL) or a Session.
//
// # Records
//
//	key                      lease       value
//	P/permits                none        N, in decimal: written by the first acquirer; a Semaphore of another N is refused
//	P/queue/<lease>-<nonce>  the value's {host, pid, lease, n}: one key per acquisition waiting or holding
//	P/holds/<lease>-<nonce>  none        {host, pid, lease, n, token, since_unix_ns}: written once the holder knows it holds
//	P/fence/<lease>-<nonce>  the value's empty; its version counts the value's failed attempts (see Mutex)
//
// Queue keys are ordered by create revision. An acquisition holds exactly
// when the weights n of its key and of every key created before it add up
// to at most N. That is a function of the queue alone, and a stable one:
// keys are only appended after it (higher revisions) or deleted before
// it, so the sum only falls; once held, a hold lasts until its key is
// deleted. The holders are therefore a prefix of the queue and the
// permits in use never exceed N, whatever order holders leave in, and the
// queue is strictly FIFO: a request of N permits waits behind the keys
// created before it, and every key created after it waits behind it, so
// no stream of small requests starves a large one. The token is the queue
// key's create revision; holds are granted in increasing token order.
// The price of strict FIFO: a waiter's key lives as long as its lease, so
// a waiter killed in the queue holds up those behind it for up to its TTL
// (as for Mutex). Reading the queue costs one range read per wake-up,
// proportional to the number of waiters.
//
// A hold record P/holds/K says "K knew it held". Release deletes K's queue
// key and its hold record in one transaction, so a hold record whose queue
// key is gone (or was created again, with another revision than its token)
// can only mean that K's lease ended while it held: its holder died. The
// first acquirer that holds and reads such a record deletes it in the same
// transaction that writes its own record (each conditioned on what it
// read), so each death is reported exactly once, to one successor, with
// the permits it had (SemOwnerDeadError.Permits). No MarkConsistent step
// follows: permits bound how many work at once; they do not make one
// holder the sole writer of shared data that a successor must repair
// before others may use it, so the report informs (clean up what the dead
// holder was doing) and never blocks the other holders.
//
// Each step is one etcd transaction, so a crash between steps leaves one
// of these states. Dead after queuing, before its hold record: its key
// expires with the lease; it never knew it held, so nothing is reported.
// Dead holding (after its record, before Release): its key expires, the
// permits return to the queue at once, and the next acquirer that holds
// is told. Dead after Release: nothing is left. A failed or cancelled
// Acquire is cleaned up by Mutex's fence (see Mutex, "Calls that fail"):
// the fence key's version conditions the write that queues, and the
// clean-up increments it while deleting the queue key and hold record, so
// a late transaction of the attempt can neither queue nor hold. The
// bounds are Mutex's: Acquire and TryAcquire return within ctx's deadline
// (plus the time to schedule the returning goroutine); a call that
// returned an error other than ErrOwnerDead holds nothing, and nothing it
// wrote outlives its return by more than two lease TTLs and a request
// timeout (5 s), and in the common case nothing outlives the clean-up's
// one round trip. One report can be lost: if the transaction that took a
// dead holder's record committed but its caller gave up before the reply
// came, the clean-up removes the new hold and the report with it.
//
// # Fencing
//
// Token is the acquisition's queue key's create revision: unique, and
// increasing in grant order. Txn and Put are exact: they commit only while
// the queue key still exists with that revision. For a store outside
// etcd, the token names the acquisition; a per-permit fencing order does
// not exist for a semaphore (N holders legitimately overlap), so a store
// that must refuse a holder that lost its permits has to ask etcd (Txn)
// or track the tokens it admitted.
//
// # Memory model
//
// Etcd is linearizable: a Release's transaction commits before the
// transaction that reads the permits it freed as available, and a reader
// of etcd after Acquire returns sees every write committed before it.
type Semaphore struct {
	_          noCopy
	cli        *clientv3.Client
	prefix     string
	permits    int
	queueKey   string
	holdKey    string
	fenceKey   string
	permitsKey string
	me         Holder
	handle     // the lease, the gate, the background clean-ups

	fenced int64        // under gate: fences committed (see Mutex)
	token  atomic.Int64 // 0: holds nothing
	held   atomic.Int64 // permits held
}

// Key names of a semaphore below its prefix, besides queueDir and fenceDir.
const (
	holdsDir   = "/holds/"
	permitsKey = "/permits"
)

// semEntry is the value of a semaphore's queue key and of its hold record
// (Token and SinceUnixNs only there).
type semEntry struct {
	Holder
	N           int   `json:"n"`
	Token       int64 `json:"token,omitempty"`
	SinceUnixNs int64 `json:"since_unix_ns,omitempty"`
}

// NewSemaphore returns a Semaphore of permits permits named prefix (see
// NewMutex for names and opts). It returns an error wrapping
// ErrBadArgument for a nil client, permits below 1, a bad TTL or a name
// that is empty or has a path element "queue", "fence" or "holds";
// ErrLeaseLost if the Session's lease is lost; and the client's error if
// the lease cannot be granted. A different count stored by the
// semaphore's first acquirer is reported by Acquire.
func NewSemaphore(ctx context.Context, cli *clientv3.Client, prefix string, permits int, opts *Options) (*Semaphore, error) {
	if err := checkClient(ctx, cli); err != nil {
		return nil, err
	}
	if permits < 1 {
		return nil, fmt.Errorf("%w: a semaphore of %d permits (at least 1)", ErrBadArgument, permits)
	}
	p, err := lockName(prefix)
	if err != nil {
		return nil, err
	}
	if strings.Contains(p+"/", "/holds/") {
		return nil, fmt.Errorf("%w: semaphore name %q contains %q, which names the records of another semaphore", ErrBadArgument, prefix, "holds")
	}
	o, sess, own, err := optionsLease(ctx, cli, opts)
	if err != nil {
		return nil, err
	}
	s := &Semaphore{cli: cli, prefix: p, permits: permits, permitsKey: p + permitsKey}
	s.queueKey, s.me = newQueueKey(p, int64(sess.id))
	name := s.queueKey[len(p+queueDir):]
	s.holdKey, s.fenceKey = p+holdsDir+name, p+fenceDir+name
	s.handle.init(sess, own, o.Logger, "Semaphore", "semaphore", p)
	return s, nil
}

// Close waits for s's background clean-up, if any, and ends s, within
// closeTimeout (1 s): with a lease of its own it revokes it; on a Session
// it deletes s's queue key. Permits held through s are released as if its
// process had died: the next acquirer is told (ErrOwnerDead). Lost is
// closed. It returns the client's error if etcd could not be told (the
// keys then go with the lease).
func (s *Semaphore) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	s.closeWait(ctx)
	if s.ownSession {
		return s.sess.revoke(ctx)
	}
	if tok := s.token.Load(); tok != 0 {
		_, err := s.cli.Txn(ctx).If(s.guardOf(tok)).Then(clientv3.OpDelete(s.queueKey)).Commit()
		return err
	}
	return nil
}

// Lost returns a channel closed when s's lease is lost (expired or
// revoked) or Close was called: the permits held through s are gone.
func (s *Semaphore) Lost() <-chan struct{} { return s.lost }

// SetName names s in its log lines (failed releases and clean-ups) and
// in its ErrNotHolder and ErrLeaseLost errors, beside its prefix, as every lockword lock takes a name:
// for whoever reads this process's logs. Other processes do not see it;
// inspect shows the prefix and the holder's host, PID and lease.
func (s *Semaphore) SetName(name string) { s.setName(name) }

// Name returns the name given by SetName, or the prefix (normalised) if
// none was.
func (s *Semaphore) Name() string { return s.nameOr() }

// Permits returns N, the semaphore's number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// Held returns the number of permits s holds (0 when it holds none).
func (s *Semaphore) Held() int { return int(s.held.Load()) }

// TTL returns the lease TTL the server granted.
func (s *Semaphore) TTL() time.Duration { return s.ttl }

// Identity returns what other processes see of s's holder.
func (s *Semaphore) Identity() Holder { return s.me }

// Token returns the fencing token of the current acquisition (its queue
// key's create revision), 0 when s holds nothing.
func (s *Semaphore) Token() int64 { return s.token.Load() }

// Guard returns the comparison that holds in an etcd transaction exactly
// while the current acquisition lasts.
func (s *Semaphore) Guard() clientv3.Cmp { return s.guardOf(s.token.Load()) }

func (s *Semaphore) guardOf(token int64) clientv3.Cmp { return holdGuard(s.queueKey, token) }

// Txn commits ops in one etcd transaction if s still holds its permits,
// and returns ErrNotHolder (writing nothing) if it does not. ops must not
// touch keys under the semaphore's prefix.
func (s *Semaphore) Txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := guardedTxn(ctx, s.cli, s.queueKey, s.token.Load(), ops)
	return resp, s.nameErr(err)
}

// Put writes key = val if s still holds its permits (Txn with one put).
func (s *Semaphore) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) error {
	_, err := s.Txn(ctx, clientv3.OpPut(key, val, opts...))
	return err
}

// Release gives back the permits s holds, in one etcd transaction. It
// returns nil when they are released; ErrNotHolder when s held none, or
// its hold had already ended (the lease expired: a successor has been
// told), s then holding none either; and the client's error (etcd
// unreachable, ctx done) with s still holding: call Release again (a
// transaction whose reply was lost makes the retry return ErrNotHolder)
// or Close.
func (s *Semaphore) Release(ctx context.Context) error {
	tok := s.token.Load()
	if tok == 0 {
		return s.nameErr(ErrNotHolder)
	}
	resp, err := s.cli.Txn(ctx).If(s.guardOf(tok)).
		Then(clientv3.OpDelete(s.queueKey), clientv3.OpDelete(s.holdKey)).Commit()
	if err != nil {
		return err
	}
	s.token.Store(0)
	s.held.Store(0)
	s.gate.Unlock()
	if !resp.Succeeded {
		return s.nameErr(ErrNotHolder)
	}
	return nil
}

func (s *Semaphore) entryJSON(n int, token int64) string {
	e := semEntry{Holder: s.me, N: n, Token: token}
	if token != 0 {
		e.SinceUnixNs = time.Now().UnixNano()
	}
	b, _ := json.Marshal(e)
	return string(b)
}

// parsePermits decodes the stored N, P/permits; the error says why no
// valid history wrote it (every Semaphore writes strconv.Itoa of N ≥ 1).
func parsePermits(key, val []byte) (int, error) {
	n, err := strconv.Atoi(string(val))
	if err != nil || n < 1 || strconv.Itoa(n) != string(val) {
		return 0, fmt.Errorf("%s = %q is not a count of permits", key, val)
	}
	return n, nil
}

// semCorrupt returns the ErrCorrupt error of the semaphore at prefix.
func semCorrupt(prefix string, reason error) error {
	return &lockword.CorruptError{Kind: "etcdlock.Semaphore", Object: prefix, Region: "etcd", Reason: reason.Error() + "; no valid history writes it"}
}

// SemOwnerDeadError is returned by Semaphore.Acquire, with the permits
// held, when holders died (their leases expired) holding permits that
// this acquirer is the first to learn of. errors.Is(err,
// lockword.ErrOwnerDead) holds for it.
type SemOwnerDeadError struct {
	Semaphore string   // the semaphore's prefix
	Dead      []Holder // the dead holders
	Permits   int      // the permits they held, now returned
}

// Error names the semaphore, the dead holders and their permits. It does
// not repeat lockword.ErrOwnerDead's text, whose advice (MarkConsistent)
// is a lock's: a semaphore has no such step.
func (e *SemOwnerDeadError) Error() string {
	return fmt.Sprintf("lockword: holders of etcd semaphore %q died holding permits: %d permits returned by dead holders %v; the caller holds the permits it asked for", e.Semaphore, e.Permits, e.Dead)
}

// Is reports whether target is lockword.ErrOwnerDead.
func (e *SemOwnerDeadError) Is(target error) bool { return target == lockword.ErrOwnerDead }

// waitIdle waits until s's background clean-ups are done (tests).
func (s *Semaphore) waitIdle() { s.bg.Wait() }
