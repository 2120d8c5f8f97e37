package etcdlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestDocsShowExamples: the code README.md's "Across machines" and
// docs/etcd.md show is example_test.go's, verbatim, so that it compiles
// and its Example runs it against a real etcd.
func TestDocsShowExamples(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]string{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			funcs[fd.Name.Name] = string(src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset])
		}
	}
	for _, c := range []struct {
		doc   string
		funcs []string
	}{
		{"../README.md", []string{"updateOrder", "reserveStock", "lead", "reprice"}},
		{"../docs/etcd.md", []string{"updateOrder", "reserveStock", "runGPUJob", "lead", "reprice"}},
	} {
		doc, err := os.ReadFile(c.doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range c.funcs {
			fn, ok := funcs[name]
			if !ok {
				t.Fatalf("example_test.go has no func %s", name)
			}
			if !strings.Contains(string(doc), "```go\n"+fn+"\n```\n") {
				t.Errorf("%s does not show func %s of etcdlock/example_test.go verbatim in a ```go block", c.doc, name)
			}
		}
	}
}
