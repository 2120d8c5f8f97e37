package main

// The ls and rm subcommands: find the region files that processes left
// behind (a region outlives its processes: under /dev/shm, until reboot)
// and remove the ones nobody uses any more.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockword/lockword/shm"
)

const (
	lsSummary = "list the region files in a directory (/dev/shm) and who is attached"
	rmSummary = "remove region files that no live process is attached to"
)

func lsHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: lockword ls [-json] [-all] [DIR]

Ls lists the lockword regions among the regular files of DIR (default
/dev/shm), read as "lockword inspect" reads them (attaching to none), one
line each:

  PATH      the file
  SIZE      its size in bytes
  OBJECTS   how many named objects it holds
  LIVE      attached processes that are alive
  DEAD      process slots whose process died without detaching (killed)
  CREATED   when the region was created
  STATE     "in use" (a live process is attached) or "stale" (none is:
            "lockword rm PATH" removes it); or, for a file it could not
            read, why: "file lock held" (a process, named with whether it
            is stopped, held the region's file lock for 2 s) or
            "unreadable" (permission denied, an I/O error), with the error

Files that are not regions are left out; -all lists them too, with the
reason (a corrupt, truncated or never initialized region shows here).
A file that could not be read is always listed: it may be a region.

Flags:
  -all    also list files that are not valid regions, with the reason
  -json   one JSON object per line (JSON Lines): path, size_bytes, objects,
          live, dead, created, state; for a file that could not be read
          (and, with -all, a non-region) path, size_bytes, state (if any)
          and error instead of the counts and created, which are unknown

Exit status:
  0  the directory was read, and every region in it
  1  some file could not be read (listed with the reason): the listing
     may lack a region
  2  usage error, or the directory cannot be read

Examples:
  lockword ls                 # regions under /dev/shm
  lockword ls -all /tmp/lw    # and the files there that are not regions
`)
}

func rmHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: lockword rm [-force] PATH...

Rm removes each region file PATH (a name without a slash is looked up
under /dev/shm) unless a live process is attached to it: it validates the
file as an open does and counts the live processes in its process table
under the region's exclusive file lock, the lock that attaching takes
(shm.Remove). A process that died attached (killed) does not
count. It never follows a symbolic link.

A file that is not a lockword region is never removed, with or without
-force: one whose magic number is not a region's, or that was never
initialized (empty or all zero: nothing in it says whose it is).

Flags:
  -force  remove even while live processes are attached (they keep their
          mappings; nobody else can open the region any more), and remove
          a damaged region (truncated, resized, corrupt checksum or table)
          whose file still starts with a region header (magic number and
          ABI version 1); each removal it forced is named on stderr with
          what it overrode: the live processes (PID, running or stopped,
          the locks and semaphore permits each held), the file lock's
          holder, or the damage

Exit status:
  0  every PATH was removed
  1  some PATH was not removed: live processes are attached (their PIDs
     are named), it is a damaged region and -force was not given, it has
     another ABI version, or its file lock stayed held (the holder's PID
     is named)
  2  usage error, or a PATH is missing, not a regular file or not a
     lockword region

Examples:
  lockword rm orders               # /dev/shm/orders, if nobody uses it
  lockword ls -json | jq -r 'select(.state == "stale") | .path' | xargs lockword rm
`)
}

// lsEntry is one line of ls; its JSON form (MarshalJSON) is ls -json's.
type lsEntry struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size_bytes"`
	Objects int       `json:"objects"`
	Live    int       `json:"live"`
	Dead    int       `json:"dead"`
	Created time.Time `json:"created"`
	// State is "in use" or "stale"; with Error, "file lock held" or
	// "unreadable" (the file could not be read), or "" (not a region).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// MarshalJSON leaves out, for an entry with an error, the counts and the
