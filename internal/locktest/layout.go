package locktest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Helpers of the layout rules (layoutrules_test.go in package lockword
// and in package shm), which read the package's files as syntax.

// ParsedFile is one non-test file of the package, parsed without comments:
// the layout rules are about code, and doc comments may name anything.
type ParsedFile struct {
	Name string
	F    *ast.File
}

// ParsePackageFiles parses the non-test Go files of the current directory.
func ParsePackageFiles(t *testing.T) map[string]ParsedFile {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]ParsedFile{}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = ParsedFile{Name: name, F: f}
	}
	return files
}

// Existing returns the files of list that exist, in files.
func Existing(files map[string]ParsedFile, list []string) []ParsedFile {
	var out []ParsedFile
	for _, name := range list {
		if pf, ok := files[name]; ok {
			out = append(out, pf)
		}
	}
	return out
}

// Idents calls fn with every identifier of f's code that may name a type
// of the package: not a qualified identifier's package or name (sync.Mutex),
// not a field or method selected from a value (x.f), not a field's or
// parameter's name, not a field name in a composite literal.
func Idents(f *ast.File, fn func(id *ast.Ident)) {
	imported := map[string]bool{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imported[name] = true
	}
	var visit func(n ast.Node) bool
	walk := func(n ast.Node) {
		if n != nil {
			ast.Inspect(n, visit)
		}
	}
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); !ok || !imported[x.Name] {
				walk(n.X)
			}
			return false
		case *ast.Field:
			walk(n.Type)
			return false
		case *ast.KeyValueExpr:
			if _, ok := n.Key.(*ast.Ident); ok {
				walk(n.Value)
				return false
			}
		case *ast.Ident:
			fn(n)
		}
		return true
	}
	walk(f)
}

// ReceiverType is the name of a method's receiver type: T in T, *T, T[P].
func ReceiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// CheckEveryFileHasARoom fails t for each non-test file of the package
// that is not in exactly one of the layer lists.
func CheckEveryFileHasARoom(t *testing.T, lists ...[]string) {
	files := ParsePackageFiles(t)
	seen := map[string]int{}
	for _, list := range lists {
		for _, name := range list {
			seen[name]++
		}
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if seen[name] != 1 {
			t.Errorf("%s is in %d of the layer lists (layoutrules_test.go), want 1: place it, and docs/architecture.md", name, seen[name])
		}
	}
}
