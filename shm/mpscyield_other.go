//go:build !linux

package shm

import "runtime"

// osYield is mpscyield_linux.go's; no region exists here to wait on.
func osYield() { runtime.Gosched() }
