//go:build !amd64 && !arm64

package lockword

// procyield is a no-op where lockword has no spin-wait hint instruction.
func procyield(cycles uint32) {}
