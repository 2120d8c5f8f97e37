//go:build unix

package torture

import "syscall"

// pauseProcess and resumeProcess pause and resume a worker process (-pause).
func pauseProcess(pid int) error  { return syscall.Kill(pid, syscall.SIGSTOP) }
func resumeProcess(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
