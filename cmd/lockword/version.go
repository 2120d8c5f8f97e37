package main

// The version subcommand: which build of lockword this is, from the build
// information the go command embeds in every binary (module version, VCS
// revision and time, Go version), so that a bug report can name it.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

const versionSummary = "print the build's module version, commit and Go version"

func versionHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: lockword version

Version prints the module version of this build of lockword, the VCS
commit it was built from (with its time, and "modified" when the work tree
had uncommitted changes) and the Go version that built it, as recorded by
the go command (runtime/debug.ReadBuildInfo). A binary built from a clone
with "go install ./cmd/lockword" or "go build" reports the version
"(devel)" and the commit; "go run" records no commit.

Exit status:
  0  printed
  2  usage error (version takes no arguments)
`)
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lockword version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			versionHelp(stdout)
			return exitOK
		}
		return reportFlagError(fs, err, stderr)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lockword version: unexpected argument %q: version takes none\n", fs.Arg(0))
		fmt.Fprintln(stderr, "Run 'lockword version -help' for usage.")
		return exitUsage
	}
	info, ok := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(info, ok))
	return exitOK
}

// versionLine is the line version prints for the build information info
// (ok false: the binary carries none).
func versionLine(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "lockword: no build information in this binary"
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	line := "lockword " + info.Main.Version
	if rev := vcs["vcs.revision"]; rev != "" {
		line += " commit " + rev[:min(len(rev), 12)]
		if t := vcs["vcs.time"]; t != "" {
			line += " (" + t + ")"
		}
		if vcs["vcs.modified"] == "true" {
			line += " modified"
		}
	} else if info.Main.Version == "(devel)" {
		// go run, or go build with -buildvcs=false (GOFLAGS may say so).
		line += ", no commit recorded"
	}
	return line + ", " + info.GoVersion
}
