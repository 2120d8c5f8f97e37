//go:build !linux

package torture

import (
	"os"
	"syscall"
	"time"
)

// workerAttr: regions are Linux-only, so no worker process ever starts.
func workerAttr() *syscall.SysProcAttr { return nil }

func stopProcess(*os.Process, time.Duration) bool { return false }
func continueProcess(*os.Process)                 {}

// nameWorkerProcess: no worker process runs here.
func nameWorkerProcess() {}
