package lockword

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
)

// ErrHasPointers is returned (wrapped, with the offending field) by
// NewSeqLock when T holds pointers: strings, slices, maps, interfaces,
// channels, functions or pointers anywhere inside it.
var ErrHasPointers = errors.New("type holds pointers")

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
// T must hold no pointers (NewSeqLock checks): a copy made of raw words
// must not carry a pointer past the garbage collector. A SeqLock must be
// created with NewSeqLock and must not be copied; methods of a zero SeqLock
// panic.
type SeqLock[T any] struct {
	_     noCopy
	seq   *atomic.Uint64  // the sequence word
	words []atomic.Uint64 // T's bytes, 8 per word; the last word zero-padded
}

// NewSeqLock returns a SeqLock holding initial. If T holds pointers it
// returns an error that wraps ErrHasPointers and names the field.
func NewSeqLock[T any](initial T) (*SeqLock[T], error) {
	t := reflect.TypeFor[T]()
	if where, kind, ok := pointerPath(t, ""); ok {
		switch {
		case where == "":
			where = "the type itself"
		case where[0] == '.':
			where = "field " + where[1:]
		default:
			where = "element " + where
		}
		return nil, fmt.Errorf("lockword: NewSeqLock[%v]: %w: %s is a %v; a seqlock copies its value "+
			"as raw memory words, which must not carry pointers (use numbers, bools and fixed-size arrays)",
			t, ErrHasPointers, where, kind)
	}
	mem := paddedSlice[atomic.Uint64](1 + (int(t.Size())+7)/8)
	s := &SeqLock[T]{seq: &mem[0], words: mem[1:]}
	s.Store(initial)
	s.seq.Store(0) // so that the sequence counts the caller's Stores
	return s, nil
}

// Store makes v the value of s. Stores are meant to come from one writer;
// concurrent Stores are serialized (a second one waits until the first is
// done).
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
}

// beginWrite makes the sequence odd and returns its even value before.
func (s *SeqLock[T]) beginWrite() uint64 {
	if s.seq == nil {
		panic("lockword: SeqLock used without NewSeqLock")
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
func (s *SeqLock[T]) Load() (v T) {
	if s.seq == nil {
		panic("lockword: SeqLock used without NewSeqLock")
	}
	dst := bytesOf(&v)
	for i := 0; ; i++ {
		seq := s.seq.Load()
		if seq&1 == 0 {
			s.copyOut(dst)
			// The word loads above cannot move past this load (Go's
			// atomics are sequentially consistent), so an unchanged
			// sequence means no Store wrote them meanwhile.
			if s.seq.Load() == seq {
				return v
			}
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
