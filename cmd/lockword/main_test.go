package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

// runCLI runs the program in-process, as main would, and returns what it
// printed and its exit status.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errOut bytes.Buffer
	status = run(args, &out, &errOut)
	return out.String(), errOut.String(), status
}

// TestMainUsage checks the dispatcher: help, unknown commands, misplaced
// flags.
func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		status      int
		out, errOut string
	}{
		{nil, exitUsage, "", "no command given"},
		{[]string{"bogus"}, exitUsage, "", `unknown command "bogus" (commands: torture, inspect, `},
		{[]string{"-workers", "4"}, exitUsage, "", "flags belong to a command"},
		{[]string{"help", "bogus"}, exitUsage, "", `unknown command "bogus"`},
		{[]string{"--help"}, exitOK, "Commands:", ""},
		{[]string{"-h"}, exitOK, "Exit status:", ""},
		{[]string{"help"}, exitOK, "torture", ""},
	} {
		stdout, stderr, status := runCLI(t, tc.args...)
		if status != tc.status || !strings.Contains(stdout, tc.out) || !strings.Contains(stderr, tc.errOut) {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, status, stdout, stderr, tc.status, tc.out, tc.errOut)
		}
		if tc.status == exitOK && stderr != "" || tc.status != exitOK && stdout != "" {
			t.Errorf("%q: output on the wrong stream: stdout %q, stderr %q", tc.args, stdout, stderr)
		}
	}
}

// TestBinaryExitStatus builds the command and checks its exit statuses as
// a shell sees them.
func TestBinaryExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command:", err)
	}
	bin := clitest.BuildLockword(t)
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{[]string{"torture", "-lock", "mutex", "-iters", "1000", "-workers", "4"}, exitOK},
		{[]string{"torture", "-lock", "none", "-iters", "1000", "-workers", "4"}, exitFail},
		{[]string{"torture", "-workers", "0"}, exitUsage},
		{[]string{"torture", "-lock", "ring", "-procs", "3"}, exitUsage},
		{[]string{"inspect", "orders", "-json", "-bogus"}, exitUsage},
	} {
		cmd := exec.Command(bin, tc.args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		status := 0
		if ee, ok := err.(*exec.ExitError); ok {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.status {
			t.Errorf("lockword %s: exit status %d, want %d\n%s", strings.Join(tc.args, " "), status, tc.status, out.String())
		}
	}
}
