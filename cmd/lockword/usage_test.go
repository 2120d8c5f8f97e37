package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestUsageErrorsExit2 is the audit of every usage error path, through run
// as main calls it: each bad command line exits 2 (never 1, which means a
// check failed), prints nothing on stdout, says what is wrong, and ends
// with the hint to the right help. The message tests of each command
// (TestTortureUsageErrors, TestTortureProcsUsage, TestInspectErrors) say
// more about the wording; this one covers every command and every kind of
// mistake: unknown flag, missing or bad flag value, a value out of range,
// flags that cannot be combined, a kind's own constraint, stray or missing
// arguments.
func TestUsageErrorsExit2(t *testing.T) {
	const (
		top     = "Run 'lockword -help' for usage.\n"
		torture = "Run 'lockword torture -help' for usage.\n"
		inspect = "Run 'lockword inspect -help' for usage.\n"
		version = "Run 'lockword version -help' for usage.\n"
	)
	for _, c := range []struct {
		args []string
		msg  string // in stderr
		hint string // stderr's last line
	}{
		// The dispatcher and help.
		{[]string{"bogus"}, `unknown command "bogus"`, top},
		{[]string{"-json"}, "flags belong to a command", top},
		{[]string{"help", "bogus"}, `unknown command "bogus"`, top},
		{[]string{"help", "torture", "inspect"}, "at most one command name", top},
		// torture: the flag package's errors.
		{[]string{"torture", "-bogus"}, "flag provided but not defined: -bogus", torture},
		{[]string{"torture", "-workers"}, "flag needs an argument: -workers", torture},
		{[]string{"torture", "-workers", "many"}, `invalid value "many" for flag -workers`, torture},
		{[]string{"torture", "-json=maybe"}, `invalid boolean value "maybe" for -json`, torture},
		// torture: values and combinations.
		{[]string{"torture", "mutex"}, "torture takes only flags", torture},
		{[]string{"torture", "-workers", "0"}, "-workers must be between 1", torture},
		{[]string{"torture", "-iters", "0"}, "-iters must be at least 1", torture},
		{[]string{"torture", "-value", "0"}, "-value must be between 1", torture},
		{[]string{"torture", "-work", "-1"}, "-work must be between 0", torture},
		{[]string{"torture", "-duration", "-1s"}, "-duration must not be negative", torture},
		{[]string{"torture", "-lock", "mutex", "-contentionprofile", "/nonexistent/dir/f"}, "-contentionprofile: open /nonexistent/dir/f", torture},
		{[]string{"torture", "-lock", "shared-queue", "-procs", "2", "-iters", "1"}, "-iters does not apply", torture},
		{[]string{"torture", "-items", "-1"}, "-items must not be negative", torture},
		{[]string{"torture", "-items", "5", "-duration", "1s"}, "-items and -duration cannot be combined", torture},
		{[]string{"torture", "-iters", "5", "-duration", "1s"}, "-iters and -duration cannot be combined", torture},
		{[]string{"torture", "-iters", "9000000000000000000"}, "does not fit the 64-bit counter", torture},
		{[]string{"torture", "-lock", "bogus"}, `unknown lock kind "bogus"`, torture},
		{[]string{"torture", "-lock", ""}, "names an empty lock kind", torture},
		{[]string{"torture", "-procs", "-1"}, "-procs must be between 0 and 512", torture},
		{[]string{"torture", "-procs", "513"}, "-procs must be between 0 and 512", torture},
		{[]string{"torture", "-procs", "8", "-workers", "4"}, "-procs 8 needs at least as many -workers", torture},
		{[]string{"torture", "-kill"}, "-kill needs -procs N", torture},
		{[]string{"torture", "-procs", "2", "-kill", "-iters", "5"}, "-kill runs until -kills kills", torture},
		{[]string{"torture", "-kills", "5"}, "-kills needs -kill", torture},
		{[]string{"torture", "-procs", "2", "-kill", "-kills", "0"}, "-kills must be at least 1", torture},
		{[]string{"torture", "-procs", "2", "-lock", "mutex"}, "kind mutex runs in one process", torture},
		{[]string{"torture", "-lock", "shared"}, "kind shared runs across processes", torture},
		// torture: a kind's own constraints (they exited 1 before).
		{[]string{"torture", "-lock", "ring", "-procs", "3"}, "shared-ring: the shared ring has one producer and one consumer process: use -procs 2, not 3", torture},
		{[]string{"torture", "-lock", "shared-ring", "-procs", "4", "-workers", "4"}, "use -procs 2, not 4", torture},
		{[]string{"torture", "-lock", "shared,ring", "-procs", "4"}, "use -procs 2, not 4", torture},
		{[]string{"torture", "-lock", "ring", "-procs", "2", "-kill"}, "shared-ring: -kill kills lock holders", torture},
		// inspect.
		{[]string{"inspect"}, "expected exactly one region PATH, got none", inspect},
		{[]string{"inspect", "a", "b"}, "expected exactly one region PATH, got 2", inspect},
		{[]string{"inspect", "a", "-bogus"}, "flag provided but not defined: -bogus", inspect},
		{[]string{"inspect", "-json=maybe", "a"}, `invalid boolean value "maybe" for -json`, inspect},
		{[]string{"inspect", ""}, "the region PATH is empty", inspect},
		// ls and rm.
		{[]string{"ls", "-bogus"}, "flag provided but not defined: -bogus", "Run 'lockword ls -help' for usage.\n"},
		{[]string{"ls", "a", "b"}, "expected at most one DIR", "Run 'lockword ls -help' for usage.\n"},
		{[]string{"rm"}, "expected at least one region PATH", "Run 'lockword rm -help' for usage.\n"},
		{[]string{"rm", "x", "-force=maybe"}, `invalid boolean value "maybe" for -force`, "Run 'lockword rm -help' for usage.\n"},
		{[]string{"rm", "-force", "x", ""}, "a region PATH is empty", "Run 'lockword rm -help' for usage.\n"},
		{[]string{"ls", ""}, "the DIR is empty", "Run 'lockword ls -help' for usage.\n"},
		// etcd.
		{[]string{"etcd", "now"}, `unexpected argument "now"`, "Run 'lockword etcd -help' for usage.\n"},
		{[]string{"etcd", "-members", "0"}, "-members must be between 1 and 7", "Run 'lockword etcd -help' for usage.\n"},
		{[]string{"etcd", "-port", "65535", "-members", "3"}, "-port 65535 leaves no room for 3 member(s)", "Run 'lockword etcd -help' for usage.\n"},
		{[]string{"etcd", "-peer-port", "-1"}, "-peer-port -1 leaves no room", "Run 'lockword etcd -help' for usage.\n"},
		{[]string{"etcd", "-port", "2379", "-peer-port", "2380", "-members", "3"}, "client ports 2379-2381 overlap peer ports 2380-2382", "Run 'lockword etcd -help' for usage.\n"},
		{[]string{"etcd", "-members", "3", "-data", clusterData(t)}, "holds a cluster's data, whose members find each other at the peer ports", "Run 'lockword etcd -help' for usage.\n"},
		// version.
		{[]string{"version", "now"}, `unexpected argument "now"`, version},
		{[]string{"version", "-bogus"}, "flag provided but not defined: -bogus", version},
	} {
		stdout, stderr, status := runCLI(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, c.msg) || !strings.HasSuffix(stderr, c.hint) {
			t.Errorf("lockword %s: status %d, stdout %q, stderr %q; want 2, nothing, %q and the hint %q",
				strings.Join(c.args, " "), status, stdout, stderr, c.msg, strings.TrimSpace(c.hint))
		}
	}
	// No command at all: the whole usage, on stderr.
	if stdout, stderr, status := runCLI(t); status != exitUsage || stdout != "" || !strings.Contains(stderr, "no command given") || !strings.Contains(stderr, "Commands:") {
		t.Errorf("lockword: status %d, stdout %q, stderr %q; want 2 and the usage", status, stdout, stderr)
	}
}

