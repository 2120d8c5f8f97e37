package lockword

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync/atomic"
	"time"
)

// ErrWriterDead is returned (wrapped, with the SeqLock's name, region and
// the writer's PID) by LoadContext of a SeqLock in a region when the
// process that was storing a value died in the middle of the Store: the
// sequence was left odd and the value may be torn. The next Store, by any
// process, repairs it. Load panics with the same error.
var ErrWriterDead = errors.New("lockword: seqlock writer process died in the middle of a Store; the value is torn until the next Store")

// SeqLock object layout in a region (kind 7, 64-aligned, 72 + T's size
// rounded up to 8 bytes; see docs/abi.md).
const (
	seqObjWriter  = 0  // 64 bytes: the writers' robust lock, a SharedMutex object (kind 1 layout)
	seqObjSeq     = 64 // uint64: the sequence; odd while a Store is in progress
	seqObjPayload = 72 // T's bytes as 8-byte words, the last zero-padded
)

func init() {
	registerKind(kindSeqLock, &kindInfo{
		name: "seqlock", align: mutexObjSize,
		ownerWords: []uint32{seqObjWriter + mutexObjWord},
		// The writer lock's state: held while a Store is in progress,
		// owner-dead if its writer died in one.
		inspect: func(insp *inspector, obj []byte, info *ObjectInfo) {
			if len(obj) < seqObjPayload {
				return // too small to be one (RegionSeqLock refuses it): not a lock
			}
			inspectMutex(insp, obj[seqObjWriter:seqObjWriter+mutexObjSize], info)
			inspectSeqLock(obj, info)
		},
	})
}

// RegionSeqLock returns the SeqLock named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName) in region r,
// creating it, holding the zero T, if the region has no object of that
// name: a seqlock that every process mapping the region can Store to and
// Load from. T must hold no pointers (ErrHasPointers), and every process
// must use the same T: the object records only T's size, and a T of
// another size fails with ErrObjectBounds. Other errors: ErrObjectKind,
// ErrObjectName, ErrRegionFull, ErrRegionClosed, ErrUnsupported off Linux.
//
// The object is the writers' robust lock (64 bytes, a SharedMutex), the
// 8-byte sequence, and T's bytes as 8-byte words; all zero is the zero T,
// unlocked. Stores from every process are serialized by the lock, which
// also names the writer, so that readers can report a writer that died in
// the middle of a Store (ErrWriterDead: see SeqLock) rather than spin for
// ever. The SeqLock must not be used after r is closed.
func RegionSeqLock[T any](r *Region, name string) (*SeqLock[T], error) {
	t := reflect.TypeFor[T]()
	if err := checkPlainData(t, "RegionSeqLock"); err != nil {
		return nil, err
	}
	words := (uint64(t.Size()) + 7) / 8
	size := seqObjPayload + 8*words
	if size > math.MaxUint32 {
		return nil, fmt.Errorf("%w: RegionSeqLock[%v] %q: %d bytes, at most %d", ErrObjectBounds, t, name, size, uint32(math.MaxUint32))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, err := r.object(name, kindSeqLock, uint32(size))
	if err != nil {
		return nil, err
	}
	if uint64(o.size) != size {
		return nil, fmt.Errorf("%w: seqlock %q exists with %d bytes of value, %v needs %d",
			ErrObjectBounds, name, int64(o.size)-seqObjPayload, t, 8*words)
	}
	obj := r.data[o.offset : o.offset+size : o.offset+size]
	return &SeqLock[T]{
		seq:    word64(obj, seqObjSeq),
		words:  words64(obj, seqObjPayload, int(words)),
		writer: newSharedMutex(r, name, obj[seqObjWriter:seqObjWriter+mutexObjSize]),
	}, nil
}

// beginSharedWrite takes the writers' lock of a SeqLock in a region, makes
// the sequence odd, and returns its even value before the Store.
func beginSharedWrite(seq *atomic.Uint64, w *SharedMutex) uint64 {
	if err := w.LockContext(context.Background()); err != nil {
		if !errors.Is(err, ErrOwnerDead) {
			// Not recoverable: only possible if the lock word was
			// written by something other than this package.
			panic(fmt.Errorf("%w (the writers' lock of SeqLock %q)", err, w.name))
		}
		// The previous writer died holding the lock, perhaps in the
		// middle of a Store. This Store rewrites every word of the
		// value, which is the repair; should it die too, the next
		// writer is told again (it will hold the lock when it dies).
		w.MarkConsistent()
	}
	q := seq.Load()
	if q&1 != 0 {
		// Left odd by the dead writer: it stays odd, so readers keep
		// retrying, until this Store makes it even.
		return q - 1
	}
	seq.Store(q + 1)
	return q
}

// seqStalled is called by a reader that has found a Store in progress (odd
// sequence seq) on every retry past its spin. It returns ctx's error if ctx
// is done and, for a SeqLock in a region (w non-nil), checks at most every
// ownerCheckInterval whether the writer holding w still lives: if not, and
// the sequence is still seq, the writer died mid-Store. *since is when the
// reader began waiting, or last checked.
func seqStalled(ctx context.Context, seqWord *atomic.Uint64, seq uint64, w *SharedMutex, since *time.Time) error {
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if w == nil {
		return nil
	}
	now := time.Now()
	if since.IsZero() {
		*since = now // a writer we outwaited by spinning is alive
		return nil
	}
	if now.Sub(*since) < ownerCheckInterval {
		return nil
	}
	*since = now
	pid := uint32(0)
	if owner := w.word.Load() & ownerMask; owner != 0 && owner != ownerNotRecoverable {
		var alive bool
		if alive, pid = w.r.tokenAlive(owner); alive {
			return nil // however slow: a live writer is waited for
		}
	}
	if seqWord.Load() != seq {
		return nil // that Store ended (or was taken over): read again
	}
	return fmt.Errorf("%w (seqlock %q in %s, writer PID %s)", ErrWriterDead, w.name, w.r.path, pidText(pid))
}

// inspectSeqLock adds a region SeqLock's sequence to info, which
// inspectMutex has filled from the writers' lock.
func inspectSeqLock(obj []byte, info *ObjectInfo) {
	seq := word64(obj, seqObjSeq).Load()
	writing := seq%2 == 1
	info.SeqLock = &SeqLockInfo{Sequence: seq, Stores: seq / 2, Writing: writing,
		Torn: writing && info.State == "owner-dead" && !info.HolderAlive}
}
