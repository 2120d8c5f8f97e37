//go:build linux

package shm

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/locktest"
)

// Test harness that the root package's tests also define: the bench
// shapes, the wake-latency measurement, the torn-read check and the log
// capture, for the shared kinds.

// brokenLock does not lock: the deliberately broken lock of the kernel's
// locktorture ("lock_busted") that every checker must catch.
type brokenLock struct{}

func (brokenLock) Lock()   {}
func (brokenLock) Unlock() {}

func withGOMAXPROCS(t *testing.T, procs int) {
	old := runtime.GOMAXPROCS(procs)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// benchKind is locktest.LockKind's shape, for positional literals.
type benchKind struct {
	Name string
	New  func() sync.Locker
}

// spinWork burns roughly n small steps of CPU (locktest.SpinWork).
func spinWork(n int) int { return locktest.SpinWork(n) }

// BenchmarkUncontended is one goroutine's Lock+Unlock of every kind.
func BenchmarkUncontended(b *testing.B) { locktest.BenchUncontended(b, benchKinds) }

// BenchmarkContended is every kind at 2 to 64 goroutines, nothing inside
// or between.
func BenchmarkContended(b *testing.B) { locktest.BenchContended(b, benchKinds) }

// BenchmarkRW99 is issue 4's reader-writer benchmark: 99% reads, at 2, 4,
// 16 and 64 goroutines, RWMutex against sync.RWMutex in the same run.
func BenchmarkRW99(b *testing.B) {
	locktest.BenchRWKinds(b, rwBenchKinds, 100)
}

// BenchmarkRWUncontended is one goroutine's RLock+RUnlock.
func BenchmarkRWUncontended(b *testing.B) {
	locktest.BenchRWUncontended(b, rwBenchKinds, false)
}

// lockShape is locktest's contended workload, run by benchmarkLockShape.
type lockShape = locktest.LockShape

// benchmarkLockShape is locktest.BenchLockShape.
func benchmarkLockShape(b *testing.B, l sync.Locker, s lockShape) { locktest.BenchLockShape(b, l, s) }

// workSteps is locktest.WorkSteps: a duration in spinWork steps.
func workSteps(d time.Duration) int { return locktest.WorkSteps(d) }

// syncBuffer, captureSlog and awaitLogs are locktest's (the stuck reports'
// log capture, shared with package shm's tests).
type syncBuffer = locktest.SyncBuffer

func captureSlog(t *testing.T) *syncBuffer { return locktest.CaptureSlog(t) }

func awaitLogs(logs *syncBuffer, substr string, n int) string {
	return locktest.AwaitLogs(logs, substr, n)
}

// tornPayload is locktest.TornPayload's shape, for positional literals.
type tornPayload struct{ A, B, C uint64 }

// loadNoRetry is a deliberately broken reader: it copies the payload once,
// skipping the sequence check and retry.
func loadNoRetry(s *SeqLock[tornPayload]) (v tornPayload) {
	s.c.CopyOut(&v)
	return v
}

// rwLocker is locktest's reader-writer lock interface.
type rwLocker = locktest.RWLocker

// wakeCase and wakeKind are locktest's, with positional literals.
type (
	wakeCase = locktest.WakeCase
	wakeKind = locktest.WakeKind
)

func TestWakeLatency(t *testing.T) { locktest.CheckWakeLatency(t, wakeKinds) }
