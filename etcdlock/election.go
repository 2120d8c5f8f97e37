package etcdlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaderKey is the leader record of an election, below its prefix.
const leaderKey = "/leader"

// ErrNoLeader is returned by Leader when the election has no leader: none
// has won a campaign yet, the last one resigned, or its lease expired.
var ErrNoLeader = errors.New("etcdlock: the election has no leader")

// An Election elects one leader among processes on any machines that
// reach one etcd cluster, as etcd's concurrency.Election does, and adds
// what a leader needs to act safely: each term carries a fencing token
// that strictly increases from term to term, Txn and Put write to etcd
// only while the term lasts (a deposed leader's late writes fail with
// ErrNotHolder), and a leader whose predecessor died in office (its lease
// expired while it led) is told so by Campaign (ErrOwnerDead).
//
// Get one with NewElection. Every Election on the same prefix P, in any
// process, campaigns in the same election. An Election is a Mutex on P
// (its records, queue and fence, and their guarantees, are the Mutex's;
// see Mutex) plus one record:
//
//	key                          lease              value
//	P/leader                     the leader's       {token, value, host, pid, lease, since_unix_ns}
//	P/observers/<lease>-<nonce>  the observer's     {host, pid, lease, name, since_unix_ns}: one key per Observe in progress
//
// An observer key is written by Election.Observe for lockword inspect and
// Observers, and read by nothing else: campaigns, Leader, the fence and
// guarded writes never look under P/observers/ (and a lock name with a
// path element "observers" is refused, as "queue" is).
//
// A campaign is the Mutex's LockContext: campaigners queue in the order
// they asked, and a term is one hold of the lock; its token is the hold's
// fencing token. Campaign then writes P/leader, conditioned on the hold
// (the Mutex's guard), and returns only once it is written: a term's
// leader is always visible to Leader and Observe before it can make a
// guarded write. Proclaim rewrites P/leader's value under the same
// condition, keeping the token. Resign deletes P/leader, then unlocks.
// P/leader is attached to the leader's lease, so it disappears with the
// leader: a leader that dies leaves no record behind, and the next
// campaigner, taking the lock from a dead holder, gets ErrOwnerDead.
//
// # Owner death
//
// An election must always be able to elect, so a death in office is a
// report, not a lock-out: Campaign marks the lock consistent itself before
// it returns the *OwnerDeadError (errors.Is(err, lockword.ErrOwnerDead)),
// with the campaigner elected. The new leader repairs what its
// predecessor may have left half done as part of its term; a leader that
// dies repairing is itself a death in office, reported to the next.
//
// # Cancellation
//
// A Campaign that returns an error other than ErrOwnerDead is not leader
// and never becomes one: what its lock attempt wrote is removed or fenced
// as LockContext's are; if it had taken the lock but could not write
// P/leader within ctx, it releases the lock (deleting a P/leader that may
// have landed) in the background, which keeps the Election busy (its next
// Campaign waits for it), bounded as Mutex's Unlock is. It returns within
// ctx's deadline.
//
// # Statistics, names, stuck reports
//
// An Election keeps Stats (EnableStats) as every lockword lock does: its
// acquisitions are the campaigns it won, its waits a standby's time in
// reserve. It logs no stuck reports: a campaigner waiting behind a
// leader is a standby, and waits by design for as long as the leader
// leads; a leader that stops working is ended by its lease (Lost,
// ErrOwnerDead), and Leader and lockword inspect show who leads and for
// how long. SetName names it in its log lines (a clean-up that failed),
// beside its prefix.
//
// # Memory model
//
// Terms are totally ordered by their tokens, which are etcd revisions: a
// leader's writes through Txn commit before its successor's Campaign
// returns, as Mutex's Unlock does before the next Lock.
type Election struct {
	m         *Mutex
	leaderKey string
	// term is the token of the term Campaign won, 0 when not leader. It is
	// written under m's gate (by Campaign and Resign), read anywhere.
	term atomic.Int64
}

// Term is one leader record: a term's leader and its proclaimed value.
type Term struct {
	// Token is the term's fencing token: it strictly increases from term
	// to term, and is the same for every record of one term.
	Token int64 `json:"token"`
	// Value is what the leader campaigned with or proclaimed last.
	Value string `json:"value"`
	// Leader identifies the leader's process.
	Leader Holder `json:"leader"`
	// Since is when the term began (the leader's clock).
	Since time.Time `json:"-"`
	// Revision is the etcd revision that wrote this record: a Proclaim
	// gives the same Token with a higher Revision.
	Revision int64 `json:"-"`
	// Gap, in a Term from Observe, says that terms may have been missed
	// just before this one: the observer fell behind by more than the
	// history etcd keeps (a compaction removed it). Never set otherwise.
	Gap bool `json:"-"`
}

// leaderRecord is P/leader's JSON, part of the format other processes
// read.
type leaderRecord struct {
	Token int64  `json:"token"`
	Value string `json:"value"`
	Holder
	SinceUnixNs int64 `json:"since_unix_ns"`
}

