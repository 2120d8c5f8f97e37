package lockword

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// modelsLine is a model's claim about the Go code it mirrors, one per
// function: "models: FILE FUNC", FILE relative to the module root, FUNC a
// function name or a method as (*T).Name or T.Name.
var modelsLine = regexp.MustCompile(`models:\s+(\S+\.go)\s+(\S+)`)

// modelsCLine is a row of a model's step table for the C library:
// "models-c: STEP GOFUNC c/FILE.c CFUNC", the Go function and the C
// function that make the model's step STEP.
var modelsCLine = regexp.MustCompile(`models-c:\s+(\S+)\s+(\S+)\s+(c/\S+\.c)\s+(\w+)`)

// TestModelsNameLiveCode keeps the SPIN models in models/ in step with the
// code: every Go function a model says it mirrors must still exist, in the
// file it names or (after a move to another file or package) anywhere in
// the module, and every C function of a model's step table must be
// defined in the C file it names. When this fails after a rename, update
// the model's "models:" or "models-c:" line (and, if the protocol
// changed, the model itself: see models/README.md).
func TestModelsNameLiveCode(t *testing.T) {
	pmls, err := filepath.Glob(filepath.Join("models", "*.pml"))
	if err != nil || len(pmls) == 0 {
		t.Fatalf("no models found in models/ (%v)", err)
	}
	goFuncs := moduleFuncs(t)
	cFuncs := map[string]map[string]bool{} // C file -> its function names
	for _, pml := range pmls {
		claims := modelClaims(t, pml)
		if len(claims) == 0 {
			t.Errorf("%s names no Go code it mirrors (want lines like \"models: mutex.go (*Mutex).Lock\")", pml)
		}
		for _, c := range claims {
			if c.cfile != "" {
				names, ok := cFuncs[c.cfile]
				if !ok {
					names = cFuncNames(t, c.cfile)
					cFuncs[c.cfile] = names
				}
				if names == nil {
					t.Errorf("%s:%d: step %s names %s, which does not exist", pml, c.line, c.step, c.cfile)
				} else if !names[c.cfn] {
					t.Errorf("%s:%d: step %s names %s %s, which that file does not define", pml, c.line, c.step, c.cfile, c.cfn)
				}
			}
			if !goFuncs.has(c.file, c.fn) {
				t.Errorf("%s:%d: models %s %s, which no Go file of the module declares", pml, c.line, c.file, c.fn)
			}
		}
	}
}

// funcIndex is every function and method declared in the module's Go
// files (tests excluded), by file and by name.
type funcIndex struct {
	byFile map[string]map[string]bool // slash path from the module root -> names
	byName map[string]bool
}

// has reports whether fn is declared in file, or, since code moves
// between files and packages, anywhere in the module.
func (x funcIndex) has(file, fn string) bool {
	return x.byFile[file][fn] || x.byName[fn]
}

// moduleFuncs indexes the functions of every non-test Go file under the
// module root, skipping hidden directories and testdata.
func moduleFuncs(t *testing.T) funcIndex {
	t.Helper()
	x := funcIndex{byFile: map[string]map[string]bool{}, byName: map[string]bool{}}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		names := goFuncNames(t, path)
		x.byFile[filepath.ToSlash(path)] = names
		for n := range names {
			x.byName[n] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// cFuncDef matches the first line of a C function definition as c/*.c
// write them: at the start of a line, the return type, the name, the
// parameters and the opening brace on one line.
var cFuncDef = regexp.MustCompile(`^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;]*\)\s*\{`)

// cFuncNames returns the functions defined in a C file; nil if the file
// does not exist.
func cFuncNames(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(file))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := cFuncDef.FindStringSubmatch(line); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

// A modelClaim is a "models:" line (file and fn), or a "models-c:" row
// (step, fn, and the C function cfn in cfile).
type modelClaim struct {
	file, fn         string
	step, cfile, cfn string
	line             int
}

func modelClaims(t *testing.T, pml string) []modelClaim {
	t.Helper()
	f, err := os.Open(pml)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var claims []modelClaim
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if m := modelsLine.FindStringSubmatch(sc.Text()); m != nil {
			claims = append(claims, modelClaim{file: m[1], fn: m[2], line: n})
		} else if m := modelsCLine.FindStringSubmatch(sc.Text()); m != nil {
			claims = append(claims, modelClaim{step: m[1], fn: m[2], cfile: m[3], cfn: m[4], line: n})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return claims
}

// goFuncNames returns the functions and methods declared in a Go file,
// methods spelled (*T).Name or T.Name; nil if the file does not exist.
func goFuncNames(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.FromSlash(file), nil, parser.SkipObjectResolution)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			recv := fd.Recv.List[0].Type
			if ix, ok := recv.(*ast.IndexExpr); ok { // generic receiver T[E]
				recv = ix.X
			}
			switch r := recv.(type) {
			case *ast.StarExpr:
				if ix, ok := r.X.(*ast.IndexExpr); ok {
					r.X = ix.X
				}
				if id, ok := r.X.(*ast.Ident); ok {
					name = "(*" + id.Name + ")." + name
				}
			case *ast.Ident:
				name = r.Name + "." + name
			}
		}
		names[strings.TrimSpace(name)] = true
	}
	return names
}
