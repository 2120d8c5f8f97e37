package etcdlock

// What a Mutex and a Semaphore share: each is one queue key on one lease,
// its calls serialized by a gate, and a failed call's clean-up runs in
// the background when the caller's deadline leaves no time for it (see
// Mutex, "Calls that fail"). The handle holds that lease, gate and
// background work, and the steps both take with them.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// A handle is the lease, the gate and the background clean-ups of one
// Mutex or Semaphore.
type handle struct {
	sess       *Session      // the lease
	ownSession bool          // sess is the value's alone: Close revokes it
	ttl        time.Duration // granted
	log        *slog.Logger
	typeName   string                 // "Mutex", "Semaphore": what a lost lease's error names
	kind       string                 // the log attribute naming the value: "lock", "semaphore"
	prefix     string                 // the value's lock name, normalised
	named      atomic.Pointer[string] // SetName's; nil: none
	closing    chan struct{}          // closed by Close on a shared Session
	closeOnce  sync.Once
	lost       chan struct{} // closed when the lease is lost or Close ran

	// gate serializes the value's goroutines: one queue key per value.
	// A hold, or a failed attempt's background clean-up (or Unlock's),
	// keeps it until done.
	gate lockword.Mutex
	bg   sync.WaitGroup // background clean-ups and unlocks
}

// init makes h the handle of a value of type typeName ("Mutex",
// "Semaphore") on sess, logged as kind (the log attribute: "lock",
// "semaphore") with its prefix, and closes lost when the lease is lost or
// Close begins.
func (h *handle) init(sess *Session, own bool, log *slog.Logger, typeName, kind, prefix string) {
	h.sess, h.ownSession, h.ttl, h.log = sess, own, sess.ttl, log
	h.typeName = typeName
	h.kind, h.prefix = kind, prefix
	h.closing, h.lost = make(chan struct{}), make(chan struct{})
	h.gate.SetStuckThreshold(-1) // the value reports, naming the holder
	go func() {
		select {
		case <-sess.done:
		case <-h.closing:
		}
		close(h.lost)
	}()
}

// closeWait is Close's first step, within ctx: on a lease of its own, the
// value is lost first (a waiting call gives up and cleans up); then it
// waits for the background clean-ups, logging one still running at the
// deadline (the lease's end ends it).
func (h *handle) closeWait(ctx context.Context) {
	if !h.ownSession {
		h.closeOnce.Do(func() { close(h.closing) })
		<-h.lost
	}
	idle := make(chan struct{})
	go func() { h.bg.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-ctx.Done():
		h.log.Warn("etcdlock: Close: a clean-up is still running; the lease's end ends it", h.logAttrs()...)
	}
}

// abandon ends a failed attempt and lets the value's next call in: at
// once if the attempt sent nothing, after fence (which removes what it
// wrote and fences what may still land) otherwise. fence is tried within
// ctx if it has time left; else, or if that try fails, it is retried in
// the background for one TTL, keeping the gate, and if etcd still cannot
// be told the lease is given up (giveUp).
func (h *handle) abandon(ctx context.Context, sent bool, fence func(context.Context) error) {
	if !sent {
		h.gate.Unlock()
		return
	}
	if ctx.Err() == nil && fence(ctx) == nil {
		h.gate.Unlock()
		return
	}
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		if err := h.retry(fence); err != nil {
			h.giveUp("could not clean up after a failed acquisition", err)
		}
		h.gate.Unlock()
	}()
}

