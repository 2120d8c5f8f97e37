package etcdlock

// Observe: the stream of an election's leader records.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Observe returns a channel of the election's leader records: the current
// one as of the call first (if there is a leader; Observe reads it before
// it returns), then each one written after it, in
// the order etcd committed them, until ctx is done or e's lease is lost
// (Lost: expired, revoked, or Close); then the channel is closed. A new
// term gives a Term with a higher Token than any before; a
// Proclaim gives one with the same Token and a new Value. A term ending
// (Resign, a lease expiry) sends nothing; Leader says whether there is a
// leader now.
//
// An observer that keeps up sees every term, in order, once: Observe
// reads the history of P/leader from a revision on, and after a lost
// connection or leader change resumes at the revision after the last
// record it sent. One that reads slowly delays nothing else: the records
// wait for it, buffered in its etcd client, in order, and none is skipped
// or sent twice. If it falls so far behind that etcd has compacted the
// history it has not read yet, the records in between are gone: Observe
// resumes from the current record, which it sends with Gap set.
//
// While the channel is open the observer is registered, for lockword
// inspect and Observers, by a key of its own, P/observers/<lease>-<nonce>,
// on e's lease: its host, PID, e's SetName name and the time of the call.
// No campaigner, leader or fence reads that key. It is written in the same
// transaction as the first read, deleted in the background once the
// channel is closed (one try; failing, it goes with the lease), and goes
// with e's lease if e's process dies. The package-level Observe registers
// nothing: it has no lease.
//
// Observe returns an error, and no channel, if its first read fails: see
// the package-level Observe; and an error wrapping ErrLeaseLost if e's
// lease is lost. A registration that may still land after Observe gave up
// (ctx done first, or an error) is deleted once etcd has answered it (or
// its 5 s bound ran out: a request etcd answers later still would leave
// its key until the lease ends).
func (e *Election) Observe(ctx context.Context) (<-chan Term, error) {
	if err := checkClient(ctx, e.m.cli); err != nil {
		return nil, err
	}
	if isClosed(e.m.lost) {
		return nil, e.m.nameErr(ErrLeaseLost)
	}
	key := observerKeyName(e.m.prefix, e.m.me.Lease)
	first, err := e.register(ctx, key)
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-e.m.lost: // e closed, or its lease (and so the key) gone: the observer ends with it
		case <-octx.Done():
		}
		cancel()
	}()
	ch := make(chan Term)
	go func() {
		observe(octx, e.m.cli, e.m.prefix, ch, first) // closes ch
		cancel()
		e.unregister(key)
	}()
	return ch, nil
}

// observerDir holds an election's observers (Election.Observe): keys that
// no campaigner, leader, fence or verdict reads, only Observers. A lock
// named with a path element "observers" would put its records among them,
// so such names are refused, as "queue" and "fence" are (lockName).
const observerDir = "/observers/"

func init() { reservedNames = append(reservedNames, "observers") }

// observerRecord is an observer key's JSON, part of the format other
// processes read.
type observerRecord struct {
	Holder
	Name        string `json:"name,omitempty"`
	SinceUnixNs int64  `json:"since_unix_ns"`
}

// observerKeyName names a new observer key of the election at prefix on
// lease: P/observers/<lease, 16 hex digits>-<nonce, 8 hex digits>, with a
// random nonce (one Election may observe more than once at a time).
func observerKeyName(prefix string, lease int64) string {
	var nonce [4]byte
	rand.Read(nonce[:])
	return fmt.Sprintf("%s%s%016x-%x", prefix, observerDir, lease, nonce)
}

