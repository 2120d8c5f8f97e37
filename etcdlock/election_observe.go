package etcdlock

// Observe: the stream of an election's leader records.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Observe returns a channel of the election's leader records: the current
// one as of the call first (if there is a leader; Observe reads it before
// it returns), then each one written after it, in
// the order etcd committed them, until ctx is done (then the channel is
// closed). A new term gives a Term with a higher Token than any before; a
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
// Observe returns an error, and no channel, if its first read fails: see
// the package-level Observe.
func (e *Election) Observe(ctx context.Context) (<-chan Term, error) {
	return Observe(ctx, e.m.cli, e.m.prefix)
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
