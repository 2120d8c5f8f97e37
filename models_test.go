package lockword

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
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

// TestModelsNameLiveCode keeps the SPIN models in models/ in step with the
// Go code: every function a model says it mirrors must still exist in the
// file it names. When this fails after a rename or a move, update the
// model's "models:" line (and, if the protocol changed, the model itself:
// see models/README.md).
func TestModelsNameLiveCode(t *testing.T) {
	pmls, err := filepath.Glob(filepath.Join("models", "*.pml"))
	if err != nil || len(pmls) == 0 {
		t.Fatalf("no models found in models/ (%v)", err)
	}
	funcs := map[string]map[string]bool{} // Go file -> its function names
	for _, pml := range pmls {
		claims := modelClaims(t, pml)
		if len(claims) == 0 {
			t.Errorf("%s names no Go code it mirrors (want lines like \"models: mutex.go (*Mutex).Lock\")", pml)
		}
		for _, c := range claims {
			names, ok := funcs[c.file]
			if !ok {
				names = goFuncNames(t, c.file)
				funcs[c.file] = names
			}
			if names == nil {
				t.Errorf("%s:%d: models %s, which does not exist", pml, c.line, c.file)
			} else if !names[c.fn] {
				t.Errorf("%s:%d: models %s %s, which that file no longer has", pml, c.line, c.file, c.fn)
			}
		}
	}
}

type modelClaim struct {
	file, fn string
	line     int
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
