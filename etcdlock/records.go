package etcdlock

// The records a lock keeps in etcd (see Mutex, "Records"), their names,
// their JSON, and the checks that tell a record some valid history wrote
// from one that none did (ErrCorrupt).

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lockword/lockword"
)

// Defaults and bounds.
const (
	// DefaultTTL is the lease TTL of a Mutex whose Options give none: a
	// holder that dies is detected after at most about this long.
	DefaultTTL = 5 * time.Second
	// MaxTTL is the largest TTL NewMutex accepts: etcd's own limit on a
	// lease (9,000,000,000 s).
	MaxTTL = 9_000_000_000 * time.Second
)

// States of the hold record (ownerRecord.State).
const (
	stateHeld           = "held"
	stateInconsistent   = "inconsistent"
	stateNotRecoverable = "not-recoverable"
)

// Key names below a lock's prefix P. reservedNames are the path elements
// a lock name may not contain: a lock P/queue/... or P/fence/... would
// write its records among P's.
const (
	queueDir = "/queue/"
	fenceDir = "/fence/"
	ownerKey = "/owner"
)

var reservedNames = []string{"queue", "fence"}

// The calls of every type return ErrNotHolder and ErrLeaseLost wrapped,
// naming the lock by its prefix and SetName's name: test with errors.Is.
var (
	// ErrNotHolder is returned by a guarded write (Txn, Put), by
	// UnlockContext and by MarkConsistent when this Mutex no longer holds
	// the lock, or never did: its lease expired while it held (a pause, a
	// partition), it was unlocked, or it was never locked. The write was
	// not made.
	ErrNotHolder = errors.New("etcdlock: not the lock's holder (never locked, unlocked, or the lease expired); nothing was written")
	// ErrLeaseLost is returned (wrapped, naming the kind: "the
	// Semaphore's lease is lost") by the calls of a Mutex, Semaphore,
	// RWMutex, Election or Session whose lease has expired or was revoked
	// (Lost is closed): it can never lock again. Make a new one.
	ErrLeaseLost = errors.New("etcdlock: the lease is lost (expired or revoked)")
	// ErrBadArgument is returned (wrapped, naming the argument) by
	// NewMutex, Inspect and Peek for a nil client, a TTL out of range or
	// a lock name that is empty or contains a reserved element.
	ErrBadArgument = errors.New("etcdlock: invalid argument")
)

// lockName returns the normalised name of the lock named prefix: without
// trailing slashes, so that "/p" and "/p/" are one lock. It refuses an
// empty name and one with a path element "queue" or "fence", whose
// records would lie among another lock's.
func lockName(prefix string) (string, error) {
	p := strings.TrimRight(prefix, "/")
	if p == "" {
		return "", fmt.Errorf("%w: empty lock name %q", ErrBadArgument, prefix)
	}
	for _, elem := range strings.Split(p, "/") {
		for _, r := range reservedNames {
			if elem == r {
				return "", fmt.Errorf("%w: lock name %q contains %q, which names the records of another lock", ErrBadArgument, prefix, r)
			}
		}
	}
	return p, nil
}

// Holder identifies a Mutex's process to others: it is stored with every
// queued acquisition (not with the fast path's key: the record written
// with it names the holder) and in the hold record, for stuck reports,
// owner-dead errors and lockword inspect.
type Holder struct {
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	Lease int64  `json:"lease"` // the etcd lease ID
}

func (h Holder) String() string {
	return fmt.Sprintf("host %s, PID %d, lease %s", h.Host, h.PID, leaseText(h.Lease))
}

// leaseText formats a lease ID as etcdctl does (hex).
func leaseText(id int64) string { return fmt.Sprintf("%x", id) }

// ownerRecord is the hold record, stored without a lease at P/owner. Its
// JSON is part of the format other processes read (see Mutex).
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

// token is the fencing token of the hold a record describes, whose own
// create revision is createRev.
func (r *ownerRecord) token(createRev int64) int64 {
	if r.Token != 0 {
		return r.Token
	}
	return createRev
}

// parseRecord decodes a hold record; the error says why no valid history
// wrote it.
func parseRecord(b []byte) (ownerRecord, error) {
	var r ownerRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("not a hold record: %v", err)
	}
	switch r.State {
	case stateHeld, stateInconsistent:
		if r.Key == "" {
			return r, fmt.Errorf("state %q without a holder key", r.State)
		}
	case stateNotRecoverable:
	default:
		return r, fmt.Errorf("unknown state %q", r.State)
	}
	return r, nil
}

// queueKeyName returns the queue key of a Mutex with the lease and nonce:
// P/queue/<lease, 16 hex digits>-<nonce, 8 hex digits>.
func queueKeyName(prefix string, lease int64, nonce [4]byte) string {
	return fmt.Sprintf("%s%s%016x-%s", prefix, queueDir, lease, hex.EncodeToString(nonce[:]))
}

// newQueueKey names the queue key of a new Mutex or Semaphore under
// prefix on lease, with a random nonce (two handles on one Session's lease
// must not share a key), and returns the Holder others see of it.
func newQueueKey(prefix string, lease int64) (string, Holder) {
	host, _ := os.Hostname()
	var nonce [4]byte
	rand.Read(nonce[:])
	return queueKeyName(prefix, lease, nonce), Holder{Host: host, PID: os.Getpid(), Lease: lease}
}

// checkQueueKey says why the queue key key, attached to lease, is one that
// no Mutex writes (nil if it could be a Mutex's): every Mutex names its key
// after its lease and attaches that lease, so a key without one (written
// by hand, say) would block every acquirer for ever.
func checkQueueKey(prefix, key string, lease int64) error {
	name, ok := strings.CutPrefix(key, prefix+queueDir)
	id, nonce, ok2 := strings.Cut(name, "-")
	if !ok || !ok2 || len(id) != 16 || len(nonce) != 8 {
		return fmt.Errorf("queue key %s is not named as a Mutex names its key", key)
	}
	if _, err := hex.DecodeString(nonce); err != nil {
		return fmt.Errorf("queue key %s is not named as a Mutex names its key", key)
	}
	named, err := strconv.ParseUint(id, 16, 64)
	if err != nil {
		return fmt.Errorf("queue key %s is not named as a Mutex names its key", key)
	}
	if lease == 0 {
		return fmt.Errorf("queue key %s has no lease: it would never expire", key)
	}
	if int64(named) != lease {
		return fmt.Errorf("queue key %s is attached to lease %s, not the one it names", key, leaseText(lease))
	}
	return nil
}

// corrupt returns the ErrCorrupt error of the lock at prefix.
func corrupt(prefix string, reason error) error {
	return &lockword.CorruptError{Kind: "etcdlock.Mutex", Object: prefix, Region: "etcd", Reason: reason.Error() + "; no valid history writes it (Reinitialize removes it)"}
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
	// elected: an Election's Campaign returns it, having marked the lock
	// consistent itself; its text must not ask for MarkConsistent.
	elected bool
}

// Error names the lock and the dead holder.
func (e *OwnerDeadError) Error() string {
	if e.elected {
		return fmt.Sprintf("etcdlock: the previous leader's term ended with its lease, not by Resign (etcd election %q; previous leader %v): this Campaign won and leads; check what that leader left half done",
			e.Lock, e.Dead)
	}
	return fmt.Sprintf("%v (etcd lock %q; previous holder %v)", lockword.ErrOwnerDead, e.Lock, e.Dead)
}

// Is reports whether target is lockword.ErrOwnerDead.
func (e *OwnerDeadError) Is(target error) bool { return target == lockword.ErrOwnerDead }