// leaseGone reports whether h's lease has ended, for a fence comparison
// that failed: the fence key is on the lease and goes with it, so its
// version changed without another writer. Lost closes only at the first
// keep-alive after the end (up to a third of the TTL later); until then
// the server is asked. It returns the client's error if etcd cannot say.
func (h *handle) leaseGone(ctx context.Context) (bool, error) {
	if isClosed(h.lost) {
		return true, nil
	}
	r, err := h.sess.cli.TimeToLive(ctx, h.sess.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return r.TTL <= 0, nil
}

// retry calls try until it succeeds, for one lease TTL, each try bounded
// by requestTimeout, with a pause doubling from lockRetryMin to
// lockRetryMax between tries; it returns the last error if the TTL ran
// out first.
func (h *handle) retry(try func(context.Context) error) error {
	deadline := time.Now().Add(h.ttl)
	pause := lockRetryMin
	for {
		ctx, cancel := tryContext(deadline)
		err := try(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, lockRetryMax)
	}
}

// tryContext bounds one try of a background retry: requestTimeout, and
// not past the retries' deadline.
func tryContext(deadline time.Time) (context.Context, context.CancelFunc) {
	if d := time.Now().Add(requestTimeout); d.Before(deadline) {
		deadline = d
	}
	return context.WithDeadline(context.Background(), deadline)
}

// giveUp ends the lease because etcd could not be told what it must know
// (a clean-up, an unlock) within one TTL: it stops the keep-alive and
// revokes the lease (if etcd is still unreachable, the lease expires
// within a TTL), so that the value's keys go with it; the value is lost
// (ErrLeaseLost), and so is every other on its Session.
func (h *handle) giveUp(what string, err error) {
	h.log.Warn("etcdlock: "+what+" within the lease TTL; giving the lease up, which removes its keys (and ends its Session's other locks)", append(h.logAttrs(), "err", err)...)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	h.sess.revoke(ctx)
	select {
	case <-h.lost:
	case <-ctx.Done():
	}
}

// leaseLostError is ErrLeaseLost as a Mutex or a Semaphore returns it: the
// sentinel is shared by every kind, so the message names the one whose
// lease is gone and what to make instead.
type leaseLostError struct {
	typeName string
	err      error // ErrLeaseLost, or an error wrapping it with the server's reason
}

func (e *leaseLostError) Error() string {
	msg := "etcdlock: the " + e.typeName + "'s lease is lost (expired or revoked); make a new " + e.typeName
	if e.err != ErrLeaseLost {
		msg += " (" + e.err.Error() + ")"
	}
	return msg
}

func (e *leaseLostError) Unwrap() error { return e.err }

// typedErr returns err, naming h's type if err is ErrLeaseLost: every public
// call of a Mutex or a Semaphore returns its errors through it.
func (h *handle) typedErr(err error) error {
	var named *leaseLostError
	if err == nil || !errors.Is(err, ErrLeaseLost) || errors.As(err, &named) {
		return err
	}
	return &leaseLostError{typeName: h.typeName, err: err}
}

// setName and nameOr are SetName and Name of every etcdlock type (see
// Mutex.SetName).
func (h *handle) setName(name string) { h.named.Store(&name) }

func (h *handle) nameOr() string {
	if n := h.named.Load(); n != nil {
		return *n
	}
	return h.prefix
}

// logAttrs are the attributes that name the value in a log line: kind,
// prefix, and "name" if SetName gave one.
func (h *handle) logAttrs() []any {
	if n := h.named.Load(); n != nil {
		return []any{h.kind, h.prefix, "name", *n}
	}
	return []any{h.kind, h.prefix}
}

// A namedError is ErrNotHolder or ErrLeaseLost (or an error wrapping
// one) as a public call returns it: the sentinels are shared by every
// value, so the text adds which one (what), as log lines do. errors.Is
// sees through it.
type namedError struct {
	err  error
	what string // h.label()
}

func (e *namedError) Error() string { return e.err.Error() + " (" + e.what + ")" }

func (e *namedError) Unwrap() error { return e.err }

// nameErr returns err naming h's value if it is ErrNotHolder or
// ErrLeaseLost and names none yet (a lost lease is first named as h's
// type's, typedErr); other errors are returned as they are
// (a CorruptError names its key, the context's and the client's errors
// are theirs).
func (h *handle) nameErr(err error) error {
	err = h.typedErr(err)
	var named *namedError
	if err == nil || errors.As(err, &named) || !(errors.Is(err, ErrNotHolder) || errors.Is(err, ErrLeaseLost)) {
		return err
	}
	return &namedError{err: err, what: h.label()}
}

// label names h's value in an error: its kind and prefix, and the name
// SetName gave, if any.
func (h *handle) label() string {
	if n := h.named.Load(); n != nil {
		return fmt.Sprintf("etcd %s %q named %q", h.kind, h.prefix, *n)
	}
	return fmt.Sprintf("etcd %s %q", h.kind, h.prefix)
}
