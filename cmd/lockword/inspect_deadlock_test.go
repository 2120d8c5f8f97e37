//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockword/lockword/shm"
)

// TestDeadlockChild locks LOCKWORD_DEADLOCK's second field in the region
// named by the first, prints "locked", and once a line arrives on standard
// input locks the third: run by TestInspectDeadlock.
func TestDeadlockChild(t *testing.T) {
	args := strings.Split(os.Getenv("LOCKWORD_DEADLOCK"), ",")
	if len(args) != 3 {
		t.Skip("run by TestInspectDeadlock")
	}
	r, err := shm.Open(args[0], nil)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	hold, want := cycleLock(r, args[1]), cycleLock(r, args[2])
	hold.Lock()
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n')
	want.Lock()
	os.Exit(0)
}

// cycleLock returns the lock of TestInspectDeadlock's cycle named name:
// a Mutex "a", a TicketMutex "b", an RWMutex "c" taken for writing, so
// that the cycle runs through every shared lock kind with one holder.
func cycleLock(r *shm.Region, name string) sync.Locker {
	var l sync.Locker
	switch name {
	case "a":
		l, _ = r.Mutex(name)
	case "b":
		l, _ = r.TicketMutex(name)
	default:
		l, _ = r.RWMutex(name)
	}
	return l
}

// TestInspectDeadlock: three processes that each hold one lock (a Mutex,
// a TicketMutex, an RWMutex) and wait for the next one's are reported by
// inspect, text and -json, with every PID named and exit status 1; a
// region without a cycle exits 0 and has "deadlocks": [].
func TestInspectDeadlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	r, err := shm.Create(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stdout, _, status := runCLI(t, "inspect", "-json", path)
	if status != exitOK || !strings.Contains(stdout, `"deadlocks":[]`) {
		t.Fatalf("no cycle: status %d, want 0 and \"deadlocks\":[]:\n%s", status, stdout)
	}
	locks := []string{"a", "b", "c"}
	var pids []int
	var gos []*os.File
	for i := range locks {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeadlockChild$")
		cmd.Env = append(os.Environ(), "LOCKWORD_DEADLOCK="+path+","+locks[i]+","+locks[(i+1)%len(locks)])
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() })
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
			t.Fatalf("child: %q %v", line, err)
		}
		pids = append(pids, cmd.Process.Pid)
		gos = append(gos, in.(*os.File))
	}
	for _, in := range gos {
		fmt.Fprintln(in)
	}
	// The children sleep on their second lock within milliseconds; on a
	// loaded machine later: poll, within the test's deadline.
	var stderr string
	for {
		stdout, stderr, status = runCLI(t, "inspect", path)
		if status != exitOK {
			break
		}
		if d, ok := t.Deadline(); ok && time.Until(d) < 20*time.Second {
			t.Fatalf("no deadlock reported:\n%s", stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status != exitFail || !strings.Contains(stdout, "Deadlocks: 1") || !strings.Contains(stderr, "deadlock: PID ") {
		t.Fatalf("status %d, want %d, and the cycle on both streams:\n%s\n%s", status, exitFail, stdout, stderr)
	}
	for i, pid := range pids {
		want := fmt.Sprintf("PID %d holds %s, waits for %s", pid, locks[i], locks[(i+1)%len(locks)])
		if !strings.Contains(stdout, want) {
			t.Errorf("text lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, status = runCLI(t, "inspect", "-json", path)
	var j struct {
		Deadlocks []shm.Deadlock `json:"deadlocks"`
	}
	if err := json.Unmarshal([]byte(stdout), &j); err != nil || status != exitFail || len(j.Deadlocks) != 1 || len(j.Deadlocks[0].Members) != len(locks) {
		t.Fatalf("-json: status %d, err %v, deadlocks %+v:\n%s", status, err, j.Deadlocks, stdout)
	}
}
