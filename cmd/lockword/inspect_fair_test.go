//go:build linux

package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockword/lockword/shm"
)

// TestInspectFairKinds: inspect shows the shared ticket mutex (holder,
// queue length), rwmutex (readers) and cond (waiters) in text and JSON.
func TestInspectFairKinds(t *testing.T) {
	r, path := testRegion(t)
	other, err := shm.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	tm, _ := r.TicketMutex("tickets")
	otm, _ := other.TicketMutex("tickets")
	tm.Lock()
	done := make(chan struct{})
	go func() { otm.Lock(); otm.Unlock(); close(done) }()
	waitFor(t, func(o shm.ObjectInfo) bool { return o.Name == "tickets" && o.Queued == 1 }, path)
	rw, _ := r.RWMutex("settings")
	orw, _ := other.RWMutex("settings")
	rw.RLock()
	orw.RLock()
	cond, _ := r.Cond("ready")
	mu, _ := r.Mutex("ready-lock")
	condDone := make(chan struct{})
	go func() { mu.Lock(); cond.Wait(mu); mu.Unlock(); close(condDone) }()
	waitFor(t, func(o shm.ObjectInfo) bool { return o.Name == "ready" && o.Queued == 1 }, path)

	stdout, stderr, status := runCLI(t, "inspect", "-json", path)
	if status != exitOK {
		t.Fatalf("inspect -json: %d %s", status, stderr)
	}
	var info shm.RegionInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatal(err)
	}
	objs := map[string]shm.ObjectInfo{}
	for _, o := range info.Objects {
		objs[o.Name] = o
	}
	// HeldFor: the hold began on the fast path, so inspect stamped it (a
	// fresh object's zero stamp must not read as "held since boot").
	if o := objs["tickets"]; o.Kind != "ticket mutex" || o.State != "contended" || o.HolderPID != os.Getpid() || !o.HolderAlive || o.Queued != 1 || !o.HeldForKnown || o.HeldFor > time.Minute {
		t.Errorf("ticket mutex: %+v", o)
	}
	if o := objs["settings"]; o.Kind != "rwmutex" || o.State != "read-held" || o.Readers != 2 || o.HolderPID != 0 {
		t.Errorf("rwmutex: %+v", o)
	}
	if o := objs["ready"]; o.Kind != "cond" || o.State != "waiting" || o.Queued != 1 || !o.Waiters {
		t.Errorf("cond: %+v", o)
	}
	if !strings.Contains(stdout, `"queued":1`) || !strings.Contains(stdout, `"readers":2`) {
		t.Errorf("JSON lacks the queue length:\n%s", stdout)
	}
	stdout, _, status = runCLI(t, "inspect", path)
	t.Logf("\n%s", stdout)
	for _, want := range []string{"tickets", "ticket mutex", "contended, 1 queued", "settings", "rwmutex", "read-held, 2 readers", "ready", "cond", "waiting, 1 queued"} {
		if status != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("inspect text lacks %q (status %d)", want, status)
		}
	}
	tm.Unlock()
	<-done
	rw.RUnlock()
	orw.RUnlock()
	for {
		select {
		case <-condDone:
			return
		case <-time.After(time.Millisecond):
			cond.Signal()
		}
	}
}

// waitFor polls InspectRegion until some object satisfies ok.
func waitFor(t *testing.T, ok func(shm.ObjectInfo) bool, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, err := shm.Inspect(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range info.Objects {
			if ok(o) {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("inspect never showed the expected state")
}