// TestFlagErrorsNameTheCommand: a flag the command does not define, or a
// bad flag value, is reported on one line that starts with the command's
// prefix, as every other usage error is ("lockword torture: flag provided
// but not defined: -bogus"), for every command in the table.
func TestFlagErrorsNameTheCommand(t *testing.T) {
	for _, c := range commands {
		for _, bad := range [][]string{{"-bogus"}, {"-bogus=1"}} {
			stdout, stderr, status := runCLI(t, append([]string{c.name}, bad...)...)
			first, _, _ := strings.Cut(stderr, "\n")
			want := "lockword " + c.name + ": flag provided but not defined: -bogus"
			if status != exitUsage || stdout != "" || first != want {
				t.Errorf("lockword %s %s: status %d, stdout %q, stderr %q; want 2 and the first line %q",
					c.name, bad[0], status, stdout, stderr, want)
			}
		}
	}
	_, stderr, _ := runCLI(t, "bench", "-count", "many")
	if want := `lockword bench: invalid value "many" for flag -count: parse error`; !strings.HasPrefix(stderr, want) {
		t.Errorf("bench -count many: stderr %q, want it to start %q", stderr, want)
	}
}

// TestVersion: lockword version prints one line naming the build; the
// line is made from the build information as recorded.
func TestVersion(t *testing.T) {
	stdout, stderr, status := runCLI(t, "version")
	if status != exitOK || stderr != "" || !strings.HasPrefix(stdout, "lockword ") || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("version: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	if stdout, _, status := runCLI(t, "version", "-help"); status != exitOK || !strings.Contains(stdout, "Usage: lockword version") {
		t.Errorf("version -help: status %d, %q", status, stdout)
	}
}

func TestVersionLine(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "03f2390abcdef0123456789"}, {Key: "vcs.time", Value: "2026-12-01T09:30:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, c := range []struct {
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{info, true, "lockword (devel) commit 03f2390abcde (2026-12-01T09:30:00Z) modified, go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, true, "lockword v1.2.3, go1.26.8"},
		{nil, false, "lockword: no build information in this binary"},
	} {
		if got := versionLine(c.info, c.ok); got != c.want {
			t.Errorf("versionLine = %q, want %q", got, c.want)
		}
	}
}
