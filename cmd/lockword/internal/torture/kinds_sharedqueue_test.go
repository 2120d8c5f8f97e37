//go:build linux

package torture

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTortureSharedQueue: more producer processes than this machine's 2
// cores, half of them SIGKILLed: every message of the survivors arrives,
// the killed ones' published messages arrive whole and in order, nothing
// is duplicated or mangled. Of the two killed, one is killed holding the
// claim word and one with its record's header written and no payload
// (each stops there once armed): the report counts a claim recovered and
// a record lost.
func TestTortureSharedQueue(t *testing.T) {
	stdout, stderr, status := runCLI(t, "torture", "-lock", "shared-queue", "-procs", "4", "-kill", "-items", "20000", "-json")
	if status != exitOK {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	var j struct {
		Received, Killed, Gaps, Duplicates, Mangled int64
		KilledReceived                              int64 `json:"killed_received"`
		KilledClaiming                              int   `json:"killed_claiming"`
		KilledClaimed                               int   `json:"killed_claimed"`
		Lost                                        int64
		ClaimsRecovered                             int64 `json:"claims_recovered"`
		Result                                      string
	}
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if j.Result != "PASS" || j.Killed != 2 || j.Received != 2*20000+j.KilledReceived || j.Gaps+j.Duplicates+j.Mangled != 0 {
		t.Fatalf("%s", stdout)
	}
	if j.KilledClaiming != 1 || j.KilledClaimed != 1 || j.Lost < 1 || j.ClaimsRecovered < 1 {
		t.Fatalf("want one producer killed holding the claim word and one with a record claimed, a claim recovered and a record lost:\n%s", stdout)
	}
	t.Log(stdout)
}

// TestTortureSharedQueueBrokenFails: the twin whose producers publish the
// header before the payload must FAIL, naming the torn messages.
func TestTortureSharedQueueBrokenFails(t *testing.T) {
	stdout, _, status := runCLI(t, "torture", "-lock", "shared-queue-broken", "-procs", "3", "-items", "20000")
	if status != exitFail || !strings.Contains(stdout, "mangled") {
		t.Fatalf("status %d, want FAIL naming mangled messages:\n%s", status, stdout)
	}
}