// creation time, which ls could not read: zeros there would read as a
// region nobody uses, created in year 1.
func (e lsEntry) MarshalJSON() ([]byte, error) {
	if e.Error == "" {
		type plain lsEntry // without this method
		return json.Marshal(plain(e))
	}
	return json.Marshal(struct {
		Path  string `json:"path"`
		Size  int64  `json:"size_bytes"`
		State string `json:"state,omitempty"`
		Error string `json:"error"`
	}{e.Path, e.Size, e.State, e.Error})
}

// notRegion reports whether err, from reading a file as a region, says
// what the file holds (not a region, or a damaged one: ls -all lists it)
// rather than that the file could not be read (ls always lists it).
func notRegion(err error) bool {
	for _, e := range []error{shm.ErrNotInitialized, shm.ErrBadMagic, shm.ErrBadVersion,
		shm.ErrTruncated, shm.ErrNotRegularFile, shm.ErrUnsupported} {
		if errors.Is(err, e) {
			return true
		}
	}
	return damagedRegion(err)
}

func runLs(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lockword ls")
	asJSON := fs.Bool("json", false, "JSON Lines")
	all := fs.Bool("all", false, "also files that are not regions")
	if st := parseFlags(fs, args, stdout, stderr, lsHelp); st >= 0 {
		return st
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "lockword ls: expected at most one DIR")
		fmt.Fprintln(stderr, "Run 'lockword ls -help' for usage.")
		return exitUsage
	}
	dir := shm.DefaultRegionDir
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if dir == "" {
		fmt.Fprintln(stderr, "lockword ls: the DIR is empty (no DIR means /dev/shm)")
		fmt.Fprintln(stderr, "Run 'lockword ls -help' for usage.")
		return exitUsage
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "lockword ls: %v\n", err)
		return exitUsage
	}
	var list []lsEntry
	status := exitOK
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if !strings.Contains(path, "/") {
			// "lockword ls ." joins to a bare name, which Inspect (and rm
			// after it) would look up under /dev/shm: keep it in DIR.
			path = "./" + path
		}
		info, err := shm.Inspect(path)
		if err != nil {
			le := lsEntry{Path: path, Error: errText(err)}
			if fi, _ := e.Info(); fi != nil {
				le.Size = fi.Size()
			}
			switch {
			case errors.Is(err, shm.ErrFileLockTimeout):
				// A region, most likely, behind a holder that does not
				// let go.
				le.State = "file lock held"
			case !notRegion(err):
				le.State = "unreadable"
			case !*all:
				continue
			}
			if le.State != "" {
				status = exitFail // the listing may lack a region
			}
			list = append(list, le)
			continue
		}
		le := lsEntry{Path: path, Size: info.Size, Objects: len(info.Objects), Created: info.Created, State: "stale"}
		for _, p := range info.Processes {
			if p.Alive {
				le.Live++
			} else {
				le.Dead++
			}
		}
		if le.Live > 0 {
			le.State = "in use"
		}
		list = append(list, le)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, le := range list {
			enc.Encode(le)
		}
		return status
	}
	if len(list) == 0 {
		fmt.Fprintf(stdout, "no regions in %s\n", dir)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSIZE\tOBJECTS\tLIVE\tDEAD\tCREATED\tSTATE")
	for _, le := range list {
		if le.Error != "" {
			what := "not a region"
			if le.State != "" {
				what = le.State
			}
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t%s: %s\n", shownName(le.Path), le.Size, what, le.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", shownName(le.Path), le.Size, le.Objects, le.Live, le.Dead, le.Created.Format(time.RFC3339), le.State)
	}
	tw.Flush()
	return status
}

