package shm

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/internal/locktest"
)

// The hammers' sizes and the watchdog are shared with the root package's
// tests (internal/locktest).
var longTests = locktest.Long

const raceEnabled = locktest.RaceEnabled

func scaled(n int) int { return locktest.Scaled(n) }

func watchdog(what string, d time.Duration) (stop func()) { return locktest.Watchdog(what, d) }

// Every shared lock that lockword.ContextLocker's doc names satisfies it:
// the compiler checks the list (Cond.WaitContext takes any of them).
var (
	_ lockword.ContextLocker = (*Mutex)(nil)
	_ lockword.ContextLocker = (*TicketMutex)(nil)
	_ lockword.ContextLocker = (*RWMutex)(nil)
)

// ticketServing is the serving word of a lockword.TicketMutex, which its
// waiters park on: its second word (next, then serving), as
// TestGateIdleReadsState checks.
func ticketServing(g *lockword.TicketMutex) *atomic.Uint32 {
	return &(*[2]atomic.Uint32)(unsafe.Pointer(g))[1]
}

// TestGateIdleReadsState checks the layouts of the in-process locks that
// gateIdle and ticketServing read: Mutex's state word first, 0 when idle;
// TicketMutex's serving word second, counting the tickets served.
func TestGateIdleReadsState(t *testing.T) {
	var m lockword.Mutex
	if !gateIdle(&m) {
		t.Fatal("gateIdle false for an unlocked Mutex")
	}
	m.Lock()
	if gateIdle(&m) {
		t.Fatal("gateIdle true for a locked Mutex")
	}
	m.Unlock()
	if !gateIdle(&m) {
		t.Fatal("gateIdle false after Unlock")
	}
	var tm lockword.TicketMutex
	for i := range 3 {
		if got := ticketServing(&tm).Load(); got != uint32(i) {
			t.Fatalf("serving word %d after %d Lock/Unlock pairs", got, i)
		}
		tm.Lock()
		tm.Unlock()
	}
}

// firstHandle opens the object name through open and checks what every
// kind's getter promises: a second call returns the same handle, and
// asking for name as another kind (wrong) fails with ErrObjectKind.
func firstHandle[T comparable, U any](t *testing.T, name string, open func(string) (T, error), wrong func(string) (U, error)) T {
	t.Helper()
	h, err := open(name)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := open(name); again != h {
		t.Fatalf("a second %T call for %q returned another handle", h, name)
	}
	if _, err := wrong(name); !errors.Is(err, ErrObjectKind) {
		t.Fatalf("%T getter on %T %q: %v, want ErrObjectKind", *new(U), h, name, err)
	}
	return h
}

// An abiField is one row of a layout test: a constant's value in the code
// and the value docs/abi.md gives it, which C code and other processes
// rely on.
type abiField[T int | int64 | uint64] struct {
	name      string
	got, want T
}

// checkABI reports every row whose value differs from docs/abi.md's.
func checkABI[T int | int64 | uint64](t *testing.T, fields []abiField[T]) {
	t.Helper()
	for _, f := range fields {
		if f.got != f.want {
			t.Errorf("%s: %d (%#x), docs/abi.md says %d (%#x)", f.name, f.got, f.got, f.want, f.want)
		}
	}
}
