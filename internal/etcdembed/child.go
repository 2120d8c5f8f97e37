package etcdembed

// A single member in a child process: the benchmarks' server, whose CPU
// time is then its own, apart from the clients' in the parent (an
// embedded member in the clients' process shares their CPU account).
//
// The protocol with the child, this binary re-executed with childEnv set:
//
//	parent                    child
//	start, env childEnv=1 ->  start one member (Start(1))
//	                      <-  "<endpoint>,<endpoint>...\n"
//	close stdin           ->  stop the member, remove its data, exit 0

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// childEnv in a process's environment makes ChildMain serve a member.
const childEnv = "LOCKWORD_ETCD_MEMBER"

// childStopTimeout bounds how long Close waits for the child to stop its
// member before it kills it.
const childStopTimeout = 10 * time.Second

// ChildMain serves one member and exits if this process is a member child
// (its environment says so); otherwise it returns at once. Call it first
// thing in main, or in an init function of a test binary.
func ChildMain() {
	if os.Getenv(childEnv) == "" {
		return
	}
	c, err := Start(1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdembed child:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(c.Endpoints(), ","))
	io.Copy(io.Discard, os.Stdin) // until the parent closes it, or dies
	c.Close()
	os.Exit(0)
}

// A Child is a single-member cluster served by a child process.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	eps   []string
}

// StartChild starts exe (a binary that calls ChildMain first) as a member
// child and waits until its member is ready (startTimeout, 30 s). Close
// stops it.
func StartChild(exe string) (*Child, error) {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcdembed: starting a member child: %w", err)
	}
	c := &Child{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l = strings.TrimSpace(l); l != "" {
			c.eps = strings.Split(l, ",")
			return c, nil
		}
	case <-time.After(startTimeout):
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("etcdembed: the member child gave no endpoints: %s", strings.TrimSpace(stderr.String()))
}

// Endpoints lists the member's client address (host:port).
func (c *Child) Endpoints() []string { return c.eps }

// PID is the child's process ID.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// CPU returns the child's CPU time so far, user and system, all its
// threads, in the kernel's clock ticks (10 ms): read twice, the member's
// cost of what its clients asked in between. It returns an error where
// the platform does not say (see processCPU).
func (c *Child) CPU() (time.Duration, error) { return processCPU(c.cmd.Process.Pid) }

// Close stops the child's member, waiting for it up to childStopTimeout
// and killing it past that.
func (c *Child) Close() error {
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(childStopTimeout):
		c.cmd.Process.Kill()
		return errors.Join(errors.New("etcdembed: the member child did not stop; killed"), <-done)
	}
}
