//go:build !linux

package etcdembed

import (
	"errors"
	"time"
)

// processCPU is not implemented where there is no /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	return 0, errors.New("etcdembed: a child's CPU time is read on Linux only")
}