// NewElection returns an Election on the election named by prefix (as a
// Mutex's name: trailing slashes dropped), with its own lease of opts.TTL
// kept alive until Close: how long after a leader dies (or is cut off) its
// term ends. Errors are NewMutex's.
func NewElection(ctx context.Context, cli *clientv3.Client, prefix string, opts *Options) (*Election, error) {
	m, err := newMutexOf(ctx, cli, prefix, opts, "Election", "election")
	if err != nil {
		return nil, err
	}
	// A campaigner waiting behind a leader is a standby, waiting by
	// design: a stuck report would fire for every one (see the type's
	// "Statistics, names, stuck reports").
	m.SetStuckThreshold(-1)
	return &Election{m: m, leaderKey: m.prefix + leaderKey}, nil
}

// EnableStats starts collecting statistics of e's campaigns: Acquisitions
// counts the campaigns won, SlowPath those that waited for another
// leader's term to end, WaitTotal and WaitMax how long they waited (a
// standby's time in reserve), Parks its waits on the campaigner queued
// before it.
func (e *Election) EnableStats() { e.m.EnableStats() }

// Stats returns e's statistics since EnableStats.
func (e *Election) Stats() lockword.Stats { return e.m.Stats() }

// Campaign waits until e is elected leader with value, ctx is done, or e's
// lease is lost. It returns:
//
//   - nil: e leads (Token gives the term's fencing token);
//   - an *OwnerDeadError (errors.Is(err, lockword.ErrOwnerDead)): e leads,
//     and the previous leader's lease expired while it led (see the type's
//     "Owner death");
//   - ErrLeaseLost, ctx.Err(), a *lockword.CorruptError, or the client's
//     error: e is not leader, and nothing this call wrote lasts (see the
//     type's "Cancellation").
//
// Campaign on an Election that leads already returns ErrBadArgument (one
// whose term ended by the loss of its lease: ErrLeaseLost).
func (e *Election) Campaign(ctx context.Context, value string) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	if e.term.Load() != 0 && e.m.leaseLost() {
		return e.m.nameErr(ErrLeaseLost) // deposed without Resign: e can never lead again
	}
	if e.term.Load() != 0 {
		return fmt.Errorf("%w: Campaign of an Election that already leads (term %d)", ErrBadArgument, e.term.Load())
	}
	dead := e.m.LockContext(ctx)
	if dead != nil && !errors.Is(dead, lockword.ErrOwnerDead) {
		return dead
	}
	err := e.takeOffice(ctx, value, dead != nil)
	if err != nil {
		e.abdicate()
		return e.m.nameErr(err)
	}
	if od := (*OwnerDeadError)(nil); errors.As(dead, &od) {
		od.elected = true // its text says Campaign marked it consistent
	}
	return dead
}

// takeOffice marks a lock taken from a dead leader consistent (see the
// type's "Owner death") and writes the leader record, under the hold.
func (e *Election) takeOffice(ctx context.Context, value string, dead bool) error {
	if dead {
		if err := e.m.MarkConsistentContext(ctx); err != nil {
			return err
		}
	}
	tok := e.m.Token()
	if err := e.putRecord(ctx, tok, value); err != nil {
		return err
	}
	e.term.Store(tok)
	return nil
}

// putRecord writes P/leader for the term tok, if the hold still lasts.
func (e *Election) putRecord(ctx context.Context, tok int64, value string) error {
	b, _ := json.Marshal(leaderRecord{Token: tok, Value: value, Holder: e.m.me, SinceUnixNs: time.Now().UnixNano()})
	resp, err := e.m.cli.Txn(ctx).If(e.m.guardOf(tok)).
		Then(clientv3.OpPut(e.leaderKey, string(b), clientv3.WithLease(clientv3.LeaseID(e.m.me.Lease)))).Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w (%v)", ErrNotHolder, err)
	case err != nil:
		return err
	case !resp.Succeeded:
		return ErrNotHolder
	}
	return nil
}

// abdicate ends a term Campaign could not complete, in the background
// (the Mutex's gate keeps e's next Campaign waiting until it is done): it
// deletes a leader record of the hold that may have landed, then unlocks.
func (e *Election) abdicate() {
	tok := e.m.Token()
	e.m.bg.Add(1)
	go func() {
		defer e.m.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		e.m.cli.Txn(ctx).If(e.m.guardOf(tok)).Then(clientv3.OpDelete(e.leaderKey)).Commit()
		if e.m.inconsistent {
			// Unlocking unmarked would make the election unable to elect
			// for ever; ending the lease reports the death again instead.
			if err := e.m.MarkConsistentContext(ctx); err != nil {
				e.m.giveUp("could not mark an abandoned term consistent", err)
				e.m.released()
				return
			}
		}
		e.m.Unlock() // hands itself to the background if etcd does not answer
	}()
}

// Proclaim changes the leader's value without starting a new term (the
// token stays). It returns ErrNotHolder if e does not lead (or no longer:
// its lease expired), writing nothing, and the client's error.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	tok := e.term.Load()
	if tok == 0 {
		return e.m.nameErr(ErrNotHolder)
	}
	return e.m.nameErr(e.putRecord(ctx, tok, value))
}

