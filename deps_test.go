package lockword

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedDep reports whether the library may depend on package path: the
// standard library (no dot in the first path element), its own packages,
// and golang.org/x/sys.
func allowedDep(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") ||
		path == "github.com/lockword/lockword" || strings.HasPrefix(path, "github.com/lockword/lockword/internal/") ||
		strings.HasPrefix(path, "golang.org/x/sys/")
}

// TestRootDependencies asks the go command for everything the library
// imports, directly or not: the standard library, its own internal
// packages and golang.org/x/sys only. The CLI's dependencies (the progress
// bar, gofrs/flock, gonum's plotting for lockword bench's charts) must
// stay in cmd/, and etcd's client and gRPC in etcdlock.
func TestRootDependencies(t *testing.T) {
	if allowedDep("gonum.org/v1/plot") || allowedDep("github.com/gofrs/flock") || allowedDep("github.com/lockword/lockword/cmd/lockword/internal/bench") ||
		allowedDep("go.etcd.io/etcd/client/v3") || allowedDep("google.golang.org/grpc") || allowedDep("github.com/lockword/lockword/etcdlock") {
		t.Fatal("allowedDep lets a heavy dependency through")
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		cmd := exec.Command(gotool, "list", "-deps", "-f", "{{.ImportPath}}", ".", "./shm")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOOS=%s go list: %v", goos, err)
		}
		for _, p := range strings.Fields(string(out)) {
			if p == "github.com/lockword/lockword/shm" {
				continue // listed, not a dependency: the root never imports shm (it cannot: shm imports the root)
			}
			if !allowedDep(p) {
				t.Errorf("GOOS=%s: the library depends on %s", goos, p)
			}
		}
	}
}
