//go:build !unix

package bench

import "time"

// processCPU reports false: no getrusage here (see cpu_unix_test.go).
func processCPU() (time.Duration, bool) { return 0, false }
