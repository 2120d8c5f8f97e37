//go:build !amd64 && !arm64

package backoff

// Pause is a no-op where lockword has no spin-wait hint instruction.
func Pause(cycles uint32) {}
