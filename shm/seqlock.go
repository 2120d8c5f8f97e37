package shm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/seqcore"
)

// ErrWriterDead is returned (wrapped, with the SeqLock's name, region and
// the writer's PID) by LoadContext of a SeqLock in a region when the
// process that was storing a value died in the middle of the Store: the
// sequence was left odd and the value may be torn. The next Store, by any
// process, repairs it. Load panics with the same error.
var ErrWriterDead = errors.New("lockword: seqlock writer process died in the middle of a Store; the value is torn until the next Store")

// A SeqLock is lockword.SeqLock in a region: a value of plain data T that
// one writer at a time updates and any number of readers, in any process
// mapping the region, read without blocking the writer (the sequence lock
// of Christoph Lameter, 2005, with the payload copied through atomic word
// loads and stores; see lockword.SeqLock for the sequence's states and the
// memory-model guarantee).
//
// Stores of every process are serialized by a robust writer lock (a Mutex)
// instead of the CAS, so that the writer is known: a reader that finds a
// Store in progress for longer than ownerCheckInterval (10 ms) checks
// whether the writer's process still lives. If it died in the middle of a
// Store, leaving the sequence odd and the value torn, LoadContext returns
// an error wrapping ErrWriterDead (and Load panics with it) instead of
// spinning for ever; a live writer, however slow, is waited for. The next
// Store, from any process, takes the writer lock over from the dead writer
// and rewrites every word, which repairs the value; readers then go on.
//
// A SeqLock must be created with NewSeqLock and must not be copied.
type SeqLock[T any] struct {
	_ noCopy
	c seqcore.Core[T] // the sequence word and T's words, in the mapping
	r *Region
	// name is the object's name, for the use-after-Close panic.
	name string
}

// Store makes v the value of s. Concurrent Stores, from any process, are
// serialized (a second one waits until the first is done); a Store whose
// writer died before it ended is taken over and completed.
func (s *SeqLock[T]) Store(v T) {
	s.r.checkOpen("shm.SeqLock", s.name, "Store")
	s.c.Store(v)
}

// Load returns the value of s: the value of the latest Store that
// completed before Load began, or of one that overlapped it; never a mix.
// If the writer process died in the middle of a Store, it panics with an
// error wrapping ErrWriterDead (use LoadContext to handle that case).
func (s *SeqLock[T]) Load() T {
	s.r.checkOpen("shm.SeqLock", s.name, "Load")
	v, err := s.c.Load(nil)
	if err != nil {
		panic(err)
	}
	return v
}

// LoadContext is Load for readers that must not wait for ever: it returns
// the value, or an error and the zero value when a Store has stayed in
// progress and ctx ended (ctx.Err()), or its writer process died in the
// middle of the Store (an error wrapping ErrWriterDead; the next Store
// repairs the value). Either is noticed only after the reader has spun
// through its backoff, so a done ctx does not stop a Load that can
// complete. A nil ctx returns lockword.ErrNilContext.
func (s *SeqLock[T]) LoadContext(ctx context.Context) (T, error) {
	if ctx == nil {
		var zero T
		return zero, lockword.ErrNilContext
	}
	if err := s.r.errClosed("shm.SeqLock", s.name, "LoadContext"); err != nil {
		var zero T
		return zero, err
	}
	return s.c.Load(ctx)
}

// seqWriter is a SeqLock's writers' lock, as the core's Writer.
type seqWriter struct{ m *Mutex }

func (w seqWriter) BeginWrite(seq *atomic.Uint64) uint64 { return beginSharedWrite(seq, w.m) }
func (w seqWriter) Unlock()                              { w.m.Unlock() }
func (w seqWriter) Stalled(ctx context.Context, seqWord *atomic.Uint64, seq uint64, since *time.Time) error {
	return seqStalled(ctx, seqWord, seq, w.m, since)
}

// SeqLock object layout in a region (kind 7, 64-aligned, 72 + T's size
// rounded up to 8 bytes; see docs/abi.md).
const (
	seqObjWriter  = 0  // 64 bytes: the writers' robust lock, a Mutex object (kind 1 layout)
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
				return // too small to be one (NewSeqLock refuses it): not a lock
			}
			inspectMutex(insp, obj[seqObjWriter:seqObjWriter+mutexObjSize], info)
			inspectSeqLock(obj, info)
		},
	})
}

// NewSeqLock returns the SeqLock named name (1 to 48 bytes of UTF-8 without control characters, else ErrObjectName) in region r,
// creating it, holding the zero T, if the region has no object of that
// name: a seqlock that every process mapping the region can Store to and
// Load from. T must hold no pointers (ErrHasPointers), and every process
// must use the same T: the object records only T's size, and a T of
// another size fails with ErrObjectBounds. Other errors: ErrObjectKind,
// ErrObjectName, ErrRegionFull, ErrRegionClosed, ErrUnsupported off Linux.
//
// The object is the writers' robust lock (64 bytes, a Mutex), the
// 8-byte sequence, and T's bytes as 8-byte words; all zero is the zero T,
// unlocked. Stores from every process are serialized by the lock, which
// also names the writer, so that readers can report a writer that died in
// the middle of a Store (ErrWriterDead: see SeqLock) rather than spin for
// ever. The SeqLock must not be used after r is closed.
func NewSeqLock[T any](r *Region, name string) (*SeqLock[T], error) {
	t := reflect.TypeFor[T]()
	if err := seqcore.CheckNoPointers(t, "shm.SeqLock", "a seqlock copies its value as raw memory words", lockword.ErrHasPointers); err != nil {
		return nil, err
	}
	words := (uint64(t.Size()) + 7) / 8
	size := seqObjPayload + 8*words
	if size > math.MaxUint32 {
		return nil, fmt.Errorf("%w: shm.SeqLock[%v] %q: %d bytes, at most %d", ErrObjectBounds, t, name, size, uint32(math.MaxUint32))
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
	return &SeqLock[T]{c: seqcore.Core[T]{
		Seq:    word64(obj, seqObjSeq),
		Words:  words64(obj, seqObjPayload, int(words)),
		Writer: seqWriter{newSharedMutex(r, name, obj[seqObjWriter:seqObjWriter+mutexObjSize])},
	}, r: r, name: name}, nil
}

// beginSharedWrite takes the writers' lock of a SeqLock in a region, makes
// the sequence odd, and returns its even value before the Store.
func beginSharedWrite(seq *atomic.Uint64, w *Mutex) uint64 {
	if err := w.LockContext(context.Background()); err != nil {
		if !errors.Is(err, lockword.ErrOwnerDead) {
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
func seqStalled(ctx context.Context, seqWord *atomic.Uint64, seq uint64, w *Mutex, since *time.Time) error {
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
