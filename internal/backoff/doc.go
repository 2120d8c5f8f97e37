// Package backoff holds what the lock-word loops of package lockword and
// package shm share below both: the CPU's spin-wait hint (Pause, in
// assembly on amd64 and arm64) and the bounds on loops that retry a CAS.
package backoff

// Retry bounds. A loop that retries a CAS only because another party moved
// the word meanwhile makes progress in every valid history, but a word
// rewritten by something outside the protocol could keep it failing for
// ever: such loops look at their context (or give up) every
// RetryCheckEvery tries, and loops without a context stop after
// RetryLimit, treating the word as changed under them.
const (
	RetryCheckEvery = 64
	RetryLimit      = 1 << 16
)
