//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword/internal/faultpoint"
	"github.com/lockword/lockword/shm"
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

// TestMPSCClaimChild sends one message to the MPSC queue "jobs" and stops
// for good with the claim word held (faultpoint.MPSC's "claiming" step):
// run by TestInspectMPSCStoppedClaimer.
func TestMPSCClaimChild(t *testing.T) {
	r := childRegion(t, "LOCKWORD_MPSC_CLAIM", "TestInspectMPSCStoppedClaimer")
	p, err := r.MPSCProducer("jobs", 4096)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	faultpoint.MPSC = func(step string) {
		if step == "claiming" {
			fmt.Println("claimed")
			time.Sleep(time.Hour)
		}
	}
	p.Send(context.Background(), []byte("job"))
}

// TestInspectMPSCStoppedClaimer: a producer stopped (SIGSTOP) with the
// claim word held is shown as stopped, not as merely alive: every other
// producer waits on it until it is continued, and a live claimer is
// never taken back.
func TestInspectMPSCStoppedClaimer(t *testing.T) {
	r, path := testRegion(t)
	if _, err := r.MPSCConsumer("jobs", 4096); err != nil {
		t.Fatal(err)
	}
	cmd := startChild(t, "TestMPSCClaimChild", "claimed", "LOCKWORD_MPSC_CLAIM="+path)
	cmd.Process.Signal(syscall.SIGSTOP)
	waitProcState(t, cmd.Process.Pid, "stopped")
	stdout, stderr, status := runCLI(t, "inspect", path)
	if status != exitOK {
		t.Fatalf("inspect: %d %s", status, stderr)
	}
	me, child := regexp.QuoteMeta(fmt.Sprintf("%d (alive)", os.Getpid())), fmt.Sprintf("%d \\(stopped\\)", cmd.Process.Pid)
	if re := `\s+jobs\s+4096\s+0 B \(0%\)\s+no\s+` + me + `\s+1\s+` + child + `\s`; !regexp.MustCompile(re).MatchString(stdout) {
		t.Fatalf("inspect does not show the claimer stopped (%s):\n%s", re, stdout)
	}
}

// TestInspectCorruptMPSCFails: an MPSC queue with one message in it, and a
// word flipped past its bound (a negative producer count, a consumer word
// that is no owner token, a counter that more records than the indices
// passed, a wake word's unknown bit, a record at head that says another
// position), is corrupt: inspect names it and why on stderr and exits 1
// (it exited 0 and showed -1 producers, 2^44 claims recovered).
func TestInspectCorruptMPSCFails(t *testing.T) {
	u32 := func(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }
	for _, c := range []struct {
		off  int64
		word []byte
		want string
	}{
		{4, u32(0xffffffff), "producer count -1"},
		{0, u32(0xffffffff), "consumer word 0xffffffff is no owner token"},
		{136, u32(1 << 7), "wake words 0x80, 0x0 hold bits other than sleeping and closed"},
		{160, u64(1 << 44), "messages sent 17592186044416, more than the 2 records below tail 32"},
		{168, u64(1 << 44), "claims recovered 17592186044416, more than the 2 records below tail 32 and 268433408 process deaths"},
		{288, u64(1 << 44), "messages received 17592186044416 and lost 0, more than the 0 records below head 0"},
		{296, u64(3), "messages received 0 and lost 3, more than the 0 records below head 0"},
		{512 + 8, u64(4096), "record at head 0 says position 4096"},
	} {
		path := regionWithCorruptWord(t, func(r *shm.Region) error {
			p, err := r.MPSCProducer("q", 256)
			if err == nil {
				err = p.Send(context.Background(), []byte("one"))
				p.Close()
			}
			return err
		}, c.off, c.word)
		stdout, stderr, status := runCLI(t, "inspect", path)
		if status != exitFail || !strings.Contains(stderr, "1 corrupt object: q (MPSC queue "+c.want+")") ||
			!strings.Contains(stdout, "corrupt: "+c.want) {
			t.Errorf("status %d, stdout %q, stderr %q; want 1, the queue named on stderr with %q, and its row reading corrupt", status, stdout, stderr, c.want)
		}
	}
}
