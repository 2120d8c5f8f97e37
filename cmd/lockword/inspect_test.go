package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockword/lockword/shm"
)

// TestShownName: names that could forge a row or reach the terminal as
// control sequences are quoted; plain ones are printed as they are.
func TestShownName(t *testing.T) {
	for name, want := range map[string]string{
		"orders":        "orders",
		"commandes-été": "commandes-été",
		"a\nb":          `"a\nb"`,
		"\xff\xfe":      `"\xff\xfe"`,
		"red\x1b[31m":   `"red\x1b[31m"`,
		"with space":    `"with space"`,
	} {
		if got := shownName(name); got != want {
			t.Errorf("shownName(%q) = %s, want %s", name, got, want)
		}
	}
}

// TestInspectFlagsAnywhere: flags may follow PATH, as users type them;
// -json prints one line (JSON Lines, as torture -json); what is wrong
// with a bad command line is said exactly, with exit status 2.
func TestInspectFlagsAnywhere(t *testing.T) {
	r, path := testRegion(t)
	if _, err := r.Mutex("orders"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-json", path}, {path, "-json"}, {path, "-json", "-all"}, {"-all", path, "-json"}, {path, "-json=true"},
	} {
		stdout, stderr, status := runCLI(t, append([]string{"inspect"}, args...)...)
		var info shm.RegionInfo
		if status != exitOK || stderr != "" || json.Unmarshal([]byte(stdout), &info) != nil || info.Path != path {
			t.Errorf("inspect %q: status %d, stderr %q, stdout %q; want the region as JSON", args, status, stderr, stdout)
		}
		if strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "}\n") {
			t.Errorf("inspect %q: want one JSON object on one line, got %q", args, stdout)
		}
	}
	for _, args := range [][]string{{path}, {"--", path}, {path, "-all"}, {path, "-json=false"}} {
		stdout, stderr, status := runCLI(t, append([]string{"inspect"}, args...)...)
		if status != exitOK || stderr != "" || !strings.HasPrefix(stdout, "Region: "+path) {
			t.Errorf("inspect %q: status %d, stderr %q, stdout %q; want the text report", args, status, stderr, stdout)
		}
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{path, path}, `expected exactly one region PATH, got 2: ["` + path + `" "` + path + `"]`},
		{[]string{path, "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-json"}, "expected exactly one region PATH, got none"},
		{[]string{"-etcd", "127.0.0.1:1"}, "expected exactly one etcd key PREFIX (with -etcd), got none"},
		{[]string{path, "--", "-json"}, "got 2"}, // after --, -json is a path
	} {
		stdout, stderr, status := runCLI(t, append([]string{"inspect"}, c.args...)...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, c.msg) || !strings.HasSuffix(stderr, "Run 'lockword inspect -help' for usage.\n") {
			t.Errorf("inspect %q: status %d, stdout %q, stderr %q; want 2, %q and the hint", c.args, status, stdout, stderr, c.msg)
		}
	}
}

// TestInspectRingsAndSeqLocks: the text report shows a ring's fill,
// closed flag, roles and traffic, and a seqlock's sequence and writer,
// from a real region.
func TestInspectRingsAndSeqLocks(t *testing.T) {
	r, path := testRegion(t)
	p, err := r.RingProducer("events", 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.RingConsumer("events", 4096)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if err := p.Send(ctx, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Receive(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s, err := shm.NewSeqLock[[2]int64](r, "quote")
	if err != nil {
		t.Fatal(err)
	}
	s.Store([2]int64{1, 2})
	stdout, stderr, status := runCLI(t, "inspect", path)
	if status != exitOK {
		t.Fatalf("inspect: %d %s", status, stderr)
	}
	me := fmt.Sprintf("%d (alive)", os.Getpid())
	for _, re := range []string{
		`events\s+ring\s+\d+\s+open\s+-\s+-\s+-\s+-\s+48 B \(1%\) full, see Rings`,
		`Rings: 1\n\s+NAME\s+CAPACITY\s+FILL\s+CLOSED\s+PRODUCER\s+CONSUMER\s+MESSAGES SENT/RECEIVED\s+BYTES SENT/RECEIVED\n` +
			`\s+events\s+4096\s+48 B \(1%\)\s+no\s+` + regexp.QuoteMeta(me) + `\s+` + regexp.QuoteMeta(me) + `\s+3/1\s+72/24\n`,
		`quote\s+seqlock\s+\d+\s+free\s`,
		`Seqlocks: 1\n\s+NAME\s+SEQUENCE\s+STORES\s+WRITER\n\s+quote\s+2\s+1\s+idle\n`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("inspect text does not match %s:\n%s", re, stdout)
		}
	}
	p.Close()
	stdout, _, _ = runCLI(t, "inspect", path)
	if !regexp.MustCompile(`events\s+4096\s+48 B \(1%\)\s+yes\s+-\s+` + regexp.QuoteMeta(me)).MatchString(stdout) {
		t.Errorf("after the producer's Close: want closed, no producer:\n%s", stdout)
	}
}

// TestInspectTextHidesDeadProcesses: dead process slots are counted, not
// listed, unless -all; rings with a dead side and torn seqlocks say so.
func TestInspectTextHidesDeadProcesses(t *testing.T) {
	info := &shm.RegionInfo{Path: "r",
		Objects: []shm.ObjectInfo{
			{Name: "events", Kind: "ring", Ring: &shm.RingInfo{Capacity: 1024, Used: 512,
				Producer: &shm.ProcessInfo{PID: 41, Alive: false}, Consumer: &shm.ProcessInfo{PID: 42, Alive: true}}},
			{Name: "quote", Kind: "seqlock", State: "owner-dead", HolderPID: 43,
				SeqLock: &shm.SeqLockInfo{Sequence: 9, Stores: 4, Writing: true, Torn: true}},
		},
		Processes: []shm.ProcessInfo{{Slot: 0, PID: 42, Alive: true}, {Slot: 1, PID: 41}, {Slot: 2, PID: 43}},
	}
	var b strings.Builder
	writeInspectText(&b, info, false)
	out := b.String()
	for _, re := range []string{
		`Processes attached: 3 \(1 alive\); 2 dead not listed \(-all lists them\)\n\s+SLOT\s+PID\s+ALIVE\n\s+0\s+42\s+yes\n$`,
		`events\s+1024\s+512 B \(50%\)\s+no\s+41 \(dead\)\s+42 \(alive\)`,
		`quote\s+9\s+4\s+died mid-Store \(PID 43\): the value is torn until the next Store`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("text does not match %s:\n%s", re, out)
		}
	}
	b.Reset()
	writeInspectText(&b, info, true)
	if out := b.String(); !regexp.MustCompile(`Processes attached: 3 \(1 alive\)\n\s+SLOT\s+PID\s+ALIVE\n\s+0\s+42\s+yes\n\s+1\s+41\s+no\n\s+2\s+43\s+no\n$`).MatchString(out) {
		t.Errorf("-all: want every slot listed:\n%s", out)
	}
}

// testRegion creates an empty region in a temporary directory, closed at
// the end of the test.
func testRegion(t *testing.T) (*shm.Region, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "region")
	r, err := shm.Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, path
}
