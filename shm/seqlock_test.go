//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/locktest"
)

// TestRegionSeqLockLayout pins the seqlock object's layout as docs/abi.md
// gives it.
func TestRegionSeqLockLayout(t *testing.T) {
	checkABI(t, []abiField[int]{
		{"kind", int(kindSeqLock), 7}, {"writer lock", seqObjWriter, 0}, {"sequence", seqObjSeq, 64},
		{"payload", seqObjPayload, 72}, {"alignment", int(objectKinds[kindSeqLock].align), 64},
		{"writer lock size", mutexObjSize, 64},
	})
	r := mustCreate(t, tempRegionPath(t), 0)
	if _, err := r.Bytes("spacer", 8); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSeqLock[tornPayload](r, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSeqLock[[5]byte](r, "five"); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]uint32{"s": 72 + 24, "five": 72 + 8} {
		o := r.objects[name]
		if o.size != size || o.offset%64 != 0 || o.kind != kindSeqLock {
			t.Errorf("%s: %+v, want %d bytes, 64-aligned", name, o, size)
		}
	}
}

// tornSeqLock creates a region with a SeqLock of tornPayload named name.
func tornSeqLock(t *testing.T, name string) (path string, r *Region, s *SeqLock[tornPayload]) {
	t.Helper()
	path = tempRegionPath(t)
	r = mustCreate(t, path, 0)
	s, err := NewSeqLock[tornPayload](r, name)
	if err != nil {
		t.Fatal(err)
	}
	return path, r, s
}

func TestRegionSeqLock(t *testing.T) {
	path, r, s := tornSeqLock(t, "s")
	if v := s.Load(); v != (tornPayload{}) {
		t.Fatalf("a new seqlock in a region holds %+v, want the zero value", v)
	}
	s.Store(tornPayload{1, 1001, 1002})
	// Another handle (as another process would map it) sees the value,
	// and its Stores are seen here.
	r2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	s2, err := NewSeqLock[tornPayload](r2, "s")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s2.LoadContext(context.Background()); err != nil || v != (tornPayload{1, 1001, 1002}) {
		t.Fatalf("second handle: %+v, %v", v, err)
	}
	s2.Store(tornPayload{2, 1002, 1004})
	if v := s.Load(); v.A != 2 || s.c.Seq.Load() != 4 {
		t.Fatalf("after a Store through the other handle: %+v, sequence %d", v, s.c.Seq.Load())
	}
	// Odd sizes round-trip, the padding of the last word included.
	type odd struct {
		A uint16
		B [3]byte
	}
	o, err := NewSeqLock[odd](r, "odd")
	if err != nil {
		t.Fatal(err)
	}
	o.Store(odd{0xBEEF, [3]byte{1, 2, 3}})
	if v := o.Load(); v != (odd{0xBEEF, [3]byte{1, 2, 3}}) {
		t.Fatalf("odd-sized value: %+v", v)
	}

	if _, err := NewSeqLock[[2]uint64](r, "s"); !errors.Is(err, ErrObjectBounds) {
		t.Fatalf("a T of another size: %v, want ErrObjectBounds", err)
	}
	if _, err := NewSeqLock[struct{ P *int }](r, "p"); !errors.Is(err, lockword.ErrHasPointers) || !strings.Contains(err.Error(), "field P") {
		t.Fatalf("a T with a pointer: %v, want lockword.ErrHasPointers naming field P", err)
	}
	if _, err := r.Mutex("s"); !errors.Is(err, ErrObjectKind) {
		t.Fatalf("lockword.Mutex on a seqlock: %v", err)
	}
	if _, err := NewSeqLock[uint64](r, "odd-name-that-is-much-too-long-for-the-object-table"); !errors.Is(err, ErrObjectName) {
		t.Fatalf("a name too long: %v", err)
	}
	//lint:ignore SA1012 testing the nil-context error
	if _, err := s.LoadContext(nil); err != lockword.ErrNilContext { //nolint:staticcheck
		t.Fatalf("LoadContext(nil) = %v", err)
	}
	// The writers' lock is free between Stores: Close is not refused.
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
}

func init() {
	childModes["seqlock-write"] = seqlockWriteChild
	childModes["seqlock-die"] = seqlockDieChild
}

// openSeqLockChild opens the region at path and its seqlock "s", for the
// child modes.
func openSeqLockChild(path string) (*Region, *SeqLock[tornPayload], error) {
	r, err := Open(path, nil)
	if err != nil {
		return nil, nil, err
	}
	s, err := NewSeqLock[tornPayload](r, "s")
	return r, s, err
}

// seqlockWriteChild: args path. It stores consistent payloads with rising
// a until the region's "stop" bytes hold a nonzero byte, then prints the
// number of Stores.
func seqlockWriteChild(args []string) error {
	r, s, err := openSeqLockChild(args[0])
	if err != nil {
		return err
	}
	stop, err := r.Bytes("stop", 8)
	if err != nil {
		return err
	}
	fmt.Println("attached")
	a := uint64(1)
	for ; stop[0] == 0; a++ {
		s.Store(tornPayload{a, a + 1000, 2*a + 1000})
	}
	fmt.Println("stores", a-1)
	return r.Close()
}