func runRm(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lockword rm")
	force := fs.Bool("force", false, "remove even while in use, or not a region")
	if st := parseFlags(fs, args, stdout, stderr, rmHelp); st >= 0 {
		return st
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "lockword rm: expected at least one region PATH")
		fmt.Fprintln(stderr, "Run 'lockword rm -help' for usage.")
		return exitUsage
	}
	if slices.Contains(fs.Args(), "") {
		// Else "remove region : no such file or directory".
		fmt.Fprintln(stderr, "lockword rm: a region PATH is empty")
		fmt.Fprintln(stderr, "Run 'lockword rm -help' for usage.")
		return exitUsage
	}
	status := exitOK
	for _, path := range fs.Args() {
		err := shm.Remove(path, nil)
		if err != nil && *force {
			err = forceRemove(path, err, stderr)
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, os.ErrNotExist), errors.Is(err, shm.ErrNotRegularFile), errors.Is(err, os.ErrPermission), errors.Is(err, shm.ErrUnsupported),
			errors.Is(err, shm.ErrBadMagic), errors.Is(err, shm.ErrNotInitialized):
			status = exitUsage
		case status == exitOK:
			status = exitFail
		}
		hint := ""
		if !*force && damagedRegion(err) {
			hint = " (a damaged region: 'lockword rm -force PATH' removes it anyway)"
		}
		fmt.Fprintf(stderr, "lockword rm: %s%s\n", errText(err), hint)
	}
	return status
}

// forceRemove is rm -force of path after a plain removal failed with
// refusal: it removes the region with RemoveOptions.Force and, if that
// succeeds, says on stderr what it overrode (an operator who forced the
// removal of a region in use must learn which processes still use it);
// it returns the forced removal's error.
func forceRemove(path string, refusal error, stderr io.Writer) error {
	why := errText(refusal)
	if errors.Is(refusal, shm.ErrRegionInUse) {
		if info, err := shm.Inspect(path); err == nil {
			why = "live processes were attached: " + liveProcesses(info)
		}
	}
	err := shm.Remove(path, &shm.RemoveOptions{Force: true})
	if err == nil {
		fmt.Fprintf(stderr, "lockword rm: removed %s by -force, although %s\n", path, why)
	}
	return err
}

// liveProcesses names the live processes attached to a region, each with
// its state, the locks it holds and the semaphore permits it holds:
// "PID 41 (running), PID 42 (stopped, holding "orders", holding 3 permits
// of "gpus")".
func liveProcesses(info *shm.RegionInfo) string {
	var ps []string
	for _, p := range info.Processes {
		if !p.Alive {
			continue
		}
		what := []string{processState(p.PID, true)}
		for _, o := range info.Objects {
			if o.HolderPID == p.PID {
				what = append(what, fmt.Sprintf("holding %q", o.Name))
			}
			if o.Semaphore == nil {
				continue
			}
			for _, sp := range o.Semaphore.Processes {
				if sp.PID == p.PID && sp.Held > 0 {
					what = append(what, fmt.Sprintf("holding %d permits of %q", sp.Held, o.Name))
				}
			}
		}
		ps = append(ps, fmt.Sprintf("PID %d (%s)", p.PID, strings.Join(what, ", ")))
	}
	if len(ps) == 0 {
		return "none any more"
	}
	return strings.Join(ps, ", ")
}

// damagedRegion reports whether err is an open check that fails only after
// the magic number and the ABI version passed: the file is a region of
// ours, damaged, and -force removes it (shm.RemoveOptions.Force).
func damagedRegion(err error) bool {
	for _, e := range []error{shm.ErrBadSize, shm.ErrBadChecksum, shm.ErrObjectName, shm.ErrObjectKind,
		shm.ErrObjectBounds, shm.ErrObjectAlignment, shm.ErrForeignPIDNamespace} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// parseFlags is parseInterspersed for inspect, ls and rm: -1 to go on, or the exit
// status (exitOK after -help, exitUsage after a bad flag); fs.Args() are
// then the operands.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, help func(io.Writer)) int {
	operands, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help(stdout)
			return exitOK
		}
		return reportFlagError(fs, err, stderr)
	}
	fs.Parse(append([]string{"--"}, operands...))
	return -1
}
