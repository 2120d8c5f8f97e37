//go:build linux

package ctest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/cbuild"
	"github.com/lockword/lockword/shm"
)

// ABI offsets the corruptions below aim at (docs/abi.md; the header's
// twins are checked by the root package's TestCHeaderConstants).
const (
	offVersion, offHeaderSize, offSize, offTableCap = 8, 12, 16, 24
	offCount, offChecksum, offPIDNS                 = 48, 52, 64
	offTable, entrySize, offProc                    = 4096, 64, 12288
	entKind, entSize, entOffset                     = 48, 52, 56
	arena                                           = 45056
)

var ne = binary.LittleEndian

// reseal recomputes the header checksum, so that a corruption reaches the
// checks after it (the Go tests' reseal, from the ABI).
func reseal(b []byte) {
	count := ne.Uint32(b[offCount:])
	c := crc32.Checksum(b[8:48], crc32.MakeTable(crc32.Castagnoli))
	var n [4]byte
	ne.PutUint32(n[:], count)
	tab := crc32.MakeTable(crc32.Castagnoli)
	c = crc32.Update(c, tab, n[:])
	c = crc32.Update(c, tab, b[offTable:offTable+int(min(count, 128))*entrySize])
	ne.PutUint32(b[offChecksum:], c)
}

// sentinelCodes maps each Go open error to its C code (lockword.h).
var sentinelCodes = []struct {
	err  error
	code int
}{
	{shm.ErrNotRegularFile, 1001}, {shm.ErrNotInitialized, 1002}, {shm.ErrBadMagic, 1003},
	{shm.ErrBadVersion, 1004}, {shm.ErrBadSize, 1005}, {shm.ErrBadChecksum, 1006},
	{shm.ErrObjectName, 1007}, {shm.ErrObjectKind, 1008}, {shm.ErrObjectBounds, 1009},
	{shm.ErrObjectAlignment, 1010}, {shm.ErrForeignPIDNamespace, 1011},
	{shm.ErrUnsafePermissions, 1021}, {shm.ErrTruncated, 1022},
}

