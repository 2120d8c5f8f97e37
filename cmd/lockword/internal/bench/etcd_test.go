//go:build linux

package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestEtcdKinds runs each etcd subject with 2 clients and in 2 processes
// (this test binary re-executed) for 200 ms on a member child: each must
// exclude (etcdbench checks the holds) and report every worker's
// acquisitions. About 5 s, most of it the member's start.
func TestEtcdKinds(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gs := etcdGroups(exe)
	defer gs[0].close()
	for _, g := range gs {
		for _, s := range g.Subjects {
			sample, err := s.run(context.Background(), Params{Goroutines: 2, Duration: 200 * time.Millisecond})
			if err != nil {
				t.Fatalf("%s, %s: %v", g.Name, s.Name, err)
			}
			if len(sample.PerWorker) != 2 || sample.Ops == 0 || sample.Waits == nil || sample.Elapsed < 200*time.Millisecond {
				t.Errorf("%s, %s: %d ops in %v, per worker %v", g.Name, s.Name, sample.Ops, sample.Elapsed, sample.PerWorker)
			}
		}
	}
}
