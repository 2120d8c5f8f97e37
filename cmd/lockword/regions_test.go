//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockword/lockword"
)

// TestLsRm: ls tells a region in use from a stale one (and, with -all, a
// file that is not a region), and rm removes only what nobody uses, unless
// forced, with the exit statuses the help promises.
func TestLsRm(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "orders")
	r, err := lockword.CreateRegion(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Mutex("m"); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("not a region"), 0o600)

	lsJSON := func(args ...string) []lsEntry {
		t.Helper()
		stdout, stderr, status := runCLI(t, append([]string{"ls", "-json"}, args...)...)
		if status != exitOK {
			t.Fatalf("ls: %d %s", status, stderr)
		}
		var list []lsEntry
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if line == "" {
				continue
			}
			var e lsEntry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%v: %q", err, line)
			}
			list = append(list, e)
		}
		return list
	}
	if l := lsJSON(dir); len(l) != 1 || l[0].Path != path || l[0].Live != 1 || l[0].Objects != 1 || l[0].State != "in use" {
		t.Fatalf("ls of a region in use: %+v", l)
	}
	if l := lsJSON(dir, "-all"); len(l) != 2 || l[0].Path != junk || l[0].Error == "" {
		t.Fatalf("ls -all: %+v", l)
	}
	if _, stderr, status := runCLI(t, "rm", path); status != exitFail || !strings.Contains(stderr, "live processes") {
		t.Fatalf("rm of a region in use: %d %q", status, stderr)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if l := lsJSON(dir); len(l) != 1 || l[0].Live != 0 || l[0].State != "stale" {
		t.Fatalf("ls of a stale region: %+v", l)
	}
	stdout, _, _ := runCLI(t, "ls", dir)
	if !strings.Contains(stdout, "stale") || strings.Contains(stdout, "junk") {
		t.Errorf("ls text:\n%s", stdout)
	}
	if _, stderr, status := runCLI(t, "rm", path); status != exitOK {
		t.Fatalf("rm of a stale region: %d %s", status, stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
	if _, _, status := runCLI(t, "rm", junk); status != exitFail {
		t.Fatalf("rm of a non-region without -force: %d", status)
	}
	if _, stderr, status := runCLI(t, "rm", junk, "-force"); status != exitOK { // a flag after the path
		t.Fatalf("rm PATH -force: %d %s", status, stderr)
	}
	for _, args := range [][]string{{"rm"}, {"rm", path}, {"rm", "-bogus", path}, {"ls", "-bogus"}, {"ls", dir, dir}, {"ls", filepath.Join(dir, "nope")}} {
		if _, stderr, status := runCLI(t, args...); status != exitUsage || stderr == "" {
			t.Errorf("%q: status %d, stderr %q: want %d and a message", args, status, stderr, exitUsage)
		}
	}
}

// TestLsEmpty: a directory without regions says so, rather than printing a
// header over nothing; -json prints no line at all.
func TestLsEmpty(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes"), []byte("not a region"), 0o600)
	if stdout, stderr, status := runCLI(t, "ls", dir); status != exitOK || stdout != "no regions in "+dir+"\n" {
		t.Errorf("ls of a directory without regions: status %d, stdout %q, stderr %q; want \"no regions in %s\"", status, stdout, stderr, dir)
	}
	if stdout, _, status := runCLI(t, "ls", "-json", dir); status != exitOK || stdout != "" {
		t.Errorf("ls -json: status %d, stdout %q; want nothing", status, stdout)
	}
}
