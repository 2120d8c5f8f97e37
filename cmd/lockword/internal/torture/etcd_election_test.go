//go:build linux

package torture

import (
	"testing"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
	"github.com/lockword/lockword/etcdlock"
)

// TestTortureEtcdElection: leaders deposed mid-term cannot write after
// their successors (etcd-election: PASS, every observer complete); with
// plain writes (etcd-election-unfenced) the run must FAIL. A deposition
// that lands after the leader's last write harms nothing, so an unfenced
// run in which no late write landed is made again, up to 3 times (each
// deposes about a third of its terms).
func TestTortureEtcdElection(t *testing.T) {
	t.Parallel()
	stdout, stderr, status := runEtcd(t, "-lock", "etcd-election", "-workers", "3", "-iters", "5")
	if status != exitOK {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	clitest.WantLines(t, stdout, []string{"Lock: etcd-election", "Late writes landed: 0",
		"Observers complete: 3 of 3 (every leader record once, in order)", "Hangs: 0", "Result: PASS"})
	if etcdField(t, stdout, "Depositions:") == 0 || etcdField(t, stdout, "Terms:") < 15 {
		t.Fatalf("too few terms or depositions:\n%s", stdout)
	}
	wantCaughtIn3(t, runEtcd, "late writes of deposed leaders landed", "the unfenced election", "a deposed leader's write", "-lock", "etcd-election-unfenced", "-workers", "3", "-iters", "5")
}

// TestElectionObserverCheckerFails: the observers' check reports a
// skipped, a duplicated and a missing leader record, and a gap.
func TestElectionObserverCheckerFails(t *testing.T) {
	ref := []etcdlock.Term{{Token: 5, Revision: 5}, {Token: 5, Revision: 7}, {Token: 9, Revision: 9}}
	for name, got := range map[string][]etcdlock.Term{
		"skipped":    {ref[0], ref[2]},
		"duplicated": {ref[0], ref[1], ref[1], ref[2]},
		"missing":    {ref[0], ref[1]},
		"gap":        {ref[0], ref[1], {Token: 9, Revision: 9, Gap: true}},
	} {
		o := &electionObserver{got: got}
		if why := o.compareWithin(ref, 0); why == "" {
			t.Errorf("%s: the check passed %+v against %+v", name, got, ref)
		}
	}
	if why := (&electionObserver{got: ref}).compareWithin(ref, 0); why != "" {
		t.Errorf("a complete observer failed: %s", why)
	}
}

// TestTortureEtcdElectionProcs: the campaigners in worker processes, a
// leader SIGKILLed and one SIGSTOPped past its lease mid-term: the fenced
// election passes with both depositions counted; the unfenced one must
// FAIL (the paused leader resumes and its plain writes land after its
// successor's), made again up to 3 times if the pause caught a leader
// with no write left.
func TestTortureEtcdElectionProcs(t *testing.T) {
	t.Parallel()
	args := []string{"-procs", "2", "-workers", "2", "-kill", "-kills", "1", "-pause", "-pauses", "1"}
	stdout, stderr, status := runEtcd(t, append([]string{"-lock", "etcd-election"}, args...)...)
	if status != exitOK {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	clitest.WantLines(t, stdout, []string{"Processes: 2; leaders SIGKILLed: 1, SIGSTOPped past their lease: 1",
		"Late writes landed: 0", "Observers complete: 3 of 3 (every leader record once, in order)", "Hangs: 0", "Result: PASS"})
	wantCaughtIn3(t, runEtcd, "late writes of deposed leaders landed", "the unfenced election across processes", "a paused leader's write", "-lock", "etcd-election-unfenced", "-procs", "2", "-workers", "2", "-pause", "-pauses", "1")
}
