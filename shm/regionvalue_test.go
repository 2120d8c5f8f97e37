//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockword/lockword"
	"os"
	"strconv"
	"strings"
	"testing"
)

// valuePayload is the cross-process tests' value: under the lock, B is
// always A+1000 and C is A+B, written field by field, so a torn update
// (an access the lock did not order) shows as a broken relation.
type valuePayload struct {
	A, B, C uint64
	Writer  uint32 // PID of the last writer
	Writes  [2]uint32
}

// tooBigValue is a size past the entry's 32-bit size field where int is
// 64 bits (2^31+1 bytes), and the largest array where it is 32 (2^31-1),
// so that the test builds on both.
const tooBigValue = 1<<31 - 1 + 2*(^uint(0)>>63)

func (v *valuePayload) check() error {
	if v.B != v.A+1000 || v.C != v.A+v.B {
		return fmt.Errorf("torn value: %+v (want B = A+1000, C = A+B)", *v)
	}
	return nil
}

// TestRegionValue: a value starts as the zero T, is shared by every handle
// on the region, is placed at a multiple of 64, and the same name gives
// the same pointer.
func TestRegionValue(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	p, err := Value[valuePayload](r, "v")
	if err != nil {
		t.Fatal(err)
	}
	if *p != (valuePayload{}) {
		t.Fatalf("a new value is %+v, want the zero T", *p)
	}
	if o := r.objects["v"]; o.offset%64 != 0 || o.size != 40 || o.param != 8 || o.kind != kindValue {
		t.Fatalf("recorded %+v, want kind %d, 40 bytes, alignment 8, at a multiple of 64", o, kindValue)
	}
	*p = valuePayload{A: 1, B: 1001, C: 1002}
	if q, err := Value[valuePayload](r, "v"); err != nil || q != p {
		t.Fatalf("second call: %p, %v; want the same pointer %p", q, err, p)
	}
	// Another handle reads the object table from the file, as another
	// process does.
	r2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	q, err := Value[valuePayload](r2, "v")
	if err != nil {
		t.Fatal(err)
	}
	if *q != *p {
		t.Fatalf("through another handle: %+v, want %+v", *q, *p)
	}
	q.A = 7
	if p.A != 7 {
		t.Fatal("a write through one handle is not seen through the other")
	}
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if o := info.Objects[0]; o.Name != "v" || o.Kind != "value" || o.Size != 40 || o.State != "" {
		t.Fatalf("InspectRegion shows %+v, want value v of 40 bytes, not a lock", o)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Value[valuePayload](r, "v"); !errors.Is(err, ErrRegionClosed) {
		t.Fatalf("after Close: %v, want ErrRegionClosed", err)
	}
}

// TestRegionValueRefuses: types with pointers, sizes and alignments other
// than the recorded ones, other kinds and bad names each get their
// sentinel, whether the name was made by this handle or read from the
// file by another.
func TestRegionValueRefuses(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	if _, err := Value[uint64](r, "u64"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Mutex("m"); err != nil {
		t.Fatal(err)
	}
	r2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()

	pointers := []struct {
		name, want string
		open       func(*Region) error
	}{
		{"pointer", "the type itself", func(r *Region) error { _, err := Value[*int](r, "p"); return err }},
		{"string", "the type itself", func(r *Region) error { _, err := Value[string](r, "p"); return err }},
		{"field", "field P", func(r *Region) error {
			_, err := Value[struct {
				N int
				P *int
			}](r, "p")
			return err
		}},
		{"slice", "the type itself", func(r *Region) error { _, err := Value[[]byte](r, "p"); return err }},
		{"array of maps", "element [0]", func(r *Region) error { _, err := Value[[2]map[int]int](r, "p"); return err }},
		{"interface", "field E", func(r *Region) error { _, err := Value[struct{ E error }](r, "p"); return err }},
	}
	for _, c := range pointers {
		err := c.open(r)
		if !errors.Is(err, lockword.ErrHasPointers) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "shm.Value") {
			t.Errorf("%s: %v, want lockword.ErrHasPointers naming %q", c.name, err, c.want)
		}
	}
	if _, ok := r.objects["p"]; ok {
		t.Error("a refused type made an object")
	}

	mismatches := []struct {
		name string
		want error
		open func(*Region) error
	}{
		{"another size", ErrObjectBounds, func(r *Region) error { _, err := Value[[2]uint64](r, "u64"); return err }},
		{"another alignment, same size", ErrObjectKind, func(r *Region) error { _, err := Value[[8]byte](r, "u64"); return err }},
		{"alignment 4, same size", ErrObjectKind, func(r *Region) error { _, err := Value[[2]uint32](r, "u64"); return err }},
		{"a mutex's name", ErrObjectKind, func(r *Region) error { _, err := Value[uint64](r, "m"); return err }},
		{"zero size", ErrObjectBounds, func(r *Region) error { _, err := Value[struct{}](r, "empty"); return err }},
		{"too big", ErrObjectBounds, func(r *Region) error {
			if tooBigValue < 1<<31 {
				return ErrObjectBounds // int is 32 bits: no Go type is that big
			}
			_, err := Value[[tooBigValue]byte](r, "big")
			return err
		}},
		{"bad name", ErrObjectName, func(r *Region) error { _, err := Value[uint64](r, "a\nb"); return err }},
		{"Bytes on a value", ErrObjectKind, func(r *Region) error { _, err := r.Bytes("u64", 8); return err }},
		{"lockword.Mutex on a value", ErrObjectKind, func(r *Region) error { _, err := r.Mutex("u64"); return err }},
		{"full", ErrRegionFull, func(r *Region) error { _, err := Value[[2 << 20]byte](r, "huge"); return err }},
	}
	for _, c := range mismatches {
		for i, h := range []*Region{r, r2} {
			if err := c.open(h); !errors.Is(err, c.want) {
				t.Errorf("%s (handle %d): %v, want %v", c.name, i+1, err, c.want)
			}
		}
	}
	// The message says what was recorded and what was asked for.
	_, err = Value[[8]byte](r2, "u64")
	if want := `value "u64" holds a type of 8 bytes, 8-byte aligned; [8]uint8 is 8 bytes, 1-byte aligned`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("mismatch message: %v, want it to contain %q", err, want)
	}
	// A type of the recorded size and alignment is the same value.
	if _, err := Value[int64](r2, "u64"); err != nil {
		t.Errorf("int64 over a uint64 value: %v", err)
	}
}