func goCode(err error) int {
	if err == nil {
		return 0
	}
	for _, s := range sentinelCodes {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	return -1
}

// corpus returns the inputs: FuzzOpenRegion's seeds, one corruption per
// open check, the files under shm/testdata/fuzz/FuzzOpenRegion, and whatever
// the Go fuzzer has found in this machine's fuzz cache.
func corpus(t testing.TB) map[string][]byte {
	path := filepath.Join(t.TempDir(), "valid")
	r, err := shm.Create(path, arena+4096, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Mutex("m")
	r.Bytes("data", 100)
	r.Close()
	valid, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"seed valid": valid, "seed header only": valid[:arena], "seed 64 bytes": valid[:64],
		"seed empty": {}, "seed lockword": []byte("lockword"),
	}
	mut := func(name string, sealed bool, f func(b []byte) []byte) {
		b := f(append([]byte(nil), valid...))
		if sealed {
			reseal(b)
		}
		cases[name] = b
	}
	e0, e1 := offTable, offTable+entrySize
	mut("seed torn count", true, func(b []byte) []byte { ne.PutUint32(b[offCount:], 128); return b })
	mut("bad magic", false, func(b []byte) []byte { b[0] ^= 1; return b })
	mut("big-endian magic", false, func(b []byte) []byte { binary.BigEndian.PutUint64(b, ne.Uint64(b)); return b })
	mut("zero magic, full size", false, func(b []byte) []byte { clear(b[:8]); return b })
	mut("version 2", true, func(b []byte) []byte { ne.PutUint32(b[offVersion:], 2); return b })
	mut("header size", true, func(b []byte) []byte { ne.PutUint32(b[offHeaderSize:], 4096); return b })
	mut("table capacity", true, func(b []byte) []byte { ne.PutUint32(b[offTableCap:], 64); return b })
	mut("size field", true, func(b []byte) []byte { ne.PutUint64(b[offSize:], uint64(len(b))+4096); return b })
	mut("truncated", false, func(b []byte) []byte { return b[:len(b)-4096] })
	mut("extended", false, func(b []byte) []byte { return append(b, make([]byte, 4096)...) })
	mut("checksum", false, func(b []byte) []byte { b[offChecksum] ^= 0x80; return b })
	mut("entry changed, not resealed", false, func(b []byte) []byte { b[e0+entKind]++; return b })
	mut("count 129", true, func(b []byte) []byte { ne.PutUint32(b[offCount:], 129); return b })
	mut("count 3", true, func(b []byte) []byte { ne.PutUint32(b[offCount:], 3); return b })
	mut("empty name", true, func(b []byte) []byte { clear(b[e0 : e0+48]); return b })
	mut("newline in name", true, func(b []byte) []byte { b[e0+1] = '\n'; return b })
	mut("C1 control in name", true, func(b []byte) []byte { copy(b[e0:], "\xc2\x85"); return b })
	mut("invalid UTF-8 name", true, func(b []byte) []byte { b[e0] = 0xff; return b })
	mut("surrogate in name", true, func(b []byte) []byte { copy(b[e0:], "\xed\xa0\x80"); return b })
	mut("not NUL-padded", true, func(b []byte) []byte { b[e0+10] = 'x'; return b })
	mut("48-byte name", true, func(b []byte) []byte {
		copy(b[e0:e0+48], strings.Repeat("n", 48))
		return b
	})
	mut("duplicate name", true, func(b []byte) []byte { copy(b[e1:e1+48], b[e0:e0+48]); return b })
	mut("kind 0", true, func(b []byte) []byte { ne.PutUint32(b[e0+entKind:], 0); return b })
	mut("kind 99", true, func(b []byte) []byte { ne.PutUint32(b[e0+entKind:], 99); return b })
	mut("mutex of 32 bytes", true, func(b []byte) []byte { ne.PutUint32(b[e0+entSize:], 32); return b })
	mut("bytes of 0 bytes", true, func(b []byte) []byte { ne.PutUint32(b[e1+entSize:], 0); return b })
	mut("offset below the area", true, func(b []byte) []byte { ne.PutUint64(b[e0+entOffset:], arena-64); return b })
	mut("offset past the end", true, func(b []byte) []byte { ne.PutUint64(b[e1+entOffset:], uint64(len(b))+64); return b })
	mut("offset wraps", true, func(b []byte) []byte { ne.PutUint64(b[e1+entOffset:], ^uint64(63)); return b })
	mut("size past the end", true, func(b []byte) []byte { ne.PutUint32(b[e1+entSize:], 1<<31); return b })
	mut("overlap", true, func(b []byte) []byte { ne.PutUint64(b[e1+entOffset:], ne.Uint64(b[e0+entOffset:])); return b })
	mut("misaligned", true, func(b []byte) []byte { ne.PutUint64(b[e1+entOffset:], ne.Uint64(b[e1+entOffset:])+8); return b })
	// A value (Go's shm.Value) as a third object, 64-aligned past the
	// bytes; the kind field's upper half records its alignment.
	e2 := offTable + 2*entrySize
	value := func(kind uint32, offset uint64) func(b []byte) []byte {
		return func(b []byte) []byte {
			copy(b[e2:], "v")
			ne.PutUint32(b[e2+entKind:], kind)
			ne.PutUint32(b[e2+entSize:], 8)
			ne.PutUint64(b[e2+entOffset:], offset)
			ne.PutUint32(b[offCount:], 3)
			return b
		}
	}
	const kindValue = 9
	mut("value", true, value(kindValue|8<<16, arena+192))
	mut("value aligned 64", true, value(kindValue|64<<16, arena+192))
	mut("value without alignment", true, value(kindValue, arena+192))
	mut("value aligned 3", true, value(kindValue|3<<16, arena+192))
	mut("value aligned 128", true, value(kindValue|128<<16, arena+192))
	mut("value misaligned", true, value(kindValue|8<<16, arena+200))
	mut("mutex with a parameter", true, func(b []byte) []byte { ne.PutUint32(b[e0+entKind:], 1|8<<16); return b })
	mut("foreign PID namespace", false, func(b []byte) []byte {
		// A live slot of this boot binds the record, which names
		// another namespace.
		ne.PutUint64(b[offPIDNS:], ne.Uint64(b[offPIDNS:])+1)
		ne.PutUint32(b[offProc:], ne.Uint32(b[offProc:])|1<<31)
		return b
	})
	mut("unknown PID namespace", false, func(b []byte) []byte { clear(b[offPIDNS : offPIDNS+8]); return b })
	// The committed corpus must be there: a moved directory would
	// otherwise shrink this test silently.
	committed := filepath.Join("..", "..", "shm", "testdata", "fuzz", "FuzzOpenRegion")
	if files, _ := filepath.Glob(filepath.Join(committed, "*")); len(files) == 0 {
		t.Fatalf("no committed FuzzOpenRegion corpus under %s", committed)
	}
	for _, dir := range []string{committed, fuzzCacheDir()} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for i, f := range files {
			if i == 500 {
				break
			}
			if b, ok := readFuzzFile(f); ok {
				cases["fuzz "+filepath.Base(f)] = b
			}
		}
	}
	return cases
}

