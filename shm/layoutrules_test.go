package shm

import (
	"go/ast"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/lockword/lockword/internal/locktest"
)

// The package's files by layer (docs/architecture.md). Every non-test Go
// file of the package is in exactly one list (TestLayoutEveryFileHasARoom),
// so a new file is placed by whoever adds it, and the rules below cover it.
var (
	// The region: file, mapping, header, tables, processes, inspection.
	regionFiles = []string{"region.go", "regionabi.go", "regionopen.go", "regionreclaim.go", "regionflock.go", "regionowner.go", "region_linux.go", "region_other.go", "proc_linux.go", "inspect.go", "regionvalue.go", "waitsfor.go"}
	// The shared kinds, their common parts and their waiting helper.
	sharedFiles = []string{"wait.go", "queue.go", "queue_inspect.go", "ownerdead.go", "diag.go",
		"mutex.go", "mutexwaiter.go", "handoff.go", "ticket.go", "rwmutex.go", "rwreaders.go", "cond.go", "ring.go", "ringends.go", "seqlock.go",
		"semaphore.go", "semaphoreguard.go", "semaphorewaiter.go", "semaphore_inspect.go", "semaphorereclaim.go",
		"mpsc.go", "mpsclayout.go", "mpscproducer.go", "mpscconsumer.go"}
	// What every layer uses: package doc, casts, the names taken from below.
	commonFiles = []string{"doc.go", "unsafe.go", "common.go", "race.go", "norace.go"}
)

// TestLayoutEveryFileHasARoom: every non-test file is in one layer list.
func TestLayoutEveryFileHasARoom(t *testing.T) {
	locktest.CheckEveryFileHasARoom(t, regionFiles, sharedFiles, commonFiles)
}

// TestLayoutRegionNamesNoLockType: the region files never name a type of
// a lock (a type declared in a shared file), so
// the region knows its objects only as kinds and handles.
func TestLayoutRegionNamesNoLockType(t *testing.T) {
	files := locktest.ParsePackageFiles(t)
	// A lock type: a type declared in those files with a method that
	// takes, waits or passes data (so not a record such as Stats or an
	// error such as OwnerDeadError).
	lockMethods := map[string]bool{"Lock": true, "RLock": true, "Wait": true, "Store": true, "Push": true, "Send": true, "Receive": true, "acquire": true}
	declared, withMethods := map[string]string{}, map[string]bool{}
	for _, list := range [][]string{sharedFiles} {
		for _, pf := range locktest.Existing(files, list) {
			for _, d := range pf.F.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					if d.Tok == token.TYPE {
						for _, s := range d.Specs {
							ts := s.(*ast.TypeSpec)
							declared[ts.Name.Name] = pf.Name
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
						withMethods[locktest.ReceiverType(d.Recv.List[0].Type)] = true
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
	if lockTypes["Mutex"] == "" || lockTypes["RWMutex"] == "" {
		t.Fatal("found no lock types: the layer lists are wrong")
	}
	for _, pf := range locktest.Existing(files, regionFiles) {
		locktest.Idents(pf.F, func(id *ast.Ident) {
			if from, ok := lockTypes[id.Name]; ok {
				t.Errorf("region file %s names %s (declared in %s): a region file knows objects by kind, not by lock type", pf.Name, id.Name, from)
			}
		})
	}
}

// TestLayoutOnlySharedWaitCallsFutex: only wait.go calls the kernel
// futex functions of internal/wait (wait.Futex*); every other file sleeps
// on a shared word through it. In-process parking (wait.Wait, wait.Wake,
// ...) is not a futex function.
func TestLayoutOnlySharedWaitCallsFutex(t *testing.T) {
	files := locktest.ParsePackageFiles(t)
	calls := 0
	for name, pf := range files {
		waitName := ""
		for _, imp := range pf.F.Imports {
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
		ast.Inspect(pf.F, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == waitName && strings.HasPrefix(sel.Sel.Name, "Futex") {
				if name == "wait.go" {
					calls++
				} else {
					t.Errorf("%s uses wait.%s: only wait.go calls internal/wait's futex functions (use sleepShared, wakeShared, ...)", name, sel.Sel.Name)
				}
			}
			return true
		})
	}
	if calls == 0 {
		t.Error("wait.go calls no futex function: the rule looks for the wrong names")
	}
}

// TestLayoutOnlyPlatformFilesImportUnix: only region_linux.go and
// proc_linux.go import golang.org/x/sys/unix; the logic above the system
// calls is portable (tests may import it to forge conditions).
func TestLayoutOnlyPlatformFilesImportUnix(t *testing.T) {
	files := locktest.ParsePackageFiles(t)
	for name, pf := range files {
		for _, imp := range pf.F.Imports {
			if imp.Path.Value == `"golang.org/x/sys/unix"` && name != "region_linux.go" && name != "proc_linux.go" {
				t.Errorf("%s imports golang.org/x/sys/unix: only region_linux.go and proc_linux.go make system calls", name)
			}
		}
	}
	if _, err := os.Stat("region_linux.go"); err != nil {
		t.Fatal(err)
	}
}