// TestRegionValueRecordCorrupt: the kind field's parameter is checked when
// a region is opened. A value must record a power-of-two alignment up to
// 64 and lie at a multiple of 64; no other kind has a parameter.
func TestRegionValueRecordCorrupt(t *testing.T) {
	valid := valueRegionBytes(t)
	e := regionTableOffset + 2*tableEntrySize // the value's entry
	cases := []struct {
		name string
		want error
		mut  func(b []byte)
	}{
		{"valid", nil, func([]byte) {}},
		{"alignment 0", ErrObjectKind, func(b []byte) { ne.PutUint32(b[e+entryKind:], uint32(kindValue)) }},
		{"alignment 3", ErrObjectKind, func(b []byte) { ne.PutUint32(b[e+entryKind:], uint32(kindValue)|3<<16) }},
		{"alignment 128", ErrObjectKind, func(b []byte) { ne.PutUint32(b[e+entryKind:], uint32(kindValue)|128<<16) }},
		{"alignment 64", nil, func(b []byte) { ne.PutUint32(b[e+entryKind:], uint32(kindValue)|64<<16) }},
		{"a mutex with a parameter", ErrObjectKind, func(b []byte) {
			ne.PutUint32(b[regionTableOffset+entryKind:], uint32(kindMutex)|8<<16)
		}},
		{"unknown kind with a parameter", ErrObjectKind, func(b []byte) { ne.PutUint32(b[e+entryKind:], 99|8<<16) }},
		{"misaligned", ErrObjectAlignment, func(b []byte) { ne.PutUint64(b[e+entryOffset:], ne.Uint64(b[e+entryOffset:])+8) }},
		{"size 0", ErrObjectBounds, func(b []byte) { ne.PutUint32(b[e+entrySize:], 0) }},
	}
	for _, c := range cases {
		b := append([]byte(nil), valid...)
		c.mut(b)
		reseal(b)
		err := openBytes(t, b)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: open returned %v, want %v", c.name, err, c.want)
		}
	}
	// The recorded alignment, not the asker's, decides: a value recorded
	// as 64-aligned is no uint64.
	b := append([]byte(nil), valid...)
	ne.PutUint32(b[e+entryKind:], uint32(kindValue)|64<<16)
	reseal(b)
	path := tempRegionPath(t)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := Value[uint64](r, "v"); !errors.Is(err, ErrObjectKind) {
		t.Fatalf("a uint64 over a value recorded 64-aligned: %v, want ErrObjectKind", err)
	}
}