func fuzzCacheDir() string {
	c := os.Getenv("GOCACHE")
	if c == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		c = filepath.Join(d, "go-build")
	}
	return filepath.Join(c, "fuzz", "github.com", "lockword", "lockword", "shm", "FuzzOpenRegion")
}

// readFuzzFile decodes a "go test fuzz v1" file of one []byte value.
func readFuzzFile(path string) ([]byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	lines := strings.SplitN(string(b), "\n", 3)
	if len(lines) < 2 || lines[0] != "go test fuzz v1" {
		return nil, false
	}
	v := strings.TrimSpace(lines[1])
	if !strings.HasPrefix(v, "[]byte(") || !strings.HasSuffix(v, ")") {
		return nil, false
	}
	s, err := strconv.Unquote(v[len("[]byte(") : len(v)-1])
	return []byte(s), err == nil
}

// TestCCorruptCorpus runs the C opener and the Go opener over the same
// corrupt files: every file gives the C opener an error code, never a
// crash (a crash fails the worker), and the code is the twin of the
// sentinel the Go opener returns for it: the same check fails first on
// both sides. The ASan+UBSan build runs the corpus too, so an
// out-of-bounds read that happens not to crash is caught.
func TestCCorruptCorpus(t *testing.T) {
	for _, v := range []string{"plain", "asan"} {
		b := cBuild(t, cbuild.Variant(v))
		dir := t.TempDir()
		cases := corpus(t)
		wantCodes(t, b, dir, cases, v)
	}
}

// wantCodes opens every case with Go and with the C worker b, and fails
// unless they agree; every open check must be reached when there are many.
func wantCodes(t testing.TB, b *cbuild.Built, dir string, cases map[string][]byte, v string) {
	var names, paths []string
	for name, data := range cases {
		p := filepath.Join(dir, fmt.Sprintf("case%d", len(paths)))
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		names, paths = append(names, name), append(paths, p)
	}
	// Go first, on a copy each: an open attaches and writes the file.
	want := make([]int, len(paths))
	for i, p := range paths {
		cp := p + ".go"
		os.WriteFile(cp, cases[names[i]], 0o600)
		r, err := shm.Open(cp, &shm.Options{InitTimeout: -1})
		if err == nil {
			r.Close()
		}
		if want[i] = goCode(err); want[i] < 0 {
			t.Fatalf("%s: Go open returned %v, not one of the open sentinels", names[i], err)
		}
	}
	out, err := startC(t, b.Worker, append([]string{"open"}, paths...)...).wait(time.Minute)
	if err != nil {
		t.Fatalf("%s C opener crashed or failed over the corpus: %v", v, err)
	}
	if len(out) != len(paths) {
		t.Fatalf("%s C opener printed %d results for %d files", v, len(out), len(paths))
	}
	seen := map[int]bool{}
	for i, line := range out {
		code, _ := strconv.Atoi(strings.Fields(line)[0])
		seen[code] = true
		if code != want[i] {
			t.Errorf("%s: C opener says %q, Go's code is %d", names[i], line, want[i])
		}
	}
	for _, s := range sentinelCodes[1:11] { // every check of the contents (not file type or permissions)
		if len(cases) > 1 && !seen[s.code] {
			t.Errorf("no corpus file reaches the check of %v (code %d)", s.err, s.code)
		}
	}
	if len(cases) > 1 {
		t.Logf("%s: %d files, C and Go agree on every one", v, len(paths))
	}
}

// FuzzCOpenerAgrees is a differential fuzzer: for any file, the C opener
// returns the code of the sentinel the Go opener returns (or succeeds
// where Go does), and never crashes. The seeds (the corpus of
// TestCCorruptCorpus) run with every go test; explore further with
//
//	go test -run '^$' -fuzz FuzzCOpenerAgrees -fuzztime 2000x ./c/ctest
//
// (each input starts a C process: some hundreds of inputs a second).
func FuzzCOpenerAgrees(f *testing.F) {
	for _, data := range corpus(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := cBuild(t, cbuild.Plain)
		wantCodes(t, b, t.TempDir(), map[string][]byte{"input": data}, "plain")
	})
}
