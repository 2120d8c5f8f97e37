// Package cbuild builds lockword's C sources (lockword.h, lockword.c,
// test/cworker.c, python/ of the module's c directory, which package c
// embeds in the binary) with the system C compiler at run time, for
// cmd/lockword's `torture -lock shared-c` and for the cross-language
// tests in c/ctest. There is no cgo: the C code runs in processes of its
// own, and the Go module stays pure Go.
package cbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/lockword/lockword/c"
)

// Flags are the warning flags every build uses: the library must compile
// cleanly under them.
var Flags = []string{"-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-pthread"}

// Errors of Build and Cached.
var (
	// ErrNoCompiler is returned when no C compiler is found: $CC if set,
	// else gcc or cc on PATH.
	ErrNoCompiler = errors.New("lockword: no C compiler ($CC, gcc or cc) on PATH (install gcc, or set LOCKWORD_C_WORKER to a built cworker)")
	// ErrNoSources is returned when $LOCKWORD_C_DIR lacks a source file.
	ErrNoSources = errors.New("lockword: C sources not found (LOCKWORD_C_DIR must name a c directory of the lockword module)")
)

// sourceFiles are the files a build reads, relative to the c directory:
// the headers, the library's rooms (every *.c there, which lockword.c
// joins into one translation unit), the test worker and, last, the Python
// worker.
var sourceFiles = func() []string {
	rooms, err := fs.Glob(c.Sources, "*.c")
	if err != nil {
		panic(err) // the pattern is constant and valid
	}
	return slices.Concat([]string{"lockword.h", "internal.h"}, rooms, []string{"test/cworker.c", "test/cworker_api.c", "test/cworker_nullargs.c", "test/cworker_sem.c", "test/cworker_deadlock.c", "test/cworker_mpsc.c", "python/lockword_worker.py"})
}()

// SourceDir returns a directory holding the C sources: $LOCKWORD_C_DIR if
// set, else a copy of the sources embedded in this binary (package c),
// written once under the user's cache directory (the system's temporary
// directory without one) in a directory named by their hash. The embedded
// sources are the ones this binary's Go code was built with, wherever it
// runs, so the two sides of the protocol always match.
func SourceDir() (string, error) {
	if d := os.Getenv("LOCKWORD_C_DIR"); d != "" {
		return filepath.Abs(d)
	}
	h := sha256.New()
	files := make(map[string][]byte, len(sourceFiles))
	for _, f := range sourceFiles {
		b, err := c.Sources.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoSources, err) // a file missing from the go:embed list
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
		files[f] = b
	}
	dir := filepath.Join(cacheBase(), "lockword", "src-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, sourceFiles[len(sourceFiles)-1])); err == nil {
		return dir, nil
	}
	// Written beside it, then renamed: no process sees half the files.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "src-")
	if err != nil {
		return "", err
	}
	for f, b := range files {
		p := filepath.Join(tmp, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.WriteFile(p, b, 0o644)
		}
		if err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(dir); serr != nil {
			return "", err // not another process's copy: a real failure
		}
	}
	return dir, nil
}

// cacheBase is where SourceDir and Cached keep what they make.
func cacheBase() string {
	if d, err := os.UserCacheDir(); err == nil {
		return d
	}
	return os.TempDir()
}

