package etcdembed

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHz is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go supports (the kernel's ABI, whatever its
// internal tick rate).
const userHz = 100

// processCPU returns pid's user+system CPU time, all threads, from
// /proc/PID/stat (fields 14 and 15, counted after the command name, which
// may itself hold spaces and parentheses: hence the last ")").
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("etcdembed: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("etcdembed: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("etcdembed: /proc/%d/stat: bad CPU times %q %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / userHz, nil
}
