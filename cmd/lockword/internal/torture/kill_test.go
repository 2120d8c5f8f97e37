package torture

import (
	"strings"
	"testing"
)

// TestKillReportNamesUnaccountedRecoveries: when recoveries and holder
// kills disagree, the failure names the recovery that no judged holder
// kill accounts for: a dead PID recovered twice, or one whose kill was
// judged to be of no holder, with what the lock showed then.
func TestKillReportNamesUnaccountedRecoveries(t *testing.T) {
	k := &killReport{
		Kills: 3, HolderKills: 1, Recoveries: 3,
		missed:        map[int]string{12: "kill 2: holder PID 0"},
		recoveredPIDs: []int{11, 12, 11},
	}
	got := strings.Join(k.failures(), "; ")
	for _, want := range []string{
		"3 recoveries for 1 kills of a holder: ",
		"PID 11 recovered 2 times",
		"PID 12 recovered, but its kill was judged no holder's (kill 2: holder PID 0)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("failures %q lack %q", got, want)
		}
	}
	if strings.Count(got, "PID 11 recovered") != 1 {
		t.Errorf("PID 11 named more than once: %q", got)
	}
	ok := &killReport{Kills: 1, HolderKills: 1, Recoveries: 1, recoveredPIDs: []int{11}}
	if f := ok.failures(); len(f) != 0 {
		t.Errorf("a matching report fails: %q", f)
	}
}