// register writes the observer key and reads the leader record in one
// transaction, so that the observer is listed from the revision its
// stream starts at. The request is sent with a context ctx's cancel does
// not cut (bounded by observeFirstWait), and ctx is honoured only while
// waiting for it: a registration that lands after Observe gave up is
// then deleted, not left listed until the lease ends.
func (e *Election) register(ctx context.Context, key string) (*clientv3.GetResponse, error) {
	rec := observerRecord{Holder: e.m.me, SinceUnixNs: time.Now().UnixNano()}
	if n := e.m.named.Load(); n != nil {
		rec.Name = *n
	}
	b, _ := json.Marshal(rec)
	type result struct {
		r   *clientv3.TxnResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), observeFirstWait)
		defer cancel()
		r, err := e.m.cli.Txn(rctx).Then(
			clientv3.OpPut(key, string(b), clientv3.WithLease(clientv3.LeaseID(e.m.me.Lease))),
			clientv3.OpGet(e.m.prefix+leaderKey)).Commit()
		done <- result{r, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		go func() { <-done; e.unregister(key) }()
		return nil, fmt.Errorf("etcdlock: Observe %q: registering the observer: %w", e.m.prefix, ctx.Err())
	}
	switch err := res.err; {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return nil, e.m.nameErr(fmt.Errorf("%w (%v)", ErrLeaseLost, err))
	case err != nil:
		go e.unregister(key) // an answer lost on the way may hide a put that landed
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v (is it an etcd server?): %w", observeFirstWait, err)
		}
		return nil, fmt.Errorf("etcdlock: Observe %q: registering the observer at %s: %w", e.m.prefix, strings.Join(e.m.cli.Endpoints(), ","), err)
	}
	first := (*clientv3.GetResponse)(res.r.Responses[1].GetResponseRange())
	first.Header = res.r.Header // the revision the stream resumes after
	return first, nil
}

// unregister deletes an observer key: one try, bounded by requestTimeout,
// in the background of Observe (a key it cannot delete goes with the
// lease).
func (e *Election) unregister(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	e.m.cli.Delete(ctx, key)
}

// observeFirstWait bounds Observe's first read: an endpoint that is not
// etcd (or none that answers) is reported within it, not at the end of
// the caller's context, which may never come. Later reads retry until
// the context ends: etcd answered once, so an outage is presumed to pass.
const observeFirstWait = requestTimeout

// Observe is Election.Observe for a process that only watches the
// election named by prefix. It returns lockword.ErrNilContext for a nil
// context, an error wrapping ErrBadArgument for a nil client or a bad
// name, and, if the first read of the leader record fails within the
// context or 5 s (observeFirstWait), whichever ends first, an error
// naming the endpoints and wrapping the client's (for an endpoint that
// is not etcd, context.DeadlineExceeded or a transport error).
func Observe(ctx context.Context, cli *clientv3.Client, prefix string) (<-chan Term, error) {
	if err := checkClient(ctx, cli); err != nil {
		return nil, err
	}
	prefix, err := lockName(prefix)
	if err != nil {
		return nil, err
	}
	// The first read is made here, so that the stream starts at the
	// leader as of the call.
	rctx, cancel := context.WithTimeout(ctx, observeFirstWait)
	first, err := cli.Get(rctx, prefix+leaderKey)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("no answer within %v (is it an etcd server?): %w", observeFirstWait, err)
		}
		return nil, fmt.Errorf("etcdlock: Observe %q: reading the leader record from %s: %w", prefix, strings.Join(cli.Endpoints(), ","), err)
	}
	ch := make(chan Term)
	go observe(ctx, cli, prefix, ch, first)
	return ch, nil
}

// observe feeds ch until ctx is done, starting with first (nil: not read
// yet). next is the first revision not yet looked at, 0 before the first
// read; gap marks the next record sent.
func observe(ctx context.Context, cli *clientv3.Client, prefix string, ch chan<- Term, first *clientv3.GetResponse) {
	defer close(ch)
	key := prefix + leaderKey
	var next int64
	gap := false
	pause := lockRetryMin
	send := func(kv *mvccKV) bool {
		t, err := parseTerm(prefix, kv)
		if err != nil {
			return true // not an Election's record: not a term
		}
		t.Gap, gap = gap, false
		select {
		case ch <- t:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		if next == 0 {
			r, err := first, error(nil)
			if first = nil; r == nil {
				r, err = cli.Get(ctx, key)
			}
			if err != nil {
				sleepCtx(ctx, pause)
				pause = min(2*pause, lockRetryMax)
				continue
			}
			if len(r.Kvs) == 1 && !send(r.Kvs[0]) {
				return
			}
			next = r.Header.Revision + 1
		}
		wctx, cancel := context.WithCancel(ctx)
		for wr := range cli.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithRev(next)) {
			if wr.CompactRevision != 0 {
				next, gap = 0, true // history gone: start again from now
				break
			}
			if wr.Err() != nil {
				break
			}
			pause = lockRetryMin
			for _, ev := range wr.Events {
				next = ev.Kv.ModRevision + 1
				if ev.Type == mvccpb.PUT && !send(ev.Kv) {
					cancel()
					return
				}
			}
		}
		cancel()
		sleepCtx(ctx, pause)
		pause = min(2*pause, lockRetryMax)
	}
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
