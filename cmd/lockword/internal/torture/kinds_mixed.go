package torture

// torture -lock shared-c: the -procs torture of shm.Mutex with half of
// its worker processes written in C (c/test/cworker.c over the C library
// c/lockword.c), or a third in Python through ctypes (shared-c-py). Every
// process, whatever its language, follows the same critical section on the
// same shared state (the st* layout of procs_worker.go) and takes the same
// lock word, so the counter is exact only if the two implementations of
// the protocol exclude each other, and with -kill a holder of either
// language is recovered by a waiter of either.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/lockword/lockword/internal/cbuild"
)

// The languages of a mixed kind's worker processes, by turns: process p
// runs languages[p % len(languages)].
var mixedLanguages = map[string][]string{
	"shared-c":        {"go", "c"},
	"shared-c-py":     {"go", "c", "python"},
	"shared-c-broken": {"go", "c"},
}

func init() {
	register(
		kind{name: "shared-c", procs: true, prepare: prepareC,
			desc: "shm.Mutex taken by Go and C worker processes (every other process is C; see below)",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-c", false) }},
		kind{name: "shared-c-py", procs: true, prepare: preparePython,
			desc: "shm.Mutex taken by Go, C and Python (ctypes) worker processes, by turns",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-c-py", false) }},
		kind{name: "shared-c-broken", procs: true, prepare: prepareC,
			desc: "shared-c whose C workers use a trylock that ignores the word: must FAIL",
			run:  func(cfg *config) (report, error) { return tortureProcs(cfg, "shared-c-broken", false) }},
	)
	kindHelp = append(kindHelp, `C and Python workers (-lock shared-c, shared-c-py, shared-c-broken; need -procs N):
  Every other worker process (shared-c), or every third (C, then Python:
  shared-c-py), runs the C worker, c/test/cworker.c, instead of this binary:
  the same critical section on the same region words, through the C library
  c/lockword.c. With -kill, holders of every language are killed and
  recovered by waiters of any. The C sources travel inside this binary:
  the C worker is built from them with the system C compiler ($CC, else
  gcc, else cc) into the user cache directory, once per version of the
  sources, before the run starts; without a compiler the run does not
  start (exit status 2). $LOCKWORD_C_DIR names a c directory of the module
  to build instead; $LOCKWORD_C_WORKER names a built cworker to use.
  shared-c-py also needs python3 (and the compiler, for liblockword.so).
    lockword torture -lock shared-c -procs 4
    lockword torture -lock shared-c -procs 4 -kill -kills 200
`)
}

// prepareC builds the C worker before a C kind's run (cbuild.Cached keeps
// it for the run's processes).
func prepareC() error {
	_, err := cbuild.Cached()
	return err
}

// preparePython builds the C library and finds python3 before a run of
// shared-c-py.
func preparePython() error {
	b, err := cbuild.Cached()
	if err != nil {
		return err
	}
	if b.Shared == "" || b.Python == "" {
		return fmt.Errorf("shared-c-py needs liblockword.so, which is built from the sources (unset LOCKWORD_C_WORKER)")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		return fmt.Errorf("shared-c-py needs python3: %w", err)
	}
	return nil
}

// procOfID returns the process that the first run gives worker id (ids are
// handed out by spreadIDs, as tortureProcs does): a replacement keeps its
// victim's language.
func procOfID(spec *workerSpec, id int) int {
	for p, ids := range spreadIDs(spec.Workers, spec.Procs) {
		if slices.Contains(ids, id) {
			return p
		}
	}
	return 0
}

// procWorkerCommand returns the command that runs one worker process of
// spec: this binary, re-executed (workerCommand), or for a mixed kind's C
// and Python processes the C worker or the Python script.
func procWorkerCommand(exe string, spec workerSpec) (*exec.Cmd, error) {
	langs := mixedLanguages[spec.Kind]
	lang := "go"
	if len(langs) > 0 && len(spec.IDs) > 0 {
		lang = langs[procOfID(&spec, spec.IDs[0])%len(langs)]
	}
	if lang == "go" {
		js, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		cmd := workerCommand(exe, spec.Kind, spec.Region)
		cmd.Env = append(os.Environ(), workerEnv+"="+string(js))
		return cmd, nil
	}
	b, err := cbuild.Cached()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(spec.IDs))
	for i, id := range spec.IDs {
		ids[i] = strconv.Itoa(id)
	}
	args := []string{spec.Region, strconv.Itoa(spec.Proc), strconv.Itoa(spec.Procs), strconv.Itoa(spec.Workers),
		strconv.FormatInt(spec.Value, 10), strconv.Itoa(spec.Work), strconv.Itoa(btoi(spec.Kill)),
		strconv.Itoa(btoi(spec.Kind == "shared-c-broken")), strconv.FormatInt(spec.Iters, 10), strings.Join(ids, ",")}
	if lang == "c" {
		return exec.Command(b.Worker, append([]string{"torture"}, args...)...), nil
	}
	if b.Shared == "" || b.Python == "" {
		return nil, fmt.Errorf("shared-c-py needs liblockword.so, which is built from the sources (unset LOCKWORD_C_WORKER)")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, fmt.Errorf("shared-c-py needs python3: %w", err)
	}
	return exec.Command(py, append([]string{b.Python, b.Shared}, args...)...), nil
}

// langLogEnv names a file to which the workers of every language append
// "LANG start PID 0" (C and Python) and "LANG recovered PID DEADPID" lines:
// the tests learn from it which holders were recovered by whom.
const langLogEnv = "LOCKWORD_TORTURE_LANG_LOG"

// noteLanguage appends a Go worker's line to $LOCKWORD_TORTURE_LANG_LOG.
func noteLanguage(what string, pid int) {
	path := os.Getenv(langLogEnv)
	if path == "" {
		return
	}
	if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintf(f, "go %s %d %d\n", what, os.Getpid(), pid)
		f.Close()
	}
}
