//go:build linux

package shm

import "syscall"

// osYield gives the processor to another runnable thread of any process
// (sched_yield(2)). A producer waiting on a claim word held by another
// process needs that process to run; runtime.Gosched only yields to this
// process's goroutines, and with none runnable spins out the time slice.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