// valueRegionBytes returns validRegionBytes's region with a uint64 value
// "v" added as its third object.
func valueRegionBytes(t testing.TB) []byte {
	return seedRegionBytes(t, func(r *Region) error {
		_, err := Value[uint64](r, "v")
		return err
	})
}

func init() { childModes["value-add"] = childValueAdd }

// childValueAdd: args path, n. It prints the value it finds, then adds 1
// to the region's value "v" n times under the mutex "m", checking the
// value's relations each time, and prints how many of its lockings found
// the parent's write last. It also prints how a T of another alignment
// fares, from this second process.
func childValueAdd(args []string) error {
	r, err := Open(args[0], nil)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := Value[[10]uint32](r, "v"); !errors.Is(err, ErrObjectKind) {
		return fmt.Errorf("a T of another alignment: %v, want ErrObjectKind", err)
	}
	if _, err := Value[[6]uint64](r, "v"); !errors.Is(err, ErrObjectBounds) {
		return fmt.Errorf("a T of another size: %v, want ErrObjectBounds", err)
	}
	n, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	m, err := r.Mutex("m")
	if err != nil {
		return err
	}
	v, err := Value[valuePayload](r, "v")
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := m.LockContext(ctx); err != nil {
		return err
	}
	fmt.Printf("found %d %d\n", v.A, v.Writer)
	m.Unlock()
	fmt.Println("started")
	sawParent := 0
	for range n {
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		if err := v.check(); err != nil {
			m.Unlock()
			return err
		}
		if v.Writer != uint32(os.Getpid()) {
			sawParent++
		}
		addOne(v, 1)
		m.Unlock()
	}
	fmt.Println("saw-parent", sawParent)
	return nil
}

// addOne adds 1 to v field by field, as process who (index 0 or 1) would.
func addOne(v *valuePayload, who int) {
	v.A++
	v.B = v.A + 1000
	v.C = v.A + v.B
	v.Writer = uint32(os.Getpid())
	v.Writes[who]++
}

// TestRegionValueProcesses: a parent and a child process (the test binary
// re-executed) each add 1 to one value n times under one Mutex. The
// child finds the parent's first write; every locking finds the value's
// relations intact; the end holds every addition of both. The race
// detector does not see the mapping: the relations and the sum are the
// check. No timing is assumed: the processes may run one after the other.
func TestRegionValueProcesses(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	if (&valuePayload{A: 1, B: 1001, C: 1001}).check() == nil {
		t.Fatal("the checker passes a torn value")
	}
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	m, err := r.Mutex("m")
	if err != nil {
		t.Fatal(err)
	}
	v, err := Value[valuePayload](r, "v")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	*v = valuePayload{A: 100, B: 1100, C: 1200, Writer: uint32(os.Getpid())}
	m.Unlock()

	c := startChild(t, "value-add", path, strconv.Itoa(n))
	if got, want := c.expect(t, "found "), fmt.Sprintf("100 %d", os.Getpid()); got != want {
		t.Fatalf("the child found %q, want %q (the parent's write)", got, want)
	}
	c.expect(t, "started")
	sawChild := 0
	for range n {
		if err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := v.check(); err != nil {
			m.Unlock()
			t.Fatal(err)
		}
		if v.Writer != uint32(os.Getpid()) {
			sawChild++
		}
		addOne(v, 0)
		m.Unlock()
	}
	sawParent := c.expect(t, "saw-parent ")
	c.wait(t)
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	got := *v
	m.Unlock()
	if err := got.check(); err != nil {
		t.Fatal(err)
	}
	if got.A != uint64(100+2*n) || got.Writes != [2]uint32{uint32(n), uint32(n)} {
		t.Fatalf("after %d additions by each process: %+v, want A = %d", n, got, 100+2*n)
	}
	t.Logf("the parent found the child's write last %d times, the child the parent's %s times, of %d each", sawChild, sawParent, n)
}
