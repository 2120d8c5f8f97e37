package torture

// The tests run torture in-process, and its -procs runs re-execute this
// test binary as their workers (/proc/self/exe): serve them before any
// test starts, as lockword's main package does from its init.
func init() { ServeWorker() }
