package torture

// The registry of torture kinds. Each kinds_*.go file registers its kinds
// from init with one entry each (a name, a line of help, a run function that
// returns a report); the harness and the help find them here.

import (
	"fmt"
	"strings"
)

// A kind is one lock that torture can hammer, with what the help says
// about it. Kinds live in a registry filled by the kinds_*.go files.
type kind struct {
	name  string // the -lock name: lower case, no commas
	desc  string // one line for the help
	inAll bool   // whether -lock all, the default, includes it
	// procs marks a kind that runs across processes (-procs N); -lock all
	// with -procs means the procs kinds marked inAll, and without it the
	// others.
	procs bool
	// both marks a kind that runs in one process and, with -procs N,
	// across processes (the etcd kinds); it is listed with the in-process
	// kinds.
	both bool
	// acrossProcs names the kind that -procs runs instead of this
	// in-process one (ring: shared-ring), so that "-lock ring -procs 2"
	// works as the issue writes it; "" for none.
	acrossProcs string
	// usage, when set, checks the flags that only this kind constrains
	// (the shared ring needs exactly -procs 2): an error is a usage error,
	// reported before anything runs, with exit status 2.
	usage func(cfg *config) error
	// prepare, when set, makes what the kind needs from this machine
	// (the C kinds build their worker): an error is a set-up error,
	// reported before any kind runs, with exit status 2, as a usage
	// error is, since it says nothing about a lock.
	prepare func() error
	// run tortures one fresh lock of this kind under cfg and reports what
	// it found. An error means the run could not be set up (a shared
	// mapping that failed, say), not that the lock failed: a lock that
	// failed is a report whose result is FAIL.
	run func(cfg *config) (report, error)
}

// kinds is the registry, in registration order: the order of the help and
// of -lock all.
var kinds []*kind

// kindHelp holds help sections that kinds files add (from init) for kinds
// whose experiment or output differs from the locked counter's. Each is
// printed after the flags, and should end with a newline.
var kindHelp []string

// register adds kinds to the registry. The kinds_*.go files call it from
// init, so kinds appear in the order of those files' names (Go runs init
// functions in the order files are given to the compiler, which the go
// command sorts) and, within a file, in the order of the arguments.
func register(ks ...kind) {
	for _, k := range ks {
		if k.name == "" || k.name == "all" || strings.ContainsAny(k.name, ", ") || k.run == nil {
			panic(fmt.Sprintf("lockword: bad torture kind %q", k.name))
		}
		if lookupKind(k.name) != nil {
			panic(fmt.Sprintf("lockword: torture kind %q registered twice", k.name))
		}
		kinds = append(kinds, &k)
	}
}

// lookupKind returns the registered kind called name, or nil.
func lookupKind(name string) *kind {
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	return nil
}

// parseKinds turns a -lock value into kinds: names separated by commas,
// where all stands for every kind marked inAll. A kind named twice runs
// once, at its first position.
func parseKinds(spec string) ([]*kind, error) {
	var out []*kind
	seen := map[*kind]bool{}
	add := func(k *kind) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for name := range strings.SplitSeq(spec, ",") {
		name = strings.TrimSpace(name)
		switch k := lookupKind(name); {
		case name == "all", name == "all-procs":
			for _, k := range kinds {
				if k.inAll && k.procs == (name == "all-procs") {
					add(k)
				}
			}
		case k != nil:
			add(k)
		case name == "":
			return nil, fmt.Errorf("-lock %q names an empty lock kind (valid kinds: %s)", spec, kindNames())
		default:
			return nil, fmt.Errorf("unknown lock kind %q in -lock (valid kinds: %s)", name, kindNames())
		}
	}
	return out, nil
}

// kindNames lists the valid -lock names for error messages.
func kindNames() string {
	names := make([]string, 0, len(kinds)+1)
	for _, k := range kinds {
		names = append(names, k.name)
	}
	return strings.Join(append(names, "all"), ", ")
}

// procKindNames lists the kinds that run across processes.
func procKindNames() string {
	var names []string
	for _, k := range kinds {
		if k.procs {
			names = append(names, k.name)
		}
	}
	return strings.Join(names, ", ")
}
