//go:build !unix

package main

import "errors"

var errNoPause = errors.New("-pause needs SIGSTOP, which this platform lacks")

func stopProcess(pid int) error { return errNoPause }
func contProcess(pid int) error { return errNoPause }