// compiler returns the C compiler to build with: $CC if set, else gcc,
// else cc, found on PATH; ErrNoCompiler if none is.
func compiler() (string, error) {
	names := []string{"gcc", "cc"}
	if cc := os.Getenv("CC"); cc != "" {
		names = []string{cc}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", ErrNoCompiler
}

// A Variant is one way to compile: plain (-O2), or with a sanitizer.
type Variant string

// The variants Build knows.
const (
	Plain Variant = "plain"
	TSan  Variant = "tsan" // -fsanitize=thread
	ASan  Variant = "asan" // -fsanitize=address,undefined
	// BrokenAlive declares every other process dead: tests show that
	// their checks catch a liveness check that robs live holders.
	BrokenAlive Variant = "broken-alive"
	// BrokenWaitsFor never clears a waits-for record: tests show that
	// the stale records make the false deadlock their check catches.
	BrokenWaitsFor Variant = "broken-waits-for"
)

func (v Variant) flags() []string {
	switch v {
	case TSan:
		return []string{"-O1", "-g", "-fsanitize=thread"}
	case ASan:
		return []string{"-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"}
	case BrokenAlive:
		return []string{"-O2", "-DLW_TEST_BROKEN_ALIVE"}
	case BrokenWaitsFor:
		return []string{"-O2", "-DLW_TEST_BROKEN_WAITS_FOR"}
	}
	return []string{"-O2"}
}

// Built is what Build made: absolute paths.
type Built struct {
	Worker string // the cworker binary (test/cworker.c lists its commands)
	Shared string // liblockword.so (Plain only)
	Static string // liblockword.a (Plain only)
	Python string // the ctypes torture worker script (a copy of the source)
}

// Build compiles the sources of src into out with the C compiler ($CC,
// else gcc, else cc): the worker, and for Plain the static and shared
// libraries too. It returns ErrNoCompiler without a compiler, and the
// compiler's output on a failure.
func Build(src, out string, v Variant) (*Built, error) {
	gcc, err := compiler()
	if err != nil {
		return nil, err
	}
	b := &Built{Worker: filepath.Join(out, "cworker-"+string(v))}
	run := func(args ...string) error {
		cmd := exec.Command(gcc, append(append(append([]string(nil), Flags...), v.flags()...), args...)...)
		cmd.Dir = src
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("lockword: %s %s: %v\n%s", filepath.Base(gcc), strings.Join(args, " "), err, msg)
		}
		return nil
	}
	if err := run("-o", b.Worker, "test/cworker.c", "lockword.c"); err != nil {
		return nil, err
	}
	if v != Plain {
		return b, nil
	}
	b.Shared, b.Static = filepath.Join(out, "liblockword.so"), filepath.Join(out, "liblockword.a")
	obj := filepath.Join(out, "lockword.o")
	if err := run("-fPIC", "-c", "-o", obj, "lockword.c"); err != nil {
		return nil, err
	}
	if err := run("-shared", "-o", b.Shared, obj); err != nil {
		return nil, err
	}
	ar, err := exec.LookPath("ar")
	if err != nil {
		return nil, fmt.Errorf("lockword: ar not found: %w", err)
	}
	if msg, err := exec.Command(ar, "rcs", b.Static, obj).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("lockword: ar: %v\n%s", err, msg)
	}
	b.Python = filepath.Join(out, "lockword_worker.py")
	if err := copyFile(filepath.Join(src, "python", "lockword_worker.py"), b.Python); err != nil {
		return nil, err
	}
	return b, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

var cached struct {
	once  sync.Once
	built *Built
	err   error
}

// Cached builds the Plain variant once per process, into a directory
// under the user's cache directory named by a hash of the sources, so
// that later runs reuse it. LOCKWORD_C_WORKER, if set, names a worker
// binary to use instead (Shared and Python are then unset).
func Cached() (*Built, error) {
	cached.once.Do(func() { cached.built, cached.err = buildCached() })
	return cached.built, cached.err
}

func buildCached() (*Built, error) {
	if w := os.Getenv("LOCKWORD_C_WORKER"); w != "" {
		return &Built{Worker: w}, nil
	}
	src, err := SourceDir()
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, f := range sourceFiles {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoSources, err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	dir := filepath.Join(cacheBase(), "lockword", "c-"+hex.EncodeToString(h.Sum(nil))[:16])
	done := &Built{Worker: filepath.Join(dir, "cworker-plain"), Shared: filepath.Join(dir, "liblockword.so"),
		Static: filepath.Join(dir, "liblockword.a"), Python: filepath.Join(dir, "lockword_worker.py")}
	if _, err := os.Stat(done.Python); err == nil {
		return done, nil
	}
	// Build beside it, then rename: no process sees a half-built directory.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		return nil, err
	}
	if _, err := Build(src, tmp, Plain); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(done.Python); serr != nil {
			return nil, err // not another builder's win: a real failure
		}
	}
	return done, nil
}
