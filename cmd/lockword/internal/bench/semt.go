package bench

// The POSIX sem_t peer of the shm.Semaphore row (the shared group): a C
// child, cpeer/semt.c, compiled with the machine's C compiler when the
// group is made, and run in Params.Goroutines processes that speak the Go
// children's protocol (procs.go). A sem_t of one permit in a file mapped
// by every child guards a plain counter, as the one-permit shm.Semaphore
// does, and the counter is checked against the acquisitions the same way.
// Without a C compiler (or if the build fails) the row is left out and
// the group's table says why: the run goes on.

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed cpeer/semt.c
var semtSource []byte

const (
	semtName = "sem_t" // the subject, the shm.Semaphore row's first peer
	// semtCounterOff is where cpeer/semt.c's file keeps the counter.
	semtCounterOff = 64
)

// addSemt adds the sem_t subject to the shared group g, as the first peer
// of its shm.Semaphore subject, or a note saying why it is left out.
func addSemt(g *Group) {
	bin, dir, err := buildSemt()
	if err != nil {
		g.Notes = append(g.Notes, fmt.Sprintf("sem_t (POSIX, the peer of shm.Semaphore) is skipped: %v", err))
		return
	}
	g.close = func() { os.RemoveAll(dir) }
	for i := range g.Subjects {
		if s := &g.Subjects[i]; s.Name == "shm.Semaphore" {
			s.Peers = append([]string{semtName}, s.Peers...)
		}
	}
	// Last, so that the subjects before it keep their chart colours.
	g.Subjects = append(g.Subjects, Subject{Name: semtName, run: func(ctx context.Context, p Params) (Sample, error) {
		return runSemt(ctx, bin, p)
	}})
}

// buildSemt compiles cpeer/semt.c with gcc (or cc) into a new temporary
// directory, and returns the binary and the directory to remove.
func buildSemt() (bin, dir string, err error) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if cc, err = exec.LookPath("cc"); err != nil {
			return "", "", errors.New("no C compiler (gcc or cc) on PATH")
		}
	}
	if dir, err = os.MkdirTemp("", "lockword-semt-"); err != nil {
		return "", "", err
	}
	src, bin := filepath.Join(dir, "semt.c"), filepath.Join(dir, "semt")
	if err = os.WriteFile(src, semtSource, 0o600); err == nil {
		var out []byte
		if out, err = exec.Command(cc, "-O2", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
			line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
			err = fmt.Errorf("%s could not build it: %v: %s", cc, err, line)
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	return bin, dir, nil
}

// runSemt measures the sem_t peer in p.Goroutines processes of bin.
func runSemt(ctx context.Context, bin string, p Params) (s Sample, err error) {
	dir, err := os.MkdirTemp("", "lockword-bench-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "semt")
	if out, err := exec.CommandContext(ctx, bin, "init", file).CombinedOutput(); err != nil {
		return s, fmt.Errorf("sem_t init: %v: %s", err, bytes.TrimSpace(out))
	}
	return runChildren(ctx, bin, semtName, dir, p, func() (uint64, error) {
		data, err := os.ReadFile(file)
		if err != nil || len(data) < semtCounterOff+8 {
			return 0, fmt.Errorf("sem_t: reading the counter: %v (%d bytes)", err, len(data))
		}
		return ne.Uint64(data[semtCounterOff:]), nil
	})
}
