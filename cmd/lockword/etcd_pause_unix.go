//go:build unix

package main

import "syscall"

// stopProcess and contProcess pause and resume a worker process (-pause).
func stopProcess(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }
func contProcess(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
