package main

import (
	"os"
	"strconv"
	"strings"
)

// procState is what proc(5) says of process pid that an operator must be
// told beside "alive": "stopped" (kill -STOP, or a job-control stop),
// "tracing stop" (a debugger holds it), "zombie" (exited, not yet reaped)
// or "dead". It is "" for a running or sleeping process, and where
// /proc/PID/stat cannot be read (no such process, or not Linux). The
// state is the field after the command name, which is in parentheses and
// may hold spaces and parentheses itself: the last ')' ends it.
func procState(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	_, rest, ok := strings.Cut(string(b[strings.LastIndexByte(string(b), ')')+1:]), " ")
	if !ok || rest == "" {
		return ""
	}
	switch rest[0] {
	case 'T':
		return "stopped"
	case 't':
		return "tracing stop"
	case 'Z':
		return "zombie"
	case 'X', 'x':
		return "dead"
	}
	return ""
}

// processState is a process's state for inspect -json and rm -force:
// procState's, or "running" for a live process in none of those states
// (running or sleeping), or "" for a dead one whose state is unknown.
func processState(pid int, alive bool) string {
	if st := procState(pid); st != "" {
		return st
	}
	if alive {
		return "running"
	}
	return ""
}

// aliveText is the ALIVE column for a process that inspect found alive
// or not: "yes" or "no", with its state from procState when that is one
// to notice ("yes (stopped)": it holds on and never lets go until
// continued; a stopped holder is never robbed).
func aliveText(pid int, alive bool) string {
	s := yesNo(alive)
	if st := procState(pid); st != "" {
		s += " (" + st + ")"
	}
	return s
}
