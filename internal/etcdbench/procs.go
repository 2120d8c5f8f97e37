package etcdbench

// The processes shape: Params.Workers processes (a binary that calls
// ChildMain first, re-executed), each with one client and one handle.
//
// The protocol with a child, over its standard input and output:
//
//	parent                          child
//	start, env childEnv=spec  ->    connect, make its handle
//	                          <-    "ready\n"
//	"<start Unix ns>\n"       ->    work from then (see work)
//	                          <-    one JSON childResult line, exit 0

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// childEnv carries a child's spec (a JSON childSpec).
const childEnv = "LOCKWORD_ETCD_BENCH_CHILD"

type childSpec struct {
	Kind      string        `json:"kind"`
	Endpoints []string      `json:"endpoints"`
	Prefix    string        `json:"prefix"`
	Count     int           `json:"count"`
	Duration  time.Duration `json:"duration"`
}

type childResult struct {
	Holds []hold `json:"holds"`
	Err   string `json:"err,omitempty"`
}

// ChildMain runs a bench child of one of kinds and exits if this process
// is one (its environment says so); otherwise it returns at once. Call it
// first thing in main, or in an init function of a test binary.
func ChildMain(kinds ...Kind) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return
	}
	if err := child(spec, kinds, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func child(specText string, kinds []Kind, stdin io.Reader, stdout io.Writer) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(specText), &spec); err != nil {
		return err
	}
	var kind *Kind
	for i := range kinds {
		if kinds[i].Name == spec.Kind {
			kind = &kinds[i]
		}
	}
	if kind == nil {
		return fmt.Errorf("unknown kind %q", spec.Kind)
	}
	cli, err := NewClient(spec.Endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx := context.Background()
	l, err := kind.New(ctx, cli, spec.Prefix)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintln(stdout, "ready")
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the start time: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return fmt.Errorf("bad start time %q", line)
	}
	start := time.Unix(0, ns)
	hs, err := work(ctx, l, start, spec.Count, start.Add(spec.Duration))
	res := childResult{Holds: hs}
	if err != nil {
		res.Err = err.Error()
	}
	return json.NewEncoder(stdout).Encode(&res)
}

// Procs measures kind with p.Workers processes, exe re-executed (it must
// call ChildMain with kind among its kinds), each with its own client of
// endpoints and its own handle on the lock named prefix. Starting the
// processes and their clients is not timed.
func Procs(ctx context.Context, exe string, endpoints []string, kind Kind, prefix string, p Params) (s Sample, err error) {
	spec, _ := json.Marshal(childSpec{Kind: kind.Name, Endpoints: endpoints, Prefix: prefix, Count: p.Count, Duration: p.Duration})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type proc struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr strings.Builder
	}
	procs := make([]*proc, p.Workers)
	defer func() {
		for _, c := range procs {
			if c != nil && c.cmd.ProcessState == nil {
				c.cmd.Process.Kill()
				c.cmd.Wait()
			}
		}
	}()
	for i := range procs {
		c := &proc{cmd: exec.CommandContext(ctx, exe)}
		c.cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		c.cmd.Stderr = &c.stderr
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			return s, err
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			return s, err
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			return s, err
		}
		procs[i] = c
	}
	fail := func(c *proc, what string, err error) error {
		return fmt.Errorf("%s process %d: %s: %v %s", kind.Name, c.cmd.Process.Pid, what, err, strings.TrimSpace(c.stderr.String()))
	}
	for _, c := range procs {
		if line, err := c.stdout.ReadString('\n'); err != nil || line != "ready\n" {
			return s, fail(c, "no ready line", err)
		}
	}
	cpu0, err := readCPU(p.ServerCPU)
	if err != nil {
		return s, err
	}
	start := time.Now().Add(startAhead)
	for _, c := range procs {
		fmt.Fprintf(c.stdin, "%d\n", start.UnixNano())
	}
	holds := make([][]hold, len(procs))
	for i, c := range procs {
		line, err := c.stdout.ReadString('\n')
		if err != nil {
			return s, fail(c, "no result", err)
		}
		var res childResult
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return s, fail(c, "bad result", err)
		}
		if res.Err != "" {
			return s, fail(c, "lock", errors.New(res.Err))
		}
		holds[i] = res.Holds
	}
	cpu1, err := readCPU(p.ServerCPU)
	if err != nil {
		return s, err
	}
	for _, c := range procs {
		if err := c.cmd.Wait(); err != nil {
			return s, fail(c, "exit", err)
		}
	}
	s, err = sample(start, holds)
	s.ServerCPU = cpu1 - cpu0
	return s, err
}