// seqlockDieChild: args path. It stores a = 5, then begins a Store of a = 6
// and writes only its first word, prints "mid" and waits to be killed: a
// writer that dies in the middle of a Store.
func seqlockDieChild(args []string) error {
	_, s, err := openSeqLockChild(args[0])
	if err != nil {
		return err
	}
	s.Store(tornPayload{5, 1005, 1010})
	s.c.Writer.BeginWrite(s.c.Seq)
	s.c.Words[0].Store(6)
	fmt.Println("mid")
	time.Sleep(time.Hour)
	return nil
}

// TestRegionSeqLockAcrossProcesses: a writer process stores without pause
// while readers here check every snapshot: none torn, none going back in
// time; then Stores from both processes at once, serialized by the robust
// writers' lock.
func TestRegionSeqLockAcrossProcesses(t *testing.T) {
	path, r, s := tornSeqLock(t, "s")
	stop, err := r.Bytes("stop", 8)
	if err != nil {
		t.Fatal(err)
	}
	s.Store(tornPayload{0, 1000, 1000})
	child := startChild(t, "seqlock-write", path)
	child.expect(t, "attached")
	for s.c.Seq.Load() < 6 { // the writer process has stored twice: it is running
		time.Sleep(100 * time.Microsecond)
	}
	// Every round must be clean; the writer, on a loaded machine, may be
	// off the CPU for a whole round, so overlap is asked of some round
	// within 5 s.
	deadline := time.Now().Add(5 * time.Second)
	for round := 0; ; round++ {
		res := locktest.CheckTornReads(s.Store, s.Load, 2, 0, scaled(2_000_000))
		t.Logf("%d reads across processes, reader 0 saw %d distinct values", res.Reads, res.Distinct)
		if res.Violations != 0 || res.Backwards != 0 {
			t.Fatalf("%d torn reads, %d backwards in %d reads", res.Violations, res.Backwards, res.Reads)
		}
		if res.Distinct >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reader 0 saw %d distinct values in each of %d rounds: the writer process never overlapped the readers", res.Distinct, round+1)
		}
	}
	// The same check catches readers that skip the sequence: it can fail
	// across processes too (given 5 s: the writer process must be caught
	// mid-Store, and on a loaded machine it may be off the CPU for a while).
	deadline = time.Now().Add(5 * time.Second)
	for round := 0; ; round++ {
		res := locktest.CheckTornReads(s.Store, func() tornPayload { return loadNoRetry(s) }, 1, 0, scaled(1_000_000))
		if res.Violations > 0 {
			t.Logf("a reader without the retry: %d torn reads in %d", res.Violations, res.Reads)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a reader without the retry passed %d rounds: the torn-read check cannot fail", round+1)
		}
	}
	// A writer here too: Stores of the two processes must not interleave.
	res := locktest.CheckTornReads(s.Store, s.Load, 2, 1, scaled(500_000))
	if res.Violations != 0 {
		t.Fatalf("%d torn reads with writers in two processes", res.Violations)
	}
	stop[0] = 1
	n, _ := strconv.Atoi(child.expect(t, "stores "))
	child.wait(t)
	if n == 0 {
		t.Fatal("the writer process made no Store")
	}
	if q := s.c.Seq.Load(); q&1 != 0 {
		t.Fatalf("sequence %d left odd", q)
	}
}

// TestRegionSeqLockWriterDeath: readers wait for a live writer however
// slow, get ErrWriterDead soon after it dies mid-Store instead of spinning
// for ever, and the next Store, from another process, repairs the value.
func TestRegionSeqLockWriterDeath(t *testing.T) {
	path, _, s := tornSeqLock(t, "s")
	child := startChild(t, "seqlock-die", path)
	child.expect(t, "mid")
	if q := s.c.Seq.Load(); q&1 == 0 {
		t.Fatalf("sequence %d: the child is not mid-Store", q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Millisecond)
	defer cancel()
	if v, err := s.LoadContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with the writer alive mid-Store: %+v, %v; want to wait", v, err)
	}
	child.cmd.Process.Kill()
	child.exit()
	killed := time.Now()
	v, err := s.LoadContext(context.Background())
	if !errors.Is(err, ErrWriterDead) || !strings.Contains(err.Error(), strconv.Itoa(child.pid())) || v != (tornPayload{}) {
		t.Fatalf("after the writer died mid-Store: %+v, %v; want ErrWriterDead naming PID %d", v, err, child.pid())
	}
	t.Logf("ErrWriterDead %v after the kill: %v", time.Since(killed), err)
	func() {
		defer func() {
			if p, ok := recover().(error); !ok || !errors.Is(p, ErrWriterDead) {
				t.Fatalf("Load with a dead writer mid-Store panicked with %v, want ErrWriterDead", p)
			}
		}()
		s.Load()
		t.Fatal("Load with a dead writer mid-Store returned")
	}()
	// The next Store takes the lock over and rewrites every word.
	s.Store(tornPayload{7, 1007, 1014})
	if v, err := s.LoadContext(context.Background()); err != nil || v != (tornPayload{7, 1007, 1014}) {
		t.Fatalf("after the repairing Store: %+v, %v", v, err)
	}
	if q := s.c.Seq.Load(); q&1 != 0 {
		t.Fatalf("sequence %d still odd after the repairing Store", q)
	}
	s.Store(tornPayload{8, 1008, 1016}) // and the lock is consistent again
	if v := s.Load(); v.A != 8 {
		t.Fatalf("%+v", v)
	}
}
