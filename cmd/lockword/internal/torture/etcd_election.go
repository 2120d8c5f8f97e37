package torture

// The etcd-election kinds: etcdlock.Election between in-process workers,
// each with its own Election (its own lease), watched by observers, while
// the supervisor deposes leaders by revoking their lease under them: what
// a pause past the TTL or a partition does to a leader, which goes on
// believing it leads. Every term's leader writes a term record and a few
// data records; the checks are read back from etcd:
//
//   - one leader per term: a term record is created once (a second one
//     for the same token, or a leader record with another lease, fails);
//   - tokens strictly increase, in the order etcd committed the terms;
//   - a deposed leader's late writes are all refused: the data records,
//     in commit order, carry non-decreasing tokens (a write of an earlier
//     term after a later term's is a late write that landed);
//   - every observer saw every leader record of P/leader's history, once,
//     in order, with no gap.
//
// etcd-election-unfenced writes the data records with plain puts: its
// deposed leaders' writes land after their successors', and the run
// must FAIL.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// electionDefaultTerms is the terms per worker of a run without
	// -iters; electionWrites the data records each leader writes, one per
	// electionWindow, during which it may be deposed.
	electionDefaultTerms = 6
	electionWrites       = 6
	electionWindow       = 8 * time.Millisecond
	// electionObservers watch the election in every run; a deposition
	// targets every electionDeposeEvery'th term.
	electionObservers   = 3
	electionDeposeEvery = 3
)

// electionRun is one run of an etcd-election kind.
type electionRun struct {
	cfg    *config
	cli    *clientv3.Client
	data   string // the run's key prefix
	fenced bool
	target int64        // terms to run in all
	terms  atomic.Int64 // terms ended so far
	stop   atomic.Bool

	window time.Duration // between a leader's data records: electionWindow, or longer across processes

	mu   sync.Mutex
	x    electionExtra
	errs []string
}

func (r *electionRun) election() string { return r.data + "/election" }

