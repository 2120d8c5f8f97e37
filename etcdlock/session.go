package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// SessionOptions configure a Session. The zero value (or nil) is the
// default.
type SessionOptions struct {
	// TTL of the lease, as Options.TTL: 0 means DefaultTTL; more than
	// MaxTTL is refused. It must be 0 with Lease.
	TTL time.Duration
	// Lease, if not 0, is an existing lease for the Session to adopt and
	// keep alive (another Session's, or one granted by the caller for
	// keys of its own) instead of granting a new one; its TTL is the one
	// it was granted with. Close revokes it all the same, with every key
	// attached to it.
	Lease clientv3.LeaseID
}

// A Session is one etcd lease, kept alive in the background, that many
// Mutexes share (Options.Session), as etcd's concurrency.Session: the
// client sends one keep-alive per session every third of its TTL instead
// of one per Mutex. The Mutexes on a Session live and die together:
//
//   - When the lease is lost (it expired: the process was paused or cut
//     off from etcd longer than the TTL; it was revoked, by Close or by
//     anyone), Done is closed, and so is Lost of every Mutex on it; their
//     queue keys went with the lease, so their guarded writes fail with
//     ErrNotHolder, and the next acquirer of each lock one of them held
//     gets ErrOwnerDead. A Mutex on it that cannot tell etcd of a failed
//     call's clean-up or of an unlock within a TTL gives the lease up (see
//     Mutex, "Calls that fail"): that too ends every Mutex on the Session.
//   - Close revokes the lease: the locks held on it are not unlocked but
//     lost, and reported to their next holders as owner deaths, exactly
//     as if the process had died. Only the holder knows whether its
//     critical section finished; a Session that unlocked on Close would
//     let the next holder read half-written data as consistent. Unlock
//     (or Close) each Mutex first for a clean end.
//
// Get one with NewSession. Its methods are safe for concurrent use.
type Session struct {
	cli  *clientv3.Client
	id   clientv3.LeaseID
	ttl  time.Duration // granted
	stop context.CancelFunc
	done chan struct{} // closed when the lease is lost or Close stopped keeping it
}

// NewSession grants a lease of opts.TTL (or adopts opts.Lease) and keeps it
// alive until Close. It returns an error wrapping ErrBadArgument for a nil
// client, a TTL below 0 or above MaxTTL, or a TTL given with Lease; one
// wrapping ErrLeaseLost if Lease is not (or no longer) a lease; and the
// client's error if etcd cannot be reached.
func NewSession(ctx context.Context, cli *clientv3.Client, opts *SessionOptions) (*Session, error) {
	if err := checkClient(ctx, cli); err != nil {
		return nil, err
	}
	var o SessionOptions
	if opts != nil {
		o = *opts
	}
	if o.Lease != 0 {
		if o.TTL != 0 {
			return nil, fmt.Errorf("%w: a TTL (%v) given with a lease to adopt, which has its own", ErrBadArgument, o.TTL)
		}
		r, err := cli.TimeToLive(ctx, o.Lease)
		if err != nil {
			return nil, fmt.Errorf("etcdlock: reading lease %x: %w", int64(o.Lease), err)
		}
		if r.TTL <= 0 {
			return nil, fmt.Errorf("%w: lease %x does not exist", ErrLeaseLost, int64(o.Lease))
		}
		return startSession(cli, o.Lease, r.GrantedTTL)
	}
	return grantSession(ctx, cli, o.TTL)
}

// grantSession grants a lease of ttl (0: DefaultTTL) and keeps it alive.
func grantSession(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (*Session, error) {
	secs, err := ttlSeconds(ttl)
	if err != nil {
		return nil, err
	}
	g, err := cli.Grant(ctx, secs)
	if err != nil && ctx.Err() != nil {
		// The client retries an unreachable endpoint until the context
		// ends, and the error it returns then says only that: name where
		// it asked (the cause is in the client's own log).
		return nil, fmt.Errorf("etcdlock: granting a lease: %w (no answer from etcd at %s: is it up, and reachable from here?)",
			err, strings.Join(cli.Endpoints(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("etcdlock: granting a lease: %w", err)
	}
	return startSession(cli, g.ID, g.TTL)
}

// ttlSeconds checks a TTL option (0: DefaultTTL) and rounds it up to the
// whole seconds etcd grants.
func ttlSeconds(ttl time.Duration) (int64, error) {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < 0 || ttl > MaxTTL {
		return 0, fmt.Errorf("%w: TTL %v outside 0..%v", ErrBadArgument, ttl, MaxTTL)
	}
	return int64((ttl + time.Second - 1) / time.Second), nil
}

func startSession(cli *clientv3.Client, id clientv3.LeaseID, ttlSecs int64) (*Session, error) {
	kctx, stop := context.WithCancel(context.Background())
	ka, err := cli.KeepAlive(kctx, id)
	if err != nil {
		stop()
		return nil, fmt.Errorf("etcdlock: keeping the lease alive: %w", err)
	}
	s := &Session{cli: cli, id: id, ttl: time.Duration(ttlSecs) * time.Second, stop: stop, done: make(chan struct{})}
	go func() {
		// The channel closes when the lease is gone (expired, revoked)
		// or the keep-alive was stopped.
		for range ka {
		}
		close(s.done)
	}()
	return s, nil
}

// Lease returns the Session's lease, for keys of the caller's own that
// are to live exactly as long as it (clientv3.WithLease).
func (s *Session) Lease() clientv3.LeaseID { return s.id }

// TTL returns the lease TTL the server granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done returns a channel that is closed when the lease is lost (expired
// or revoked) or Close was called.
func (s *Session) Done() <-chan struct{} { return s.done }

// Close stops keeping the lease alive and revokes it, within closeTimeout
// (1 s): every Mutex on the Session is lost (see Session for what that
// does to the locks they held). It returns the client's error if the
// revocation failed; the lease then expires after its TTL, and the keys
// with it. A lease already gone (expired, or revoked by an earlier Close)
// is not an error: Close returns nil.
func (s *Session) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return s.revoke(ctx)
}

func (s *Session) revoke(ctx context.Context) error {
	s.stop()
	_, err := s.cli.Revoke(ctx, s.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil // expired, or revoked by an earlier Close: nothing is left to revoke
	}
	return err
}

// optionsLease applies the defaults to opts (nil: the zero Options) and
// returns the lease a lock is to hold: a new one of opts.TTL (own), or
// opts.Session's. It refuses a TTL given with a Session (ErrBadArgument)
// and a Session whose lease is lost (ErrLeaseLost).
func optionsLease(ctx context.Context, cli *clientv3.Client, opts *Options) (o Options, sess *Session, own bool, err error) {
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	sess, own = o.Session, o.Session == nil
	switch {
	case own:
		sess, err = grantSession(ctx, cli, o.TTL)
	case o.TTL != 0:
		err = fmt.Errorf("%w: a TTL (%v) given with a Session, which has its own", ErrBadArgument, o.TTL)
	case isClosed(sess.done):
		err = ErrLeaseLost
	}
	return o, sess, own, err
}
