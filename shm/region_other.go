//go:build !linux

package shm

import (
	"os"
	"runtime"
)

// Shared regions need mmap(MAP_SHARED), flock and the shared kernel futex
// as Linux provides them, and /proc for owner liveness: elsewhere every
// constructor returns ErrUnsupported, and no Region or Mutex exists.
// These are region_linux.go's helpers, failing.

// regionsSupported: regions do not work here; every entry point says so.
const regionsSupported = false

func sysCreate(path string, perm os.FileMode) (int, error) { return -1, ErrUnsupported }
func sysOpen(path string, readOnly bool) (int, error)      { return -1, ErrUnsupported }
func sysWriteDenied(err error) bool                        { return false }
func sysOpenError(err error) error                         { return err }
func sysFstat(fd int) (fileInfo, error)                    { return fileInfo{}, ErrUnsupported }
func sysLstat(path string) (fileInfo, error)               { return fileInfo{}, ErrUnsupported }
func sysPread(fd int, b []byte, off int64) (int, error)    { return 0, ErrUnsupported }
func sysTruncate(fd int, size int64) error                 { return ErrUnsupported }
func sysMmap(fd, size int, readOnly bool) ([]byte, error)  { return nil, ErrUnsupported }
func sysMunmap(data []byte) error                          { return ErrUnsupported }
func sysUnlink(path string) error                          { return ErrUnsupported }
func sysClose(fd int) error                                { return ErrUnsupported }
func flock(fd int, how flockHow) error                     { return ErrUnsupported }
func sysFlockTry(fd int, how flockHow) (bool, error)       { return false, ErrUnsupported }
func sysProcLocks() ([]byte, error)                        { return nil, ErrUnsupported }
func sysFlockDescriptorHolders(id string) []int            { return nil }
func sysProcState(pid int) byte                            { return 0 }
func sysMemfd(name string) (int, error)                    { return -1, ErrUnsupported }
func sysSeal(fd uintptr) error                             { return ErrUnsupported }
func sysSealedAgainstShrink(fd int) bool                   { return false }
func sysReopen(fd uintptr) (int, error)                    { return -1, ErrUnsupported }
func selfIdentity() (procIdentity, error)                  { return procIdentity{}, ErrUnsupported }
func processAlive(id procIdentity) bool                    { return true }

var errNotReadWrite = ErrUnsupported

// osYield is region_linux.go's; no region exists here to wait on.
func osYield() { runtime.Gosched() }
