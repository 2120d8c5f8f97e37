//go:build !linux

package main

import "syscall"

// workerAttr: regions are Linux-only, so no worker process ever starts.
func workerAttr() *syscall.SysProcAttr { return nil }

// nameWorkerProcess: no worker process runs here.
func nameWorkerProcess() {}
