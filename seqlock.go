package lockword

import (
	"context"
	"errors"
	"github.com/lockword/lockword/internal/seqcore"
	"reflect"
	"sync/atomic"
)

// ErrHasPointers is returned (wrapped, with the offending field) by
// NewSeqLock, shm.NewSeqLock and shm.Value when T holds pointers: strings,
// slices, maps, interfaces, channels, functions or pointers anywhere
// inside it.
var ErrHasPointers = errors.New("lockword: type holds pointers")

// A SeqLock holds a value of plain data T that one writer updates and any
// number of readers read without ever blocking the writer: the sequence lock
// of Christoph Lameter ("Effective synchronization on Linux/NUMA systems",
// 2005; Linux's seqlock_t), with the payload copied through atomic word loads
// and stores (Boehm, "Can seqlocks get along with programming language memory
// models?", 2012) so that the Go memory model and the race detector accept it.
//
// Memory: an 8-byte sequence word followed by T's bytes as 8-byte words,
// padded at both ends against false sharing with other heap objects.
//
//	sequence  meaning
//	even      stable: the payload is the value of Store number sequence/2
//	odd       a Store is in progress: the payload may be torn
//
// Store makes the sequence odd with one CAS (which also keeps concurrent
// Stores out: a second writer waits, spinning then yielding), writes the
// words, and makes it even again. Load reads the sequence, copies the words
// and reads the sequence again; if it was odd or has changed, it copies
// again. A reader therefore never returns a torn value and never delays the
// writer, but may retry while Stores are frequent. Reads are a few atomic
// loads: prefer a SeqLock to an RWMutex for small, read-mostly values, and
// a Mutex (or atomic.Pointer to an immutable value) for large ones.
//
// In the terminology of the Go memory model, a Store synchronizes before
// every Load that returns its value or a later one's.
//
// shm.SeqLock is the same lock in a shared-memory region, its Stores
// serialized across processes by a robust writer lock.
//
// T must hold no pointers (NewSeqLock checks): a copy made of raw words
// must not carry a pointer past the garbage collector. A SeqLock must be
// created with NewSeqLock and must not be copied; methods
// of a zero SeqLock panic.
type SeqLock[T any] struct {
	_ noCopy
	// c holds the sequence word and T's bytes, 8 per word, the last
	// zero-padded (the core that package shm's SeqLock shares).
	c seqcore.Core[T]
}

// NewSeqLock returns a SeqLock holding initial. If T holds pointers it
// returns an error that wraps ErrHasPointers and names the field.
func NewSeqLock[T any](initial T) (*SeqLock[T], error) {
	t := reflect.TypeFor[T]()
	if err := checkPlainData(t, "NewSeqLock"); err != nil {
		return nil, err
	}
	mem := paddedSlice[atomic.Uint64](1 + (int(t.Size())+7)/8)
	s := &SeqLock[T]{c: seqcore.Core[T]{Seq: &mem[0], Words: mem[1:]}}
	s.Store(initial)
	s.c.Seq.Store(0) // so that the sequence counts the caller's Stores
	return s, nil
}

// checkPlainData returns an error wrapping ErrHasPointers, naming the
// field, if values of t hold pointers; fn names the caller for the message.
func checkPlainData(t reflect.Type, fn string) error {
	return checkNoPointers(t, fn, "a seqlock copies its value as raw memory words")
}

// checkNoPointers is checkPlainData for any caller: why says, for the
// message, what makes the caller's values raw memory.
func checkNoPointers(t reflect.Type, fn, why string) error {
	return seqcore.CheckNoPointers(t, fn, why, ErrHasPointers)
}

// Store makes v the value of s. Stores are meant to come from one writer;
// concurrent Stores are serialized (a second one waits until the first is
// done).
func (s *SeqLock[T]) Store(v T) { s.c.Store(v) }

// Load returns the value of s: the value of the latest Store that
// completed before Load began, or of one that overlapped it; never a mix.
func (s *SeqLock[T]) Load() T {
	v, err := s.load(nil)
	if err != nil {
		panic(err)
	}
	return v
}

// LoadContext is Load for readers that must not wait for ever: it returns
// the value, or an error and the zero value when a Store has stayed in
// progress and ctx ended (ctx.Err()). That is noticed only after the reader has spun through its backoff, so a done ctx does not
// stop a Load that can complete.
func (s *SeqLock[T]) LoadContext(ctx context.Context) (T, error) {
	if ctx == nil {
		var zero T
		return zero, ErrNilContext
	}
	return s.load(ctx)
}

// load is Load and LoadContext (ctx nil: wait for ever).
func (s *SeqLock[T]) load(ctx context.Context) (v T, err error) { return s.c.Load(ctx) }

// holdsPointers reports whether values of t contain pointers.
func holdsPointers(t reflect.Type) bool {
	_, _, ok := seqcore.PointerPath(t, "")
	return ok
}
