// Package startgate runs a benchmark's worker processes so that they
// start together: N children of one binary (re-executed with a spec in
// its environment) that each get ready, are told when to start, and
// report one line. `lockword bench`'s cross-process kinds and the etcd
// benchmarks (internal/etcdbench) share it.
//
// The protocol with a child, over its standard input and output:
//
//	parent                     child
//	start, env name=spec  ->   set up (attach, connect)
//	                      <-   "ready\n"
//	"<start Unix ns>\n"   ->   wait until then, work
//	                      <-   one result line (JSON), exit 0
//
// The child side is ReadStart, after printing "ready".
package startgate

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// A Group is the children of one sample.
type Group struct {
	name  string // for errors: the kind they run
	procs []*proc
}

type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr strings.Builder
}

// Start starts n children of exe with env (NAME=spec) added to this
// process's environment, and waits until each says it is ready. ctx's end
// kills them. Close the group when done, also after an error.
func Start(ctx context.Context, exe, env, name string, n int) (*Group, error) {
	g := &Group{name: name}
	for range n {
		c := &proc{cmd: exec.CommandContext(ctx, exe)}
		c.cmd.Env = append(os.Environ(), env)
		c.cmd.Stderr = &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			return g, err
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			return g, err
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			return g, err
		}
		g.procs = append(g.procs, c)
	}
	for _, c := range g.procs {
		if line, err := c.stdout.ReadString('\n'); err != nil || line != "ready\n" {
			return g, g.fail(c, "no ready line", err)
		}
	}
	return g, nil
}

func (g *Group) fail(c *proc, what string, err error) error {
	return fmt.Errorf("%s process %d: %s: %v %s", g.name, c.cmd.Process.Pid, what, err, strings.TrimSpace(c.stderr.String()))
}

// Go tells every child to start at start.
func (g *Group) Go(start time.Time) {
	for _, c := range g.procs {
		fmt.Fprintf(c.stdin, "%d\n", start.UnixNano())
	}
}

// Results reads each child's result line, in the order started, and
// passes it to parse with the child's index; an error (no line, or
// parse's) names the child and what it wrote on stderr.
func (g *Group) Results(parse func(i int, line []byte) error) error {
	for i, c := range g.procs {
		line, err := c.stdout.ReadString('\n')
		if err != nil {
			return g.fail(c, "no result", err)
		}
		if err := parse(i, []byte(line)); err != nil {
			return g.fail(c, "bad result", err)
		}
	}
	return nil
}

// Wait waits for every child to exit and returns the first failure.
func (g *Group) Wait() error {
	for _, c := range g.procs {
		if err := c.cmd.Wait(); err != nil {
			return g.fail(c, "exit", err)
		}
	}
	return nil
}

// Close kills the children still running.
func (g *Group) Close() {
	for _, c := range g.procs {
		if c.cmd.Process != nil && c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	}
}

// ReadStart is the child's side once it has printed "ready": it reads
// the start time from r.
func ReadStart(r io.Reader) (time.Time, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the start time: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad start time %q", line)
	}
	return time.Unix(0, ns), nil
}
