package bench

import "golang.org/x/sys/unix"

// flockFD is flock(2) on a descriptor kept open: the cheapest use of flock.
type flockFD int

func openFlockFD(path string) (procLocker, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	return flockFD(fd), err
}

func (f flockFD) Lock() error   { return unix.Flock(int(f), unix.LOCK_EX) }
func (f flockFD) Unlock() error { return unix.Flock(int(f), unix.LOCK_UN) }
