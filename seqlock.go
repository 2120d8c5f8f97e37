package lockword

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
	"time"
)

// ErrHasPointers is returned (wrapped, with the offending field) by
// NewSeqLock, RegionSeqLock and RegionValue when T holds pointers: strings,
// slices, maps, interfaces, channels, functions or pointers anywhere
// inside it.
var ErrHasPointers = errors.New("lockword: type holds pointers")

// Reader back-off while a Store is in progress: spin with the pause hint,
// doubling up to the cap, then yield, because a writer that was preempted
// mid-Store needs our processor to finish.
const (
	seqSpinIterations = 8  // looks at the sequence before yielding
	seqSpinPause      = 64 // cap on PAUSE/YIELD hints between looks
)

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
// # In a region
//
// RegionSeqLock places a SeqLock in a Region, shared by processes (Linux).
// There, Stores of every process are serialized by a robust writer lock (a
// SharedMutex) instead of the CAS, so that the writer is known: a reader
// that finds a Store in progress for longer than ownerCheckInterval (10 ms)
// checks whether the writer's process still lives. If it died in the middle
// of a Store, leaving the sequence odd and the value torn, LoadContext
// returns an error wrapping ErrWriterDead (and Load panics with it) instead
// of spinning for ever; a live writer, however slow, is waited for. The next
// Store, from any process, takes the writer lock over from the dead writer
// and rewrites every word, which repairs the value; readers then go on.
//
// T must hold no pointers (NewSeqLock checks): a copy made of raw words
// must not carry a pointer past the garbage collector. A SeqLock must be
// created with NewSeqLock or RegionSeqLock and must not be copied; methods
// of a zero SeqLock panic.
type SeqLock[T any] struct {
	_     noCopy
	seq   *atomic.Uint64  // the sequence word
	words []atomic.Uint64 // T's bytes, 8 per word; the last word zero-padded
	// writer is the robust lock that serializes the Stores of every
	// process, for a SeqLock in a region; nil in the Go heap.
	writer *SharedMutex
}

// NewSeqLock returns a SeqLock holding initial. If T holds pointers it
// returns an error that wraps ErrHasPointers and names the field.
func NewSeqLock[T any](initial T) (*SeqLock[T], error) {
	t := reflect.TypeFor[T]()
	if err := checkPlainData(t, "NewSeqLock"); err != nil {
		return nil, err
	}
	mem := paddedSlice[atomic.Uint64](1 + (int(t.Size())+7)/8)
	s := &SeqLock[T]{seq: &mem[0], words: mem[1:]}
	s.Store(initial)
	s.seq.Store(0) // so that the sequence counts the caller's Stores
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
	where, kind, ok := pointerPath(t, "")
	if !ok {
		return nil
	}
	switch {
	case where == "":
		where = "the type itself"
	case where[0] == '.':
		where = "field " + where[1:]
	default:
		where = "element " + where
	}
	return fmt.Errorf("%w: %s[%v]: %s is a %v; %s, which must not carry pointers (use numbers, bools and fixed-size arrays)",
		ErrHasPointers, fn, t, where, kind, why)
}

// Store makes v the value of s. Stores are meant to come from one writer;
// concurrent Stores are serialized (a second one waits until the first is
// done), across processes too for a SeqLock in a region.
func (s *SeqLock[T]) Store(v T) {
	seq := s.beginWrite()
	src := bytesOf(&v)
	full := len(src) / 8
	for i := range full {
		s.words[i].Store(binary.NativeEndian.Uint64(src[8*i:]))
	}
	if rest := src[8*full:]; len(rest) > 0 {
		var b [8]byte
		copy(b[:], rest)
		s.words[full].Store(binary.NativeEndian.Uint64(b[:]))
	}
	s.seq.Store(seq + 2) // even again: the new value is stable
	if s.writer != nil {
		s.writer.Unlock()
	}
}

// beginWrite makes the sequence odd and returns its even value before.
func (s *SeqLock[T]) beginWrite() uint64 {
	if s.seq == nil {
		panic("lockword: SeqLock used without NewSeqLock")
	}
	if s.writer != nil {
		return beginSharedWrite(s.seq, s.writer)
	}
	for i := 0; ; i++ {
		// Even to odd in one CAS: readers see a write in progress, and a
		// concurrent writer sees it too and waits.
		if seq := s.seq.Load(); seq&1 == 0 && s.seq.CompareAndSwap(seq, seq+1) {
			return seq
		}
		seqBackoff(i)
	}
}

