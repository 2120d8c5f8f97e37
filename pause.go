package lockword

import (
	_ "unsafe" // for go:linkname: runtimeCanSpin

	"github.com/lockword/lockword/internal/backoff"
)

// procyield executes the CPU's spin-wait hint cycles times (PAUSE on amd64,
// YIELD on arm64, nothing elsewhere): see backoff.Pause. The wrapper inlines,
// so the in-process spin loops call the assembly directly.
func procyield(cycles uint32) { backoff.Pause(cycles) }

// runtimeCanSpin is the Go scheduler's own test of whether sync.Mutex may
// spin (runtime.sync_runtime_canSpin, which the runtime exports by
// go:linkname for packages outside it and keeps for them). With i = 0 it
// reports true only on a multicore machine where another processor is
// running a goroutine (the holder may be about to release) and this
// processor's run queue is empty. A waiter that spins while a goroutine
// is runnable on its processor keeps that goroutine off the processor:
// if the spins keep succeeding, until the scheduler preempts the spinner
// after its 10 ms time slice (BENCHMARKS.md, "Mutex and SpinMutex").
//
//go:linkname runtimeCanSpin sync.runtime_canSpin
func runtimeCanSpin(i int) bool
