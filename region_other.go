//go:build !linux

package lockword

import "os"

// Shared regions need mmap(MAP_SHARED), flock and the shared kernel futex
// as Linux provides them, and /proc for owner liveness: elsewhere every
// constructor returns ErrUnsupported, and no Region or SharedMutex exists.

func openRegion(path string, size int64, opts *RegionOptions, mode openMode) (*Region, error) {
	return nil, ErrUnsupported
}

func (r *Region) object(name string, kind objectKind, size uint32) (regionObject, error) {
	return regionObject{}, ErrUnsupported
}

func (r *Region) close() error { return ErrUnsupported }

func (r *Region) tokenAlive(token uint32) (bool, uint32) { return true, 0 }

func (r *Region) pid() int { return 0 }

func monoNowNs() int64 { return 0 }

func removeRegion(path string, force bool) error { return ErrUnsupported }
func (r *Region) faultCause() error              { return ErrUnsupported }

// CreateMemfdRegion returns ErrUnsupported: see the Linux version.
func CreateMemfdRegion(name string, size int64, opts *RegionOptions) (*Region, error) {
	return nil, ErrUnsupported
}

// OpenRegionFile returns ErrUnsupported: see the Linux version.
func OpenRegionFile(f *os.File, opts *RegionOptions) (*Region, error) { return nil, ErrUnsupported }

// File returns nil: no Region exists on this platform.
func (r *Region) File() *os.File { return nil }

// Check returns ErrUnsupported: no Region exists on this platform.
func (r *Region) Check() error { return ErrUnsupported }

func (r *Region) refreshObjects() error { return ErrUnsupported }
