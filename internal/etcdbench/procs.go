package etcdbench

// The processes shape: Params.Workers processes (a binary that calls
// ChildMain first, re-executed), each with one client and one handle,
// started together by internal/startgate; a child's result line is a
// JSON childResult.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lockword/lockword/internal/startgate"
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
	start, err := startgate.ReadStart(stdin)
	if err != nil {
		return err
	}
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
	g, err := startgate.Start(ctx, exe, childEnv+"="+string(spec), kind.Name, p.Workers)
	defer g.Close()
	if err != nil {
		return s, err
	}
	cpu0, err := readCPU(p.ServerCPU)
	if err != nil {
		return s, err
	}
	start := time.Now().Add(startAhead)
	g.Go(start)
	holds := make([][]hold, p.Workers)
	err = g.Results(func(i int, line []byte) error {
		var res childResult
		if err := json.Unmarshal(line, &res); err != nil {
			return err
		}
		if res.Err != "" {
			return errors.New(res.Err)
		}
		holds[i] = res.Holds
		return nil
	})
	if err != nil {
		return s, err
	}
	cpu1, err := readCPU(p.ServerCPU)
	if err != nil {
		return s, err
	}
	if err := g.Wait(); err != nil {
		return s, err
	}
	s, err = sample(start, timedEnd(start, p), holds)
	s.ServerCPU = cpu1 - cpu0
	return s, err
}
