package lockword

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeDependOnUnpublished follows the README's instructions for
// depending on lockword before it is published: its `go mod edit` line,
// pointed at this clone, in a fresh module outside it, must make a
// program that imports the package build. The module cache stands in for
// the network (GOPROXY=off), which the test does not need.
func TestReadmeDependOnUnpublished(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not with -short")
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^go mod edit (-require=github.com/lockword/lockword@\S+) -replace=github.com/lockword/lockword=\.\./lockword$`).FindStringSubmatch(string(readme))
	if line == nil {
		t.Fatal("README has no `go mod edit ... -replace=github.com/lockword/lockword=../lockword` line")
	}
	clone, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(gotool, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("mod", "init", "example.com/app")
	run("mod", "edit", line[1], "-replace=github.com/lockword/lockword="+clone)
	prog := "package main\n\nimport \"github.com/lockword/lockword\"\n\nfunc main() {\n\tvar m lockword.Mutex\n\tm.Lock()\n\tm.Unlock()\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	run("mod", "tidy")
	run("build", "-o", os.DevNull, ".")
}

// TestReadmeListsConstructedTypes: every exported type of the package that
// has a constructor (func NewT) has a row in README's "What is in the box"
// table, so that a reader looking for it there finds it. Queue[T], the MPMC
// queue, once had none: a reader after a multi-producer queue saw only the
// single-producer Ring.
func TestReadmeListsConstructedTypes(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, box, ok := strings.Cut(string(readme), "## What is in the box")
	if !ok {
		t.Fatal(`README has no "## What is in the box" section`)
	}
	box, _, _ = strings.Cut(box, "\n## ")
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	ctor := regexp.MustCompile(`(?m)^func New([A-Z]\w*)(\[[^\]]*\])?\(`)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ctor.FindAllStringSubmatch(string(src), -1) {
			n++
			name, generic := m[1], m[2] != ""
			row := "| `" + name + "` |"
			if generic {
				row = "| `" + name + "[T]` |"
			}
			if !strings.Contains(box, row) {
				t.Errorf("README's \"What is in the box\" has no row %s for New%s (%s)", row, name, f)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no constructors: the pattern is stale")
	}
}