func (r *electionRun) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func tortureElection(cfg *config, name string, fenced bool) (report, error) {
	env, err := startEtcdEnv(cfg)
	if err != nil {
		return nil, err
	}
	defer env.close()
	r := &electionRun{cfg: cfg, fenced: fenced, cli: env.cli, data: env.keys.data, window: electionWindow}
	r.x.Endpoints = env.endpoints
	startRev := env.startRev
	terms := cfg.iters
	if !cfg.etcd.itersSet {
		terms = electionDefaultTerms
	}
	r.target = int64(cfg.workers) * terms
	r.x.TTLSeconds = cfg.etcd.ttl.Seconds()

	octx, stopObservers := context.WithCancel(context.Background())
	defer stopObservers()
	obs := make([]*electionObserver, electionObservers)
	for i := range obs {
		ch, err := etcdlock.Observe(octx, r.cli, r.election())
		if err != nil {
			return nil, err
		}
		obs[i] = &electionObserver{}
		go obs[i].run(ch)
	}
	start := time.Now()
	if cfg.procs > 0 {
		if err := r.runProcs(env); err != nil {
			return nil, err
		}
	} else {
		var wg sync.WaitGroup
		for id := 1; id <= cfg.workers; id++ {
			wg.Go(func() { r.worker(id) })
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		r.deposeLoop(done)
	}
	elapsed := time.Since(start)
	r.check(startRev, obs)
	stopObservers()
	return &electionReport{name: name, workers: cfg.workers, elapsed: elapsed, x: r.x}, nil
}

// deposeLoop revokes the lease of every electionDeposeEvery'th term's
// leader at a random moment of its term, until the workers are done; it
// stops them when a run makes no progress for hangTimeout.
func (r *electionRun) deposeLoop(done <-chan struct{}) {
	var seen, seenTerms int64
	last, lastAt := int64(-1), time.Now()
	for {
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if n := r.terms.Load(); n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > hangTimeout+r.cfg.etcd.ttl {
			r.mu.Lock()
			r.x.Hangs++
			r.mu.Unlock()
			r.stop.Store(true)
			<-done
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		t, err := etcdlock.Leader(ctx, r.cli, r.election())
		cancel()
		if err != nil || t.Token <= seen {
			continue
		}
		seen = t.Token
		if seenTerms++; seenTerms%electionDeposeEvery != 1 {
			continue
		}
		time.Sleep(rand.N(electionWrites * electionWindow / 2))
		ctx, cancel = context.WithTimeout(context.Background(), etcdOpTimeout)
		_, err = r.cli.Revoke(ctx, clientv3.LeaseID(t.Leader.Lease))
		cancel()
		if err == nil {
			r.mu.Lock()
			r.x.Depositions++
			r.mu.Unlock()
		}
	}
}

// worker campaigns until the run has its terms, making a new Election
// whenever its lease is lost (deposed).
func (r *electionRun) worker(id int) {
	for !r.stop.Load() && r.terms.Load() < r.target {
		ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
		e, err := etcdlock.NewElection(ctx, r.cli, r.election(), &etcdlock.Options{TTL: r.cfg.etcd.ttl})
		cancel()
		if err != nil {
			r.fail("worker %d: NewElection: %v", id, err)
			return
		}
		for !r.stop.Load() && r.terms.Load() < r.target {
			if !r.term(id, e) {
				break // lost: a new Election
			}
		}
		e.Close()
	}
}

// term campaigns once and leads one term; it reports false when e's lease
// is lost.
func (r *electionRun) term(id int, e *etcdlock.Election) bool {
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	err := e.Campaign(ctx, fmt.Sprint(id))
	switch {
	case errors.Is(err, lockword.ErrOwnerDead):
		// Counted from the history (check): a process may die before
		// its end, with nothing to report then.
		r.cli.Put(ctx, fmt.Sprintf("%s/ownerdead/%020d", r.data, e.Token()), fmt.Sprint(id))
	case errors.Is(err, etcdlock.ErrLeaseLost), errors.Is(err, etcdlock.ErrNotHolder):
		return false
	case errors.Is(err, context.DeadlineExceeded):
		return true // the run may be ending: look again
	case err != nil:
		r.fail("worker %d: Campaign: %v", id, err)
		return false
	}
	tok := e.Token()
	termKey := fmt.Sprintf("%s/terms/%020d", r.data, tok)
	resp, err := r.cli.Txn(ctx).If(e.Guard(), clientv3.Compare(clientv3.Version(termKey), "=", 0)).
		Then(clientv3.OpPut(termKey, fmt.Sprint(id))).Else(clientv3.OpGet(termKey)).Commit()
	if err == nil && !resp.Succeeded && len(resp.Responses[0].GetResponseRange().Kvs) > 0 {
		r.fail("term %d: worker %d elected, but worker %s had the term record already", tok, id, resp.Responses[0].GetResponseRange().Kvs[0].Value)
	}
	for i := range electionWrites {
		time.Sleep(r.window)
		op := clientv3.OpPut(fmt.Sprintf("%s/writes/%020d-%d-%d", r.data, tok, id, i), fmt.Sprint(tok))
		if r.fenced {
			_, err = e.Txn(ctx, op)
		} else {
			_, err = r.cli.Do(ctx, op)
		}
		if errors.Is(err, etcdlock.ErrNotHolder) {
			r.cli.Put(ctx, fmt.Sprintf("%s/rejected/%020d-%d-%d", r.data, tok, id, i), "1") // counted by check
			break
		}
	}
	r.terms.Add(1)
	if err := e.Resign(ctx); err != nil {
		return false // deposed: its lease is gone
	}
	return true
}

// An electionObserver records what one Observe channel sent.
type electionObserver struct {
	mu  sync.Mutex
	got []etcdlock.Term
}

func (o *electionObserver) run(ch <-chan etcdlock.Term) {
	for t := range ch {
		o.mu.Lock()
		o.got = append(o.got, t)
		o.mu.Unlock()
	}
}

func (o *electionObserver) seen() []etcdlock.Term {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]etcdlock.Term(nil), o.got...)
}
