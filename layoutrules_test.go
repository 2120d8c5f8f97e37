package lockword

import (
	"go/ast"
	"slices"
	"strings"
	"testing"

	"github.com/lockword/lockword/internal/locktest"
)

// The package's files by layer (docs/architecture.md). Every non-test Go
// file of the package is in exactly one list (TestLayoutEveryFileHasARoom),
// so a new file is placed by whoever adds it, and the rules below cover it.
// The shared-memory half is package shm, with its own rules.
var (
	// In-process primitives: goroutines of one process, parked by
	// internal/wait.
	inProcessFiles = []string{"mutex.go", "spin.go", "ticket.go", "rwmutex.go", "cond.go", "mutex_cond.go", "semaphore.go", "semaphorequeue.go", "diag.go", "stuck.go", "contention.go", "deadlock.go", "deadlockwalk.go", "deadlock_tag.go", "deadlock_notag.go"}
	// Lock-free structures.
	lockFreeFiles = []string{"ring.go", "ringindex.go", "queue.go", "queue_slots.go", "queue_wait.go", "seqlock.go", "update.go"}
	// What every layer, and package shm or etcdlock, uses: package doc,
	// errors, ContextLocker, the CPU pause.
	commonFiles = []string{"doc.go", "corrupt.go", "ownerdead.go", "contextlocker.go", "nocopy.go", "pause.go"}
)

// TestLayoutEveryFileHasARoom: every non-test file is in one layer list.
func TestLayoutEveryFileHasARoom(t *testing.T) {
	locktest.CheckEveryFileHasARoom(t, inProcessFiles, lockFreeFiles, commonFiles)
}

// TestLayoutInProcessNeverMentionsRegion: the in-process and lock-free
// files never name Region or anything of the region (region*).
func TestLayoutInProcessNeverMentionsRegion(t *testing.T) {
	files := locktest.ParsePackageFiles(t)
	checked := 0
	for _, pf := range locktest.Existing(files, slices.Concat(inProcessFiles, lockFreeFiles)) {
		checked++
		locktest.Idents(pf.F, func(id *ast.Ident) {
			if strings.Contains(id.Name, "Region") || strings.HasPrefix(id.Name, "region") {
				t.Errorf("in-process file %s names %s: the in-process layer knows nothing of regions", pf.Name, id.Name)
			}
		})
	}
	if checked == 0 {
		t.Fatal("no in-process files found")
	}
}

// TestLayoutNoSystemCalls: no file of the root package imports
// golang.org/x/sys/unix; the system calls are package shm's and
// internal/wait's.
func TestLayoutNoSystemCalls(t *testing.T) {
	for name, pf := range locktest.ParsePackageFiles(t) {
		for _, imp := range pf.F.Imports {
			if imp.Path.Value == `"golang.org/x/sys/unix"` {
				t.Errorf("%s imports golang.org/x/sys/unix: the root package makes no system calls", name)
			}
		}
	}
}
