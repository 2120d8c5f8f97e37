package lockword

import "github.com/lockword/lockword/internal/backoff"

// procyield executes the CPU's spin-wait hint cycles times (PAUSE on amd64,
// YIELD on arm64, nothing elsewhere): see backoff.Pause. The wrapper inlines,
// so the in-process spin loops call the assembly directly.
func procyield(cycles uint32) { backoff.Pause(cycles) }