// Load returns the value of s: the value of the latest Store that
// completed before Load began, or of one that overlapped it; never a mix.
// For a SeqLock in a region whose writer process died in the middle of a
// Store, it panics with an error wrapping ErrWriterDead (use LoadContext to
// handle that case).
func (s *SeqLock[T]) Load() T {
	v, err := s.load(nil)
	if err != nil {
		panic(err)
	}
	return v
}

// LoadContext is Load for readers that must not wait for ever: it returns
// the value, or an error and the zero value when a Store has stayed in
// progress and ctx ended (ctx.Err()), or, for a SeqLock in a region, its
// writer process died in the middle of the Store (an error wrapping
// ErrWriterDead; the next Store repairs the value). Either is noticed only
// after the reader has spun through its backoff, so a done ctx does not
// stop a Load that can complete.
func (s *SeqLock[T]) LoadContext(ctx context.Context) (T, error) {
	if ctx == nil {
		var zero T
		return zero, ErrNilContext
	}
	return s.load(ctx)
}

// load is Load and LoadContext (ctx nil: wait for ever for a live writer).
func (s *SeqLock[T]) load(ctx context.Context) (v T, err error) {
	if s.seq == nil {
		panic("lockword: SeqLock used without NewSeqLock")
	}
	dst := bytesOf(&v)
	var odd time.Time // when this read last saw a Store in progress past its spin
	for i := 0; ; i++ {
		seq := s.seq.Load()
		if seq&1 == 0 {
			s.copyOut(dst)
			// The word loads above cannot move past this load (Go's
			// atomics are sequentially consistent), so an unchanged
			// sequence means no Store wrote them meanwhile.
			if s.seq.Load() == seq {
				return v, nil
			}
		} else if i >= seqSpinIterations && (ctx != nil || s.writer != nil) {
			if err := seqStalled(ctx, s.seq, seq, s.writer, &odd); err != nil {
				var zero T
				return zero, err
			}
		}
		if i%retryCheckEvery == retryCheckEvery-1 && ctx != nil && ctx.Err() != nil {
			// Stores that never pause (or a sequence rewritten from
			// outside) must not outlast the context either.
			var zero T
			return zero, ctx.Err()
		}
		seqBackoff(i)
	}
}

// copyOut copies the payload words into dst, one atomic load each; the
// result may be torn, so only Load, which checks the sequence, may return it.
func (s *SeqLock[T]) copyOut(dst []byte) {
	full := len(dst) / 8
	for i := range full {
		binary.NativeEndian.PutUint64(dst[8*i:], s.words[i].Load())
	}
	if rest := dst[8*full:]; len(rest) > 0 {
		var b [8]byte
		binary.NativeEndian.PutUint64(b[:], s.words[full].Load())
		copy(rest, b[:])
	}
}

// seqBackoff waits a little before the i'th retry.
func seqBackoff(i int) {
	if i < seqSpinIterations {
		procyield(min(uint32(1)<<i, seqSpinPause))
		return
	}
	runtime.Gosched()
}

// pointerPath reports whether type t holds a pointer anywhere and, if so,
// where (a field path below prefix such as ".Quote.Symbol" or "[0]", "" for
// t itself) and of what kind.
func pointerPath(t reflect.Type, prefix string) (where string, kind reflect.Kind, ok bool) {
	switch t.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Map, reflect.Chan, reflect.Func,
		reflect.Interface, reflect.Slice, reflect.String:
		return prefix, t.Kind(), true
	case reflect.Array:
		if t.Len() > 0 {
			return pointerPath(t.Elem(), prefix+"[0]")
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if where, kind, ok := pointerPath(f.Type, prefix+"."+f.Name); ok {
				return where, kind, ok
			}
		}
	}
	return "", 0, false
}

// holdsPointers reports whether values of t contain pointers.
func holdsPointers(t reflect.Type) bool {
	_, _, ok := pointerPath(t, "")
	return ok
}
