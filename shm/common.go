package shm

import (
	"github.com/lockword/lockword/internal/backoff"
)

// What the shared kinds take from below this package, under the names the
// root package's locks give them, so that a kind reads the same in both.

// noCopy makes go vet's copylocks check flag copies of the values that
// embed it: a handle copied by value would split its in-process state.
type noCopy struct{}

// Lock is a no-op used by go vet's copylocks check.
func (*noCopy) Lock() {}

// Unlock is a no-op used by go vet's copylocks check.
func (*noCopy) Unlock() {}

// procyield executes the CPU's spin-wait hint cycles times (backoff.Pause).
func procyield(cycles uint32) { backoff.Pause(cycles) }

// Retry bounds (see internal/backoff): a loop that retries a CAS looks at
// its context every retryCheckEvery tries, and one without a context gives
// up after retryLimit, treating the word as changed under it.
const (
	retryCheckEvery = backoff.RetryCheckEvery
	retryLimit      = backoff.RetryLimit
)

// wakeAll is the n of the futex wake-ups (wakeShared) for "every waiter".
const wakeAll = 1<<31 - 1

// validToken reports whether tok can be an owner token that a region
// issued: a slot and a generation in 1..ownerGenMax (see makeToken).
func validToken(tok uint32) bool {
	g := tokenGen(tok)
	return g != 0 && g <= ownerGenMax
}
