package lockword

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The package's files by layer (docs/architecture.md). Every non-test Go
// file of the package is in exactly one list (TestLayoutEveryFileHasARoom),
// so a new file is placed by whoever adds it, and the rules below cover it.
var (
	// In-process primitives: goroutines of one process, parked by
	// internal/wait.
	inProcessFiles = []string{"mutex.go", "spin.go", "ticket.go", "rwmutex.go", "cond.go", "semaphore.go", "semaphorequeue.go", "diag.go", "stuck.go"}
	// Lock-free structures, in process and (through a region) shared.
	lockFreeFiles = []string{"ring.go", "ringindex.go", "queue.go", "seqlock.go", "update.go"}
	// The region: file, mapping, header, tables, processes, inspection.
	regionFiles = []string{"region.go", "regionabi.go", "regionopen.go", "regionflock.go", "regionowner.go", "region_linux.go", "region_other.go", "proc_linux.go", "inspect.go", "regionvalue.go"}
	// The shared kinds, their common parts and their waiting helper.
	sharedFiles = []string{"sharedwait.go", "sharedqueue.go", "sharedqueue_inspect.go", "sharedownerdead.go", "shareddiag.go",
		"sharedmutex.go", "sharedmutexwaiter.go", "sharedhandoff.go", "sharedticket.go", "sharedrw.go", "sharedrwreaders.go", "sharedcond.go", "sharedring.go", "sharedringends.go", "sharedseqlock.go"}
	// What every layer uses: package doc, casts, errors, the CPU pause.
	commonFiles = []string{"doc.go", "unsafe.go", "corrupt.go", "nocopy.go", "pause.go", "pause_other.go"}
)

// parsedFile is one non-test file of the package, parsed without comments:
// the rules are about code, and doc comments may name anything.
type parsedFile struct {
	name string
	f    *ast.File
}

func parsePackageFiles(t *testing.T) map[string]parsedFile {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]parsedFile{}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = parsedFile{name, f}
	}
	return files
}

// existing returns the files of list that exist, in files.
func existing(files map[string]parsedFile, list []string) []parsedFile {
	var out []parsedFile
	for _, name := range list {
		if pf, ok := files[name]; ok {
			out = append(out, pf)
		}
	}
	return out
}

// idents calls fn with every identifier of f's code that may name a type
// of this package: not a qualified identifier's package or name (sync.Mutex),
// not a field or method selected from a value (x.f), not a field's or
// parameter's name, not a field name in a composite literal.
func idents(f *ast.File, fn func(id *ast.Ident)) {
	imported := map[string]bool{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imported[name] = true
	}
	var visit func(n ast.Node) bool
	walk := func(n ast.Node) {
		if n != nil {
			ast.Inspect(n, visit)
		}
	}
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); !ok || !imported[x.Name] {
				walk(n.X)
			}
			return false
		case *ast.Field:
			walk(n.Type)
			return false
		case *ast.KeyValueExpr:
			if _, ok := n.Key.(*ast.Ident); ok {
				walk(n.Value)
				return false
			}
		case *ast.Ident:
			fn(n)
		}
		return true
	}
	walk(f)
}

// receiverType is the name of a method's receiver type: T in T, *T, T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// TestLayoutEveryFileHasARoom: every non-test file is in one layer list.
func TestLayoutEveryFileHasARoom(t *testing.T) {
	files := parsePackageFiles(t)
	seen := map[string]int{}
	for _, list := range [][]string{inProcessFiles, lockFreeFiles, regionFiles, sharedFiles, commonFiles} {
		for _, name := range list {
			seen[name]++
		}
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if seen[name] != 1 {
			t.Errorf("%s is in %d of the layer lists (layoutrules_test.go), want 1: place it, and docs/architecture.md", name, seen[name])
		}
	}
}

