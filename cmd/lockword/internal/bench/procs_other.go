//go:build !linux

package bench

// Shared regions are Linux-only, so no cross-process kind runs here.
func openFlockFD(string) (procLocker, error) { return nil, errNoProcs }
