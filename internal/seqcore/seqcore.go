// Package seqcore is the sequence lock that package lockword's SeqLock and
// package shm's SeqLock share: the sequence word, the payload words and the
// copy loops, with the writers' serialization left to a Writer that the
// shared kind supplies (nil: the in-process CAS). It also holds the check
// that a type is plain data, which both packages' constructors make.
package seqcore

import (
	"context"
	"encoding/binary"
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lockword/lockword/internal/backoff"
)

// Reader back-off while a Store is in progress: spin with the pause hint,
// doubling up to the cap, then yield, because a writer that was preempted
// mid-Store needs our processor to finish.
const (
	SpinIterations = 8  // looks at the sequence before yielding
	spinPause      = 64 // cap on PAUSE/YIELD hints between looks
)

// A Writer serializes the Stores of every process for a SeqLock in a
// shared region.
type Writer interface {
	// BeginWrite takes the writers' lock, makes the sequence odd and
	// returns its even value before (taking over from a dead writer).
	BeginWrite(seq *atomic.Uint64) uint64
	// Unlock releases the writers' lock after the sequence is even again.
	Unlock()
	// Stalled is called by a reader that found a Store in progress (odd
	// seq) past its spin: a non-nil error ends the read.
	Stalled(ctx context.Context, seqWord *atomic.Uint64, seq uint64, since *time.Time) error
}

// Core is a sequence lock's words: Seq, then T's bytes as 8-byte words in
// Words, the last zero-padded. Writer is nil in the Go heap.
type Core[T any] struct {
	Seq    *atomic.Uint64
	Words  []atomic.Uint64
	Writer Writer
}

// Store makes v the value of s: see SeqLock.Store.
func (s *Core[T]) Store(v T) {
	seq := s.beginWrite()
	src := bytesOf(&v)
	full := len(src) / 8
	for i := range full {
		s.Words[i].Store(binary.NativeEndian.Uint64(src[8*i:]))
	}
	if rest := src[8*full:]; len(rest) > 0 {
		var b [8]byte
		copy(b[:], rest)
		s.Words[full].Store(binary.NativeEndian.Uint64(b[:]))
	}
	s.Seq.Store(seq + 2) // even again: the new value is stable
	if s.Writer != nil {
		s.Writer.Unlock()
	}
}

// beginWrite makes the sequence odd and returns its even value before.
func (s *Core[T]) beginWrite() uint64 {
	if s.Seq == nil {
		panic("lockword: SeqLock used without NewSeqLock")
	}
	if s.Writer != nil {
		return s.Writer.BeginWrite(s.Seq)
	}
	for i := 0; ; i++ {
		// Even to odd in one CAS: readers see a write in progress, and a
		// concurrent writer sees it too and waits.
		if seq := s.Seq.Load(); seq&1 == 0 && s.Seq.CompareAndSwap(seq, seq+1) {
			return seq
		}
		pause(i)
	}
}

// Load is SeqLock.Load and LoadContext (ctx nil: wait for ever for a live
// writer).
func (s *Core[T]) Load(ctx context.Context) (v T, err error) {
	if s.Seq == nil {
		panic("lockword: SeqLock used without NewSeqLock")
	}
	dst := bytesOf(&v)
	var odd time.Time // when this read last saw a Store in progress past its spin
	for i := 0; ; i++ {
		seq := s.Seq.Load()
		if seq&1 == 0 {
			s.copyOut(dst)
			// The word loads above cannot move past this load (Go's
			// atomics are sequentially consistent), so an unchanged
			// sequence means no Store wrote them meanwhile.
			if s.Seq.Load() == seq {
				return v, nil
			}
		} else if i >= SpinIterations && (ctx != nil || s.Writer != nil) {
			if err := s.stalled(ctx, seq, &odd); err != nil {
				var zero T
				return zero, err
			}
		}
		if i%backoff.RetryCheckEvery == backoff.RetryCheckEvery-1 && ctx != nil && ctx.Err() != nil {
			// Stores that never pause (or a sequence rewritten from
			// outside) must not outlast the context either.
			var zero T
			return zero, ctx.Err()
		}
		pause(i)
	}
}

// stalled is called by a reader that has found a Store in progress (odd
// seq) past its spin: it returns ctx's error once ctx is done, and asks the
// Writer, if any, whether the writer still lives.
func (s *Core[T]) stalled(ctx context.Context, seq uint64, since *time.Time) error {
	if s.Writer != nil {
		return s.Writer.Stalled(ctx, s.Seq, seq, since)
	}
	return ctx.Err() // ctx is not nil here: the caller checked
}

// copyOut copies the payload words into dst, one atomic load each; the
// result may be torn, so only Load, which checks the sequence, may return it.
func (s *Core[T]) copyOut(dst []byte) {
	full := len(dst) / 8
	for i := range full {
		binary.NativeEndian.PutUint64(dst[8*i:], s.Words[i].Load())
	}
	if rest := dst[8*full:]; len(rest) > 0 {
		var b [8]byte
		binary.NativeEndian.PutUint64(b[:], s.Words[full].Load())
		copy(rest, b[:])
	}
}

// pause waits a little before the i'th retry.
func pause(i int) {
	if i < SpinIterations {
		backoff.Pause(min(uint32(1)<<i, spinPause))
		return
	}
	runtime.Gosched()
}

// CheckNoPointers returns an error wrapping errHasPointers (lockword's
// ErrHasPointers), naming the field, if values of t hold pointers; fn
// names the caller and why says, for the message, what makes the caller's
// values raw memory.
func CheckNoPointers(t reflect.Type, fn, why string, errHasPointers error) error {
	where, kind, ok := PointerPath(t, "")
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
		errHasPointers, fn, t, where, kind, why)
}

// PointerPath reports whether type t holds a pointer anywhere and, if so,
// where (a field path below prefix such as ".Quote.Symbol" or "[0]", "" for
// t itself) and of what kind.
func PointerPath(t reflect.Type, prefix string) (where string, kind reflect.Kind, ok bool) {
	switch t.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Map, reflect.Chan, reflect.Func,
		reflect.Interface, reflect.Slice, reflect.String:
		return prefix, t.Kind(), true
	case reflect.Array:
		if t.Len() > 0 {
			return PointerPath(t.Elem(), prefix+"[0]")
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if where, kind, ok := PointerPath(f.Type, prefix+"."+f.Name); ok {
				return where, kind, ok
			}
		}
	}
	return "", 0, false
}

// bytesOf views the memory of *p as bytes, so that a SeqLock can copy a
// value through atomic word loads and stores.
//
// Legal because callers pass only types without pointers (checked by
// NewSeqLock and shm.NewSeqLock through CheckNoPointers): reading or writing their bytes cannot
// hide a pointer from the garbage collector or forge one. The slice aliases
// *p, so it keeps *p alive and must not outlive the caller's use of it.
func bytesOf[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// CopyOut copies the payload into *v without looking at the sequence: the
// result may be torn. Only the tests' deliberately broken readers call it.
func (s *Core[T]) CopyOut(v *T) { s.copyOut(bytesOf(v)) }