// Resign ends e's term: it deletes the leader record, then unlocks, so the
// next campaigner is elected without an owner-death report. It returns nil
// if e does not lead; ErrNotHolder if the term had already ended (the
// lease expired: the next leader is told of a death in office), with e no
// longer leader; and the client's error, with e still leader (call Resign
// again, or Close).
func (e *Election) Resign(ctx context.Context) error {
	if ctx == nil {
		return lockword.ErrNilContext
	}
	tok := e.term.Load()
	if tok == 0 {
		return nil
	}
	if _, err := e.Txn(ctx, clientv3.OpDelete(e.leaderKey)); err != nil && !errors.Is(err, ErrNotHolder) {
		return err
	}
	err := e.m.UnlockContext(ctx)
	if err == nil || errors.Is(err, ErrNotHolder) {
		e.term.Store(0)
	}
	return err
}

// Token returns the fencing token of e's term, 0 when e does not lead.
func (e *Election) Token() int64 { return e.term.Load() }

// Guard returns the comparison that holds in an etcd transaction exactly
// while e's term lasts, for callers that build their own transactions.
// Without a term it never holds.
func (e *Election) Guard() clientv3.Cmp { return e.m.guardOf(e.term.Load()) }

// Txn commits ops in one etcd transaction if e's term still lasts, and
// returns ErrNotHolder (writing nothing) if it does not: the guarded
// write of a leader. ops must not touch keys under the election's prefix.
func (e *Election) Txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if ctx == nil {
		return nil, lockword.ErrNilContext
	}
	if e.term.Load() == 0 {
		return nil, e.m.nameErr(ErrNotHolder)
	}
	return e.m.Txn(ctx, ops...) // while e leads, the Mutex's hold is the term
}

// Put writes key = val if e's term still lasts (Txn with one put).
func (e *Election) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) error {
	_, err := e.Txn(ctx, clientv3.OpPut(key, val, opts...))
	return err
}

// Leader returns the current term, as etcd has it now (a linearizable
// read): ErrNoLeader if there is none, a *lockword.CorruptError if the
// leader record is not one an Election writes.
func (e *Election) Leader(ctx context.Context) (Term, error) {
	return Leader(ctx, e.m.cli, e.m.prefix)
}

// Leader returns the current term of the election named by prefix, for a
// process that only watches (see Election.Leader); a bad name or nil
// client is an error wrapping ErrBadArgument.
func Leader(ctx context.Context, cli *clientv3.Client, prefix string) (Term, error) {
	if ctx == nil {
		return Term{}, lockword.ErrNilContext
	}
	if cli == nil {
		return Term{}, fmt.Errorf("%w: nil etcd client", ErrBadArgument)
	}
	prefix, err := lockName(prefix)
	if err != nil {
		return Term{}, err
	}
	r, err := cli.Get(ctx, prefix+leaderKey)
	if err != nil {
		return Term{}, err
	}
	if len(r.Kvs) == 0 {
		return Term{}, ErrNoLeader
	}
	return parseTerm(prefix, r.Kvs[0])
}

func parseTerm(prefix string, kv *mvccKV) (Term, error) {
	var rec leaderRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.Token <= 0 || kv.Lease == 0 {
		return Term{}, corrupt(prefix, fmt.Errorf("leader record %s is not one an Election writes (%q)", kv.Key, kv.Value))
	}
	return Term{Token: rec.Token, Value: rec.Value, Leader: rec.Holder,
		Since: time.Unix(0, rec.SinceUnixNs), Revision: kv.ModRevision}, nil
}

// TTL returns the lease TTL the server granted e.
func (e *Election) TTL() time.Duration { return e.m.ttl }

// SetName names e in its log lines (failed releases and clean-ups) and
// in its ErrNotHolder and ErrLeaseLost errors, beside its prefix, as every
// lockword lock takes a name. Other processes see it in one place: an
// Observe called after SetName records the name in its observer key, which
// Observers and lockword inspect show. The leader record does not carry
// it (inspect shows the leader's host, PID and lease).
func (e *Election) SetName(name string) { e.m.setName(name) }

// Name returns the name given by SetName, or the prefix (normalised) if
// none was.
func (e *Election) Name() string { return e.m.nameOr() }

// Identity returns what other processes see of e's leader.
func (e *Election) Identity() Holder { return e.m.me }

// Lost returns a channel that is closed when e's lease is lost (expired,
// revoked, or Close): a leader's term has ended when it fires, and e can
// never campaign again.
func (e *Election) Lost() <-chan struct{} { return e.m.Lost() }

// Close ends e: as Mutex.Close, it revokes e's lease within 1 s, which
// ends a term e still holds as a death would (the next leader gets
// ErrOwnerDead: Resign first to hand over cleanly).
func (e *Election) Close() error {
	e.term.Store(0)
	return e.m.Close()
}
