// Command lockword exercises the locks of github.com/lockword/lockword from
// the outside, as a client of the library: it reaches nothing the package
// does not export.
//
// Usage:
//
//	lockword <command> [flags]
//
// The commands are:
//
//	torture   hammer locks from many goroutines and check that they exclude
//	inspect   show the objects and lock states of a shared region file
//	bench     measure every lock against its peer on this machine
//	ls        list the region files in a directory and who is attached
//	rm        remove region files that no live process is attached to
//	etcd      serve an embedded etcd in the foreground for trying etcdlock
//	version   print the build's module version, commit and Go version
//	help      show help for lockword or for one command
//
// Run "lockword help torture" for the torture flags. Exit status is 0 on
// success, 1 when a check failed and 2 on a usage error (for inspect, also
// a file that cannot be read as a region); an interrupted
// torture -procs run exits 128 + the signal (130 for SIGINT, 143 for
// SIGTERM, 129 for SIGHUP) after releasing its region.
//
// Each command lives in its own file and is listed in commands below; main
// only dispatches, so that tests can call run with their own arguments and
// writers and read the exit status without starting a process.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses shared by every command. Scripts rely on them, so they are
// part of the tool's contract and are listed in the help.
const (
	exitOK    = 0 // success: for torture, every lock passed
	exitFail  = 1 // a check failed: for torture, some lock failed
	exitUsage = 2 // usage error: unknown command, bad flag or flag value
)

// A command is one subcommand of lockword.
type command struct {
	name    string
	summary string // one line for the command list
	// run executes the command with the arguments after its name and
	// returns the exit status. Help requested with -h or -help goes to
	// stdout with status 0; usage errors go to stderr with exitUsage.
	run func(args []string, stdout, stderr io.Writer) int
	// help writes the command's full help.
	help func(w io.Writer)
}

// commands lists the subcommands in the order the help shows them. A new
// subcommand (inspect, say) goes in its own file and gets one line here.
var commands = []command{
	{name: "torture", summary: tortureSummary, run: runTorture, help: tortureHelp},
	{name: "inspect", summary: inspectSummary, run: runInspect, help: inspectHelp},
	{name: "bench", summary: benchSummary, run: runBench, help: benchHelp},
	{name: "ls", summary: lsSummary, run: runLs, help: lsHelp},
	{name: "rm", summary: rmSummary, run: runRm, help: rmHelp},
	{name: "etcd", summary: etcdSummary, run: runEtcd, help: etcdHelp},
	{name: "version", summary: versionSummary, run: runVersion, help: versionHelp},
}

// errText is err's message for a line that already names the command
// ("lockword inspect: ..."): without the "lockword: " that the library's
// errors start with, so that no line says lockword twice.
func errText(err error) string { return strings.TrimPrefix(err.Error(), "lockword: ") }

// newFlagSet returns the flag set of the command called name ("lockword
// inspect"). It prints nothing itself: the flag package would print a
// parse error without the command's name, so each command reports the
// error that Parse returns with reportFlagError, and its help on -help.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// reportFlagError reports err, a parse error of fs that is not
// flag.ErrHelp, as every usage error is: the command's prefix, the error,
// and the hint to the command's help. It returns exitUsage.
func reportFlagError(fs *flag.FlagSet, err error, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
	fmt.Fprintf(stderr, "Run '%s -help' for usage.\n", fs.Name())
	return exitUsage
}

// main runs the command line and exits with run's status.
func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program apart from the process: it dispatches args (the
// command line without the program name) and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "lockword: no command given")
		usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help":
		return runHelp(rest, stdout, stderr)
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	if strings.HasPrefix(name, "-") {
		if v := strings.TrimLeft(name, "-"); lookupCommand(v) != nil {
			// --version, say: the command is spelt without dashes.
			fmt.Fprintf(stderr, "lockword: %s is not a flag; the command is 'lockword %s'\n", name, v)
			fmt.Fprintln(stderr, "Run 'lockword -help' for usage.")
			return exitUsage
		}
		fmt.Fprintf(stderr, "lockword: flag %s given before the command: flags belong to a command, as in 'lockword torture %s'\n", name, name)
		fmt.Fprintln(stderr, "Run 'lockword -help' for usage.")
		return exitUsage
	}
	cmd := lookupCommand(name)
	if cmd == nil {
		fmt.Fprintf(stderr, "lockword: unknown command %q (commands: %s)\n", name, commandNames())
		fmt.Fprintln(stderr, "Run 'lockword -help' for usage.")
		return exitUsage
	}
	return cmd.run(rest, stdout, stderr)
}

// runHelp implements "lockword help [command]".
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		usage(stdout)
		return exitOK
	case 1:
		if args[0] == "help" {
			usage(stdout)
			return exitOK
		}
		if cmd := lookupCommand(args[0]); cmd != nil {
			cmd.help(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "lockword help: unknown command %q (commands: %s)\n", args[0], commandNames())
	default:
		fmt.Fprintln(stderr, "lockword help: expected at most one command name")
	}
	fmt.Fprintln(stderr, "Run 'lockword -help' for usage.")
	return exitUsage
}

// lookupCommand returns the command called name, or nil.
func lookupCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// commandNames lists the commands for error messages.
func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// usage writes the top-level help.
func usage(w io.Writer) {
	fmt.Fprint(w, `lockword exercises the locks of github.com/lockword/lockword.

Usage:
  lockword <command> [flags]
  lockword help [command]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-9s %s\n", "help", "show this help, or a command's help")
	fmt.Fprint(w, `
Run 'lockword help <command>' or 'lockword <command> -help' for a
command's flags, output and examples.

Exit status:
  0    success (torture: every lock passed)
  1    a check failed (torture: some lock lost updates or let two holders in;
       inspect: an object in the region is corrupt, or processes deadlock)
  2    usage error: unknown command, unknown flag or bad flag value
       (inspect: also a file that cannot be opened as a region)
  130  torture -procs interrupted by SIGINT (143: SIGTERM, 129: SIGHUP);
       its region is released

Examples:
  lockword torture                  # 16 workers x 100000 additions on every lock
  lockword torture -lock none       # an unprotected counter: must FAIL, exit 1
  lockword torture -procs 4 -kill   # 4 processes, SIGKILLed at random: exact accounting
  lockword inspect /dev/shm/orders  # who holds which lock in a shared region
  lockword bench -chart bench.svg   # every lock against its peer, about 55 s
  lockword ls                       # regions under /dev/shm, in use or stale
  lockword rm orders                # remove /dev/shm/orders once nobody uses it
  lockword etcd                     # an etcd on a free port, until Ctrl-C
  lockword help torture
`)
}
