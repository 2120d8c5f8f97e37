package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lockword/lockword/shm"
)

// TestInspectShowsDeadReaders: an RW mutex's read holds of dead processes
// appear in the STATE column beside the live ones, and in -json as the
// encoded ObjectInfo's dead_readers.
func TestInspectShowsDeadReaders(t *testing.T) {
	info := &shm.RegionInfo{Path: "r", Objects: []shm.ObjectInfo{
		{Name: "rw", Kind: "rwmutex", State: "read-held", Readers: 1, DeadReaders: 2},
	}}
	var b bytes.Buffer
	writeInspectText(&b, info, false)
	if !strings.Contains(b.String(), "read-held, 1 readers, 2 dead readers") {
		t.Errorf("no dead readers in:\n%s", b.String())
	}
	j, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j), `"dead_readers":2`) {
		t.Errorf("no dead_readers in %s", j)
	}
}
