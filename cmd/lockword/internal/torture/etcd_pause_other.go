//go:build !unix

package torture

import "errors"

var errNoPause = errors.New("-pause needs SIGSTOP, which this platform lacks")

func pauseProcess(pid int) error  { return errNoPause }
func resumeProcess(pid int) error { return errNoPause }