// TestLayoutRegionNamesNoLockType: the region files never name a type of
// a lock (a type declared in an in-process, lock-free or shared file), so
// the region knows its objects only as kinds and handles.
func TestLayoutRegionNamesNoLockType(t *testing.T) {
	files := parsePackageFiles(t)
	// A lock type: a type declared in those files with a method that
	// takes, waits or passes data (so not a record such as Stats or an
	// error such as OwnerDeadError).
	lockMethods := map[string]bool{"Lock": true, "RLock": true, "Wait": true, "Store": true, "Push": true, "Send": true, "Receive": true, "acquire": true}
	declared, withMethods := map[string]string{}, map[string]bool{}
	for _, list := range [][]string{inProcessFiles, lockFreeFiles, sharedFiles} {
		for _, pf := range existing(files, list) {
			for _, d := range pf.f.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					if d.Tok == token.TYPE {
						for _, s := range d.Specs {
							ts := s.(*ast.TypeSpec)
							declared[ts.Name.Name] = pf.name
							if it, ok := ts.Type.(*ast.InterfaceType); ok {
								for _, m := range it.Methods.List {
									for _, n := range m.Names {
										withMethods[ts.Name.Name] = withMethods[ts.Name.Name] || lockMethods[n.Name]
									}
								}
							}
						}
					}
				case *ast.FuncDecl:
					if d.Recv != nil && lockMethods[d.Name.Name] {
						withMethods[receiverType(d.Recv.List[0].Type)] = true
					}
				}
			}
		}
	}
	lockTypes := map[string]string{}
	for name, file := range declared {
		if withMethods[name] {
			lockTypes[name] = file
		}
	}
	if lockTypes["SharedMutex"] == "" || lockTypes["Mutex"] == "" {
		t.Fatal("found no lock types: the layer lists are wrong")
	}
	for _, pf := range existing(files, regionFiles) {
		idents(pf.f, func(id *ast.Ident) {
			if from, ok := lockTypes[id.Name]; ok {
				t.Errorf("region file %s names %s (declared in %s): a region file knows objects by kind, not by lock type", pf.name, id.Name, from)
			}
		})
	}
}

// TestLayoutOnlySharedWaitCallsFutex: only sharedwait.go calls the kernel
// futex functions of internal/wait (wait.Futex*); every other file sleeps
// on a shared word through it. In-process parking (wait.Wait, wait.Wake,
// ...) is not a futex function.
func TestLayoutOnlySharedWaitCallsFutex(t *testing.T) {
	files := parsePackageFiles(t)
	calls := 0
	for name, pf := range files {
		waitName := ""
		for _, imp := range pf.f.Imports {
			if imp.Path.Value == `"github.com/lockword/lockword/internal/wait"` {
				waitName = "wait"
				if imp.Name != nil {
					waitName = imp.Name.Name
				}
			}
		}
		if waitName == "" {
			continue
		}
		ast.Inspect(pf.f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == waitName && strings.HasPrefix(sel.Sel.Name, "Futex") {
				if name == "sharedwait.go" {
					calls++
				} else {
					t.Errorf("%s uses wait.%s: only sharedwait.go calls internal/wait's futex functions (use sleepShared, wakeShared, ...)", name, sel.Sel.Name)
				}
			}
			return true
		})
	}
	if calls == 0 {
		t.Error("sharedwait.go calls no futex function: the rule looks for the wrong names")
	}
}

// TestLayoutInProcessNeverMentionsRegion: the in-process and lock-free
// files never name Region or anything of the region (region*).
func TestLayoutInProcessNeverMentionsRegion(t *testing.T) {
	files := parsePackageFiles(t)
	checked := 0
	for _, pf := range existing(files, slices.Concat(inProcessFiles, lockFreeFiles)) {
		checked++
		idents(pf.f, func(id *ast.Ident) {
			if strings.Contains(id.Name, "Region") || strings.HasPrefix(id.Name, "region") {
				t.Errorf("in-process file %s names %s: the in-process layer knows nothing of regions", pf.name, id.Name)
			}
		})
	}
	if checked == 0 {
		t.Fatal("no in-process files found")
	}
}

// TestLayoutOnlyPlatformFilesImportUnix: only region_linux.go and
// proc_linux.go import golang.org/x/sys/unix; the logic above the system
// calls is portable (tests may import it to forge conditions).
func TestLayoutOnlyPlatformFilesImportUnix(t *testing.T) {
	files := parsePackageFiles(t)
	for name, pf := range files {
		for _, imp := range pf.f.Imports {
			if imp.Path.Value == `"golang.org/x/sys/unix"` && name != "region_linux.go" && name != "proc_linux.go" {
				t.Errorf("%s imports golang.org/x/sys/unix: only region_linux.go and proc_linux.go make system calls", name)
			}
		}
	}
	if _, err := os.Stat("region_linux.go"); err != nil {
		t.Fatal(err)
	}
}
