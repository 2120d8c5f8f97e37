//go:build linux

package ctest

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/cbuild"
	"github.com/lockword/lockword/shm"
)

// TestCAPICodes: every return code a single C process can provoke
// (lockword.h documents them): bad sizes and names, kind and size
// mismatches, EPERM for an unlock by a non-holder (a second region handle
// of the same process included), EBUSY and ETIMEDOUT on a held lock,
// another thread of the holder's process unlocking, ERINGBUSY, EMSGSIZE,
// ERINGCLOSED after draining. Plain and ASan+UBSan builds.
func TestCAPICodes(t *testing.T) {
	for _, v := range []cbuild.Variant{cbuild.Plain, cbuild.ASan} {
		out, err := startC(t, cBuild(t, v).Worker, "api", regionPath(t)).wait(time.Minute)
		if err != nil || len(out) != 1 || out[0] != "ok" {
			t.Errorf("%s: %v\n%s", v, err, strings.Join(out, "\n"))
		}
	}
}

// TestNotRecoverableAcrossLanguages: a Go holder dies; the C waiter that
// takes the lock with LW_EOWNERDEAD unlocks without repairing; from then
// on the lock is not recoverable for C (LW_ENOTRECOVERABLE from timed
// lock and trylock) and for Go (ErrNotRecoverable).
func TestNotRecoverableAcrossLanguages(t *testing.T) {
	b := cBuild(t, cbuild.Plain)
	path, r := goRegion(t)
	m, _ := r.Mutex("m")
	hold := startGo(t, "hold", path, "m")
	hold.line(10 * time.Second)
	w := startC(t, b.Worker, "wait", path, "m", "abandon")
	w.line(5 * time.Second)
	hold.cmd.Process.Kill()
	if f := strings.Fields(w.line(5 * time.Second)); len(f) == 0 || f[0] != "130" {
		t.Fatalf("C waiter: %q, want LW_EOWNERDEAD", f)
	}
	if l := w.line(5 * time.Second); l != "131 131" {
		t.Fatalf("C after unlocking unrepaired: %q, want LW_ENOTRECOVERABLE twice (131 131)", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.LockContext(ctx); !errors.Is(err, lockword.ErrNotRecoverable) {
		t.Fatalf("Go LockContext: %v, want ErrNotRecoverable", err)
	}
}

// TestCRingCorrupt: a ring whose shared words a buggy or hostile process
// wrote gives the C consumer LW_ERINGCORRUPT, at attach or on receive,
// never a crash, never a message from the bad record, never a read outside
// the ring (the ASan build would report one).
func TestCRingCorrupt(t *testing.T) {
	const ringOff = 45056 // the first object of a fresh region (128-aligned already)
	const tail, data = ringOff + 128, ringOff + 512
	le := binary.LittleEndian
	for _, c := range []struct {
		name string
		tail uint64
		rec  [2]uint32 // length, type of the record at offset 0
	}{
		{"tail not a multiple of 8", 4, [2]uint32{0, 0}},
		{"tail more than capacity ahead", 512, [2]uint32{0, 0}},
		{"unknown record type", 16, [2]uint32{1, 7}},
		{"message longer than the ring", 16, [2]uint32{1000, 0}},
		{"message longer than published", 16, [2]uint32{100, 0}},
		{"padding at offset 0", 256, [2]uint32{248, 1}},
		{"padding short of the end", 256, [2]uint32{8, 1}},
	} {
		for _, v := range []cbuild.Variant{cbuild.Plain, cbuild.ASan} {
			path, r := goRegion(t)
			p, err := r.RingProducer("q", 256)
			if err != nil {
				t.Fatal(err)
			}
			p.Detach()
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			var rec [8]byte
			le.PutUint32(rec[:], c.rec[0])
			le.PutUint32(rec[4:], c.rec[1])
			var tl [8]byte
			le.PutUint64(tl[:], c.tail)
			f.WriteAt(rec[:], data)
			f.WriteAt(tl[:], tail)
			f.Close()
			cons := startC(t, cBuild(t, v).Worker, "recv", path, "q", "256", "1")
			out, err := cons.wait(time.Minute)
			all := strings.Join(out, "\n") + cons.tail.String()
			if !strings.Contains(all, "shared ring corrupt") || strings.Contains(all, "ERROR") || strings.Contains(all, "runtime error") {
				t.Errorf("%s (%s): the C consumer said %q (%v), want LW_ERINGCORRUPT and no sanitizer report", c.name, v, all, err)
			}
		}
	}
}

// TestCOpenUnsafePermissions: a region file that others may write is
// refused by both openers, each with its own name for the same check
// (ErrUnsafePermissions, LW_EUNSAFEPERMS).
func TestCOpenUnsafePermissions(t *testing.T) {
	b := cBuild(t, cbuild.Plain)
	path, r := goRegion(t)
	r.Close()
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := shm.Open(path, nil); !errors.Is(err, shm.ErrUnsafePermissions) {
		t.Fatalf("Go open of a 0666 region: %v, want ErrUnsafePermissions", err)
	}
	out, err := startC(t, b.Worker, "open", path).wait(time.Minute)
	if err != nil || len(out) != 1 || !strings.HasPrefix(out[0], "1021 ") {
		t.Fatalf("C open of a 0666 region: %q %v, want LW_EUNSAFEPERMS (1021)", out, err)
	}
}

// TestCCorruptLockWord: a lock word naming no owner a region could issue
// (generation 0) is ErrCorrupt for Go and LW_ECORRUPT for C: neither
// waits on it for ever nor takes it.
func TestCCorruptLockWord(t *testing.T) {
	b := cBuild(t, cbuild.Plain)
	path, r := goRegion(t)
	m, _ := r.Mutex("m") // the first object: at the start of the object area
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var w [4]byte
	binary.LittleEndian.PutUint32(w[:], 1<<18) // slot 1, generation 0
	f.WriteAt(w[:], 45056)
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.LockContext(ctx); !errors.Is(err, lockword.ErrCorrupt) {
		t.Fatalf("Go LockContext on a corrupt word: %v, want ErrCorrupt", err)
	}
	out, err := startC(t, b.Worker, "wait", path, "m").wait(time.Minute)
	if err != nil || len(out) != 2 || !strings.HasPrefix(out[1], "1023 ") {
		t.Fatalf("C lock on a corrupt word: %q %v, want LW_ECORRUPT (1023)", out, err)
	}
}

// TestCNullArguments: every function of lockword.h, called with each of
// its pointer arguments NULL in turn (the others valid), returns LW_EINVAL
// (0 from those returning a value, nothing from those returning void) and
// does not crash; an empty message may be sent from NULL and received into
// NULL without the NULL reaching memcpy (UBSan aborts the ASan build if it
// does). Each call runs in a child of the worker, so that one crash is
// reported and the rest still run. The test reads the prototypes of
// lockword.h, so a function added there without its NULL cases fails it.
func TestCNullArguments(t *testing.T) {
	protos := headerPointerParams(t)
	if len(protos) < 20 {
		t.Fatalf("found %d prototypes in lockword.h: the parser is broken", len(protos))
	}
	for _, v := range []cbuild.Variant{cbuild.Plain, cbuild.ASan} {
		p := startC(t, cBuild(t, v).Worker, "nullargs", regionPath(t))
		out, err := p.wait(time.Minute)
		nulls := map[string]map[int]bool{} // function -> argument positions made NULL
		ok := false
		for _, l := range out {
			switch {
			case l == "ok":
				ok = true
			case strings.HasPrefix(l, "PASS "), strings.HasPrefix(l, "FAIL "):
				if l[0] == 'F' {
					t.Errorf("%s: %s", v, l)
				}
				call, _, _ := strings.Cut(l[len("PASS "):], ": ")
				name, args := splitCall(call)
				if nulls[name] == nil {
					nulls[name] = map[int]bool{}
				}
				for i, a := range args {
					if a == "NULL" {
						nulls[name][i] = true
					}
				}
			default:
				t.Errorf("%s: %s", v, l)
			}
		}
		if err != nil || !ok {
			t.Errorf("%s: nullargs: %v (want \"ok\")\n%s", v, err, p.tail.String())
		}
		for _, name := range slices.Sorted(maps.Keys(protos)) {
			for i, param := range protos[name] {
				if param == "" || optionalNull[name+" "+param] || nulls[name][i] {
					continue
				}
				t.Errorf("%s: nullargs makes no call of %s with %s NULL", v, name, param)
			}
		}
	}
}

// optionalNull names the pointer parameters that lockword.h documents as
// optional: NULL is a valid argument there, not a mistake.
var optionalNull = map[string]bool{"lw_mutex_timedlock_pid dead_pid": true,
	"lw_sem_timedacquire dead": true, "lw_sem_acquire dead": true, "lw_sem_tryacquire dead": true}

// headerPointerParams returns, for every function that lockword.h
// declares, its parameters by position: the name of each pointer
// parameter, "" for the others.
func headerPointerParams(t *testing.T) map[string][]string {
	t.Helper()
	src, err := cbuild.SourceDir()
	if err != nil {
		t.Fatal(err)
	}
	h, err := os.ReadFile(filepath.Join(src, "lockword.h"))
	if err != nil {
		t.Fatal(err)
	}
	proto := regexp.MustCompile(`(?m)^[a-z][\w ]*[\s*](lw_\w+)\(([^)]*)\);$`)
	params := map[string][]string{}
	for _, m := range proto.FindAllStringSubmatch(string(h), -1) {
		var ps []string
		for _, p := range strings.Split(m[2], ",") {
			p = strings.TrimSpace(p)
			name := p[strings.LastIndexAny(p, " *")+1:]
			if !strings.Contains(p, "*") {
				name = ""
			}
			ps = append(ps, name)
		}
		params[m[1]] = ps
	}
	return params
}

// splitCall splits the text of a call "f(a, b)" into f and its arguments.
func splitCall(call string) (string, []string) {
	name, rest, _ := strings.Cut(call, "(")
	rest = strings.TrimSuffix(rest, ")")
	var args []string
	for _, a := range strings.Split(rest, ",") {
		args = append(args, strings.TrimSpace(a))
	}
	return name, args
}
