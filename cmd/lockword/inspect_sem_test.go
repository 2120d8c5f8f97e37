package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lockword/lockword/shm"
)

// TestInspectShowsSemaphore: a shared semaphore's table names each
// process's permits, a dead holder and a waiter.
func TestInspectShowsSemaphore(t *testing.T) {
	info := &shm.RegionInfo{Path: "r", Objects: []shm.ObjectInfo{
		{Name: "gpus", Kind: "semaphore", State: "owner-dead", Queued: 1, Semaphore: &shm.SemaphoreInfo{
			Capacity: 4, InUse: 3, DeadHolders: 1, Recovered: 5,
			Processes: []shm.SemaphoreProcess{
				{ProcessInfo: shm.ProcessInfo{Slot: 1, PID: 100, Alive: true}, Held: 1},
				{ProcessInfo: shm.ProcessInfo{Slot: 2, PID: 200}, Held: 2},
				{ProcessInfo: shm.ProcessInfo{Slot: 3, PID: 300, Alive: true}, Waiting: 2, Ticket: 9},
			}}},
	}}
	var b bytes.Buffer
	writeInspectText(&b, info, false)
	for _, want := range []string{"Semaphores: 1", "3/4", "PID 100: 1 held", "PID 200 (dead): 2 held", "PID 300: 0 held, waits for 2 (ticket 9)", "owner-dead, 1 queued"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}

// TestInspectSemaphoreHolders: a semaphore held by live processes names
// them in the objects row (no false "unknown" holder, alive "no" or
// HELD FOR "unknown"), and its JSON has no holder_alive false.
func TestInspectSemaphoreHolders(t *testing.T) {
	info := &shm.RegionInfo{Path: "r", Objects: []shm.ObjectInfo{
		{Name: "gpus", Kind: "semaphore", State: "held", Semaphore: &shm.SemaphoreInfo{
			Capacity: 4, InUse: 3,
			Processes: []shm.SemaphoreProcess{
				{ProcessInfo: shm.ProcessInfo{Slot: 1, PID: 100, Alive: true}, Held: 1},
				{ProcessInfo: shm.ProcessInfo{Slot: 2, PID: 200, Alive: true}, Held: 2},
			}}},
	}}
	var b bytes.Buffer
	writeInspectText(&b, info, false)
	var row string
	for l := range strings.SplitSeq(b.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "gpus") && strings.Contains(l, "semaphore") {
			row = l
			break
		}
	}
	if f := strings.Fields(row); len(f) < 7 || f[4] != "100,200" || f[5] != "-" || f[6] != "-" {
		t.Errorf("objects row %q: want HOLDER 100,200, ALIVE and HELD FOR -, in:\n%s", row, b.String())
	}
	j, err := json.Marshal(newInspectJSON(info))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(j, []byte("holder_alive")) || bytes.Contains(j, []byte("held_for_known")) {
		t.Errorf("semaphore JSON has one-holder fields: %s", j)
	}
}
