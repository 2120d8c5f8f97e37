//go:build linux

package bench

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSemtPeer: with a C compiler, the shared group measures the sem_t
// peer (its C children exclude: the counter is checked; each reports its
// acquisitions and waits), first among shm.Semaphore's peers; without
// one (PATH empty), the row is left out, the peers do not name it, and a
// note says so. About 0.5 s (one gcc build, 30 ms of 3 processes).
func TestSemtPeer(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: the skip half runs below")
	}
	g := Groups([]string{"shared"}, nil, "")[0]
	defer g.close()
	i := slices.IndexFunc(g.Subjects, func(s Subject) bool { return s.Name == semtName })
	if i < 0 || len(g.Notes) != 0 {
		t.Fatalf("shared group without sem_t: notes %q", g.Notes)
	}
	for _, s := range g.Subjects {
		if s.Name == "shm.Semaphore" && (len(s.Peers) == 0 || s.Peers[0] != semtName) {
			t.Errorf("shm.Semaphore's peers %q, want sem_t first", s.Peers)
		}
	}
	sample, err := g.Subjects[i].run(context.Background(), Params{Goroutines: 3, Duration: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(sample.PerWorker) != 3 || sample.Ops == 0 || sample.Waits.N < uint64(sample.Ops)/waitSampleEvery || sample.Elapsed < 30*time.Millisecond {
		t.Errorf("sem_t: %d ops in %v, per process %v, %d waits", sample.Ops, sample.Elapsed, sample.PerWorker, sample.Waits.N)
	}
}

// TestSemtSkippedWithoutCompiler: no C compiler on PATH leaves the sem_t
// row out with a note, and the rest of the group as it was.
func TestSemtSkippedWithoutCompiler(t *testing.T) {
	t.Setenv("PATH", "")
	g := Groups([]string{"shared"}, nil, "")[0]
	if len(g.Notes) != 1 || !strings.Contains(g.Notes[0], "sem_t") || !strings.Contains(g.Notes[0], "skipped") {
		t.Errorf("notes %q, want one saying sem_t is skipped", g.Notes)
	}
	for _, s := range g.Subjects {
		if s.Name == semtName || slices.Contains(s.Peers, semtName) {
			t.Errorf("subject %s (peers %q) names sem_t without a compiler", s.Name, s.Peers)
		}
	}
	if g.close != nil {
		t.Error("a cleanup without a build")
	}
}
