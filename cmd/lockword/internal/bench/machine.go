package bench

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// A Machine describes where a run was made, for the table's header and
// the chart's caption: figures mean little without it.
type Machine struct {
	CPU        string    // model name, from /proc/cpuinfo where there is one
	Cores      int       // runtime.NumCPU
	GOMAXPROCS int       //
	OS         string    // GOOS/GOARCH and the kernel release where known
	Go         string    // runtime.Version
	LoadStart  string    // load average (1, 5, 15 min) when the run started; "" where unknown
	LoadEnd    string    // and when it ended
	Date       time.Time // when the run started, UTC
}

// ThisMachine describes this machine now; call Finish at the end of the
// run for the closing load average.
func ThisMachine() Machine {
	m := Machine{CPU: cpuModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), LoadStart: loadAverage(),
		Date: time.Now().UTC()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.OS += " " + strings.TrimSpace(string(b))
	}
	return m
}

// Finish records the load average at the end of the run.
func (m *Machine) Finish() { m.LoadEnd = loadAverage() }

// String is the one-line description: the chart's caption and the
// table's header.
func (m *Machine) String() string {
	s := fmt.Sprintf("%s, %d cores, GOMAXPROCS %d, %s, %s", m.CPU, m.Cores, m.GOMAXPROCS, m.OS, m.Go)
	if m.LoadStart != "" {
		s += ", load average " + m.LoadStart
		if m.LoadEnd != "" {
			s += " at the start, " + m.LoadEnd + " at the end"
		}
	}
	return s + ", " + m.Date.Format("2006-01-02 15:04 UTC")
}

// cpuModel returns the CPU's model name, or GOARCH where unknown.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (strings.TrimSpace(k) == "model name" || strings.TrimSpace(k) == "Model") {
				return strings.Join(strings.Fields(v), " ")
			}
		}
	}
	return runtime.GOARCH
}

// loadAverage returns the 1, 5 and 15 minute load averages ("1.32 0.60
// 0.32"), or "" where the system does not say.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
