package main

// The etcd subcommand: the embedded etcd server that torture and the
// etcdlock tests use (internal/etcdembed; etcdtest in users' tests),
// served in the foreground for trying etcdlock by hand, with nothing to
// install.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/lockword/lockword/cmd/lockword/internal/interrupt"
	"github.com/lockword/lockword/internal/etcdembed"
)

const etcdSummary = "serve an embedded etcd in the foreground for trying etcdlock"

// maxEtcdMembers bounds -members: more members only slow every write.
const maxEtcdMembers = 7

func etcdHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: lockword etcd [-members N] [-port P] [-peer-port Q] [-data DIR]

Etcd starts an etcd server (etcd's own, embedded in lockword: nothing to
install) on 127.0.0.1 and prints its client endpoints, one line
"endpoints: host:port[,host:port...]", for etcdlock clients, etcdctl
(--endpoints) or "lockword inspect -etcd". It serves until SIGINT
(Ctrl-C), SIGTERM or SIGHUP, then stops and removes its data directory,
unless -data named one. The server is the one lockword's tests use: fast
raft ticks (the shortest lease TTL it grants is 1 s) and no fsync, so it
is for trying things, not for data that must survive a crash.

Flags:
  -members N     run N members in this process (default 1; 3 tolerates
                 the loss of one), at most 7
  -port P        client port of member 0; member i uses P+i (default 0:
                 free ports, so that it never collides with an etcd
                 already serving etcd's usual 2379 on this machine: the
                 endpoint is printed; -port 2379 gives the usual one)
  -peer-port Q   peer port of member 0; member i uses Q+i (default 0:
                 free ports); the two ranges must not overlap
  -data DIR      keep the members' data in DIR (created if missing) and
                 leave it on exit; a later run with the same DIR serves
                 the same data (with -members N, give the same N and
                 -peer-port: the members meet at the peer ports they
                 recorded there)

Exit status:
  0  stopped by a signal, as asked
  1  the server could not start (a port in use, say)
  2  usage error

Example:
  lockword etcd &                  # endpoints: 127.0.0.1:40213
  lockword inspect -etcd 127.0.0.1:40213 /locks/orders
`)
}

// etcdFlags is what etcd's command line asks for.
type etcdFlags struct {
	members, port, peerPort int
	data                    string
}

func runEtcd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lockword etcd")
	var f etcdFlags
	fs.IntVar(&f.members, "members", 1, "")
	fs.IntVar(&f.port, "port", 0, "")
	fs.IntVar(&f.peerPort, "peer-port", 0, "")
	fs.StringVar(&f.data, "data", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			etcdHelp(stdout)
			return exitOK
		}
		return reportFlagError(fs, err, stderr)
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "lockword etcd: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'lockword etcd -help' for usage.")
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q: etcd takes only flags", fs.Arg(0))
	case f.members < 1 || f.members > maxEtcdMembers:
		return usageErr("-members must be between 1 and %d, got %d", maxEtcdMembers, f.members)
	case f.port < 0 || f.port+f.members-1 > 65535:
		return usageErr("-port %d leaves no room for %d member(s) below 65536", f.port, f.members)
	case f.peerPort < 0 || f.peerPort+f.members-1 > 65535:
		return usageErr("-peer-port %d leaves no room for %d member(s) below 65536", f.peerPort, f.members)
	case f.port != 0 && f.peerPort != 0 && f.port < f.peerPort+f.members && f.peerPort < f.port+f.members:
		return usageErr("client ports %d-%d overlap peer ports %d-%d", f.port, f.port+f.members-1, f.peerPort, f.peerPort+f.members-1)
	case f.members > 1 && f.peerPort == 0 && f.data != "" && etcdembed.HasData(f.data):
		// Free peer ports would differ from those the members recorded
		// in DIR, where they look for each other: they would never meet.
		return usageErr("-data %s holds a cluster's data, whose members find each other at the peer ports they ran with: give those (-peer-port)", f.data)
	}
	in := interrupt.Catch()
	defer in.Stop()
	return serveEtcd(f, in.Done(), stdout, stderr)
}

// serveEtcd starts the server f describes, prints its endpoints and
// serves until stop is closed.
func serveEtcd(f etcdFlags, stop <-chan struct{}, stdout, stderr io.Writer) int {
	c, err := etcdembed.StartConfig(etcdembed.Config{Members: f.members, Dir: f.data, ClientPort: f.port, PeerPort: f.peerPort})
	if err != nil {
		fmt.Fprintf(stderr, "lockword etcd: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "endpoints: %s\n", strings.Join(c.Endpoints(), ","))
	if f.data == "" {
		fmt.Fprintf(stdout, "data: %s (removed on exit)\n", c.Dir())
	} else {
		fmt.Fprintf(stdout, "data: %s (kept)\n", c.Dir())
	}
	fmt.Fprintln(stdout, "Serving until Ctrl-C.")
	<-stop
	if err := c.Close(); err != nil {
		fmt.Fprintf(stderr, "lockword etcd: stopping: %v\n", err)
		return exitFail
	}
	fmt.Fprintln(stdout, "stopped")
	return exitOK
}
