//go:build !lockword_deadlock

package lockword

// deadlockBuilt: this build has no deadlock detection (build with
// -tags lockword_deadlock for it). The hooks in the fast paths are
// statements `if deadlockBuilt && ...`, which the compiler drops before it
// weighs a function for inlining: the fast paths stay as they are.
const deadlockBuilt = false
