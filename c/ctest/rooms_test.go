package ctest

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The C library's rooms (docs/architecture.md): lockword.c only joins the
// room files, in one translation unit; every room is joined exactly once,
// names the Go file it mirrors (which must exist), includes internal.h,
// and stays under maxRoomLines, so that no room grows back into the one
// 2,000-line file this layout replaced.
const maxRoomLines = 600

func TestCRooms(t *testing.T) {
	dir := filepath.Join("..")
	unity, err := os.ReadFile(filepath.Join(dir, "lockword.c"))
	if err != nil {
		t.Fatal(err)
	}
	include := regexp.MustCompile(`^#include "([a-z_]+\.c)"$`)
	joined := map[string]int{}
	var order []string
	inComment := false
	sc := bufio.NewScanner(strings.NewReader(string(unity)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case inComment:
			inComment = !strings.Contains(line, "*/")
		case strings.HasPrefix(line, "/*"):
			inComment = !strings.Contains(line, "*/")
		case line == "" || strings.HasPrefix(line, "//"):
		case include.MatchString(line):
			room := include.FindStringSubmatch(line)[1]
			joined[room]++
			order = append(order, room)
		default:
			t.Errorf("lockword.c: %q: it may hold only comments and the rooms' #include lines", line)
		}
	}
	rooms, err := filepath.Glob(filepath.Join(dir, "*.c"))
	if err != nil {
		t.Fatal(err)
	}
	twin := regexp.MustCompile(`(?m)^ \* Go twin: (.+)\.$`)
	goFile := regexp.MustCompile(`[a-z_/]+\.go`)
	for _, path := range rooms {
		name := filepath.Base(path)
		if name == "lockword.c" {
			continue
		}
		if joined[name] != 1 {
			t.Errorf("%s is joined %d times by lockword.c, want once", name, joined[name])
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(src)
		if n := strings.Count(text, "\n"); n > maxRoomLines {
			t.Errorf("%s has %d lines, more than %d: split it by what each part does", name, n, maxRoomLines)
		}
		if !strings.Contains(text, "\n * "+name+": ") {
			t.Errorf("%s does not open with its contract (\" * %s: ...\")", name, name)
		}
		if !strings.Contains(text, "#include \"internal.h\"") {
			t.Errorf("%s does not include internal.h", name)
		}
		m := twin.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("%s names no Go twin (\" * Go twin: FILE.go.\")", name)
			continue
		}
		for _, f := range goFile.FindAllString(m[1], -1) {
			if _, err := os.Stat(filepath.Join(dir, "..", f)); err != nil {
				t.Errorf("%s: its Go twin %s does not exist", name, f)
			}
		}
	}
	for room, n := range joined {
		if _, err := os.Stat(filepath.Join(dir, room)); err != nil || n != 1 {
			t.Errorf("lockword.c joins %s %d times (exists: %v)", room, n, err == nil)
		}
	}
	if len(order) == 0 {
		t.Fatal("lockword.c joins no rooms")
	}
}
