//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestInspectMPSCQueue: inspect shows an MPSC queue's fill, consumer,
// producers and counts, in text and -json; ls lists its region and rm
// refuses while the consumer is attached.
func TestInspectMPSCQueue(t *testing.T) {
	r, path := testRegion(t)
	c, err := r.MPSCConsumer("jobs", 4096)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		p, err := r.MPSCProducer("jobs", 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Send(ctx, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Receive(ctx, nil); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, status := runCLI(t, "inspect", path)
	if status != exitOK {
		t.Fatalf("inspect: %d %s", status, stderr)
	}
	me := regexp.QuoteMeta(fmt.Sprintf("%d (alive)", os.Getpid()))
	for _, re := range []string{
		`jobs\s+mpsc queue\s+\d+\s+open\s+-\s+-\s+-\s+-\s+32 B \(1%\) full, see MPSC queues`,
		`MPSC queues: 1\n\s+NAME\s+CAPACITY\s+FILL\s+CLOSED\s+CONSUMER\s+PRODUCERS\s+CLAIMING\s+MESSAGES SENT/RECEIVED\s+LOST\s+CLAIMS RECOVERED\n` +
			`\s+jobs\s+4096\s+32 B \(1%\)\s+no\s+` + me + `\s+2\s+-\s+2/1\s+0\s+0\n`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("inspect text does not match %s:\n%s", re, stdout)
		}
	}
	stdout, stderr, status = runCLI(t, "inspect", "-json", path)
	if status != exitOK {
		t.Fatalf("inspect -json: %d %s", status, stderr)
	}
	var got struct {
		Objects []struct {
			Kind string `json:"kind"`
			MPSC *struct {
				Producers        int    `json:"producers"`
				Used             int64  `json:"used_bytes"`
				MessagesSent     uint64 `json:"messages_sent"`
				MessagesReceived uint64 `json:"messages_received"`
				Lost             uint64 `json:"lost"`
			} `json:"mpsc_queue"`
		} `json:"objects"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if len(got.Objects) != 1 || got.Objects[0].Kind != "mpsc queue" || got.Objects[0].MPSC == nil ||
		got.Objects[0].MPSC.Producers != 2 || got.Objects[0].MPSC.Used != 32 || got.Objects[0].MPSC.MessagesSent != 2 || got.Objects[0].MPSC.MessagesReceived != 1 {
		t.Fatalf("inspect -json: %s", stdout)
	}
	if stdout, stderr, status := runCLI(t, "ls", filepath.Dir(path)); status != exitOK || !regexp.MustCompile(regexp.QuoteMeta(filepath.Base(path))).MatchString(stdout) {
		t.Fatalf("ls: %d %s %s", status, stdout, stderr)
	}
	if _, _, status := runCLI(t, "rm", path); status == exitOK {
		t.Fatal("rm removed a region whose queue has a live consumer")
	}
}
